"""What keeps a team inside its namespace on the Kubernetes path (docs/kubernetes.md, "Tenant isolation").

A team's users get the ``edit`` ClusterRole in the team's namespace, so they may create any pod the
namespace admits. Without a Pod Security level that includes a privileged pod, a host-network pod or a
hostPath mount of ``/``: root on the node. This module computes, as plain data:

- the Pod Security Admission labels of every team namespace: ``enforce: baseline`` (the level that
  prevents known privilege escalations: no privileged containers, host namespaces, hostPath volumes,
  host ports or added capabilities beyond the default set), ``audit`` and ``warn`` at ``restricted``,
  each pinned to :data:`POD_SECURITY_VERSION`
  (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
  https://kubernetes.io/docs/concepts/security/pod-security-admission/);
- the NetworkPolicies of every team namespace: default deny of ingress and egress, then DNS, the
  namespace's own pods (NCCL bootstrap, Ray's GCS, object store and workers), and the KubeRay operator
  to the Ray head's dashboard (the job API it polls)
  (https://kubernetes.io/docs/concepts/services-networking/network-policies/);
- the team's storage: the shared file system paths and the local scratch as PersistentVolumes the
  administrator's role applies (a hostPath in a PersistentVolume is not in the pod's spec, so the
  namespace's level admits the pod that claims it) pre-bound to a claim in the team's namespace and
  pointing to the team's own folder ``<path>/<team>``: a pod of one team sees no other team's files,
  even as root in its container.

Why ``baseline`` and not ``restricted``: ``restricted`` also requires a non-root user, no privilege
escalation and every capability dropped; the NGC and most training images run as root, so
``restricted`` would refuse the teams' own images. The collection's own pods (the Ray templates) are
``restricted`` (:func:`restricted_security_context`), so ``warn``/``audit`` stay silent for them and
name every other pod that is not.

Why the version is pinned and not ``latest``: a pinned version keeps the level's definition fixed when the
control plane is upgraded (``latest`` would tighten it under running workloads, the upgrade note of the
admission page), and it is the release the manifests are validated against (tools/k8s/validate_manifests.py
``KUBERNETES_VERSION``, a unit test keeps the two equal): the oldest minor release upstream still
maintains, so every supported cluster knows it.
"""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.model import (
    JsonObject,
    JsonValue,
    NodeSettings,
    TeamFolder,
)

PSA = "pod-security.kubernetes.io"
#: the Pod Security Standards' version the labels pin (the oldest maintained minor release, as the validator's)
POD_SECURITY_VERSION = "v1.35"
ENFORCE_LEVEL = "baseline"
AUDIT_LEVEL = "restricted"
#: kube-apiserver sets this immutable label on every namespace (Kubernetes 1.22+): a policy's namespace
#: selector on it cannot be satisfied by a namespace a team labels itself
#: (https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: the cluster DNS (CoreDNS keeps kube-dns's label for compatibility)
#: (https://kubernetes.io/docs/tasks/administer-cluster/dns-custom-nameservers/)
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
#: where the site installs the KubeRay operator (helm install -n ray-system): it polls a RayJob's head on the
#: dashboard port (https://docs.ray.io/en/latest/cluster/kubernetes/getting-started/rayjob-quick-start.html)
KUBERAY_NAMESPACE = "ray-system"
KUBERAY_OPERATOR_LABELS = {"app.kubernetes.io/name": "kuberay-operator"}
#: KubeRay labels every Ray pod with its node type (head or worker)
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAY_DASHBOARD_PORT = 8265
#: the user and group of the rayproject/ray images (user ``ray``): numeric, so runAsNonRoot can be checked
RAY_UID = 1000
RAY_GID = 100
#: a PersistentVolume's capacity is what a claim may ask; a hostPath volume enforces none (nominal)
CLAIM_SIZE = "1Ti"


def namespace_labels() -> dict[str, str]:
    """The Pod Security Admission labels of a team namespace: enforce baseline, audit and warn restricted."""
    labels = {f"{PSA}/enforce": ENFORCE_LEVEL, f"{PSA}/enforce-version": POD_SECURITY_VERSION}
    for mode in ("audit", "warn"):
        labels[f"{PSA}/{mode}"] = AUDIT_LEVEL
        labels[f"{PSA}/{mode}-version"] = POD_SECURITY_VERSION
    return labels


def _policy(name: str, namespace: str, spec: JsonObject, labels: dict[str, str]) -> JsonObject:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }


def network_policies(namespace: str, labels: dict[str, str]) -> list[JsonObject]:
    """A team namespace's NetworkPolicies (policies add up: a connection is allowed if one allows it).

    - ``default-deny``: every pod, ingress and egress, nothing allowed;
    - ``allow-dns``: egress to the cluster DNS (UDP and TCP 53) in kube-system;
    - ``allow-same-namespace``: ingress from and egress to the namespace's own pods, every port: NCCL's
      socket bootstrap, Ray's GCS (6379), object manager, workers and the dashboard (8265) for the team's
      own submitter pods;
    - ``allow-kuberay-to-ray-head``: the KubeRay operator (its namespace and its pod label) to the Ray heads'
      dashboard port, which it polls for a RayJob's status.

    Nothing else: no egress to the API server (no job pod here calls it: the Ray autoscaler is off), no
    egress to storage (the shared file system is the node's mount, read and written by the node's kernel
    client, not over the pod network), no egress to the internet (a site that lets jobs download adds its
    own policy in the overlay). RDMA traffic (InfiniBand verbs, RoCE) bypasses the pod network and these
    policies: the fabric's partitions are what separate it.
    """
    return [
        _policy("default-deny", namespace, {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}, labels),
        _policy(
            "allow-dns",
            namespace,
            {
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [
                            {
                                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: DNS_NAMESPACE}},
                                "podSelector": {"matchLabels": dict(DNS_POD_LABELS)},
                            }
                        ],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                    }
                ],
            },
            labels,
        ),
        _policy(
            "allow-same-namespace",
            namespace,
            {
                "podSelector": {},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
                "egress": [{"to": [{"podSelector": {}}]}],
            },
            labels,
        ),
        _policy(
            "allow-kuberay-to-ray-head",
            namespace,
            {
                "podSelector": {"matchLabels": {RAY_NODE_TYPE_LABEL: "head"}},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [
                            {
                                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: KUBERAY_NAMESPACE}},
                                "podSelector": {"matchLabels": dict(KUBERAY_OPERATOR_LABELS)},
                            }
                        ],
                        "ports": [{"protocol": "TCP", "port": RAY_DASHBOARD_PORT}],
                    }
                ],
            },
            labels,
        ),
    ]


def restricted_security_context() -> tuple[JsonObject, JsonObject]:
    """(pod, container) securityContext of the collection's own pods: the ``restricted`` level's rules
    (non-root numeric user, no privilege escalation, every capability dropped, the runtime's seccomp profile).
    RDMA needs no capability: registered memory counts against RLIMIT_MEMLOCK, which the pod inherits from
    the container runtime (containerd's ``LimitMEMLOCK=infinity`` on the node; docs/kubernetes.md)."""
    pod: JsonObject = {
        "runAsNonRoot": True,
        "runAsUser": RAY_UID,
        "runAsGroup": RAY_GID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container: JsonObject = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return pod, container


def storage_name(team: str, volume: str) -> str:
    """The PersistentVolume of a team's volume (cluster-scoped, so the team is in its name)."""
    return f"gpucluster-{team}-{volume}"


def storage_objects(namespace: str, paths: dict[str, str], labels: dict[str, str]) -> list[JsonObject]:
    """Per volume (``paths``: volume name -> the node's path): a PersistentVolume of the team's folder
    ``<path>/<namespace>`` on the node (hostPath, type Directory: the site creates it, owned by the team) and the
    claim in the team's namespace it is bound to (``claimRef`` on the volume, ``volumeName`` on the claim: no
    other namespace's claim can bind it; storage class "": no dynamic provisioning)."""
    out: list[JsonObject] = []
    for volume, path in sorted(paths.items()):
        pv = storage_name(namespace, volume)
        access: list[JsonValue] = ["ReadWriteMany"]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": pv, "labels": dict(labels)},
                "spec": {
                    "capacity": {"storage": CLAIM_SIZE},
                    "accessModes": access,
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "claimRef": {"namespace": namespace, "name": volume},
                    "hostPath": {"path": f"{path.rstrip('/')}/{namespace}", "type": "Directory"},
                },
            }
        )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": volume, "namespace": namespace, "labels": dict(labels)},
                "spec": {
                    "accessModes": access,
                    "storageClassName": "",
                    "volumeName": pv,
                    "resources": {"requests": {"storage": CLAIM_SIZE}},
                },
            }
        )
    return out


#: containerd's systemd drop-in on the Kubernetes path's GPU nodes (compute role, vars/files.yml): a pod
#: inherits RLIMIT_MEMLOCK from the container runtime, and without IPC_LOCK (refused by ``baseline``)
#: that limit is all RDMA has to pin its registered memory against
#: (https://www.freedesktop.org/software/systemd/man/latest/systemd.exec.html#LimitCPU=,
#: https://man7.org/linux/man-pages/man2/mlock.2.html: "an unprivileged process [...] RLIMIT_MEMLOCK")
CONTAINERD_DROPIN = "/etc/systemd/system/containerd.service.d/gpucluster-memlock.conf"
#: the team folders' owner, group and mode (docs/kubernetes.md, "Tenant isolation"): sticky and writable by
#: every user id in the team's own pods (the Ray templates run as RAY_UID, the teams' images as root or
#: any user), like /tmp and the Slurm path's checkpoint staging folder. The mode does not separate the
#: teams, and cannot: a baseline pod's root keeps the runtime's default capabilities, CAP_DAC_OVERRIDE and
#: CAP_FOWNER among them, and ignores it. The mount does: a team's pods get only ``<path>/<team>``.
TEAM_FOLDER_OWNER = "root"
TEAM_FOLDER_GROUP = "root"
TEAM_FOLDER_MODE = "1777"


def systemd_memlock(limit: str) -> str:
    """A limits.conf memlock value (``unlimited`` or KiB) as systemd's ``LimitMEMLOCK=`` (``infinity`` or
    bytes with systemd's base-1024 ``K`` suffix: the same limit)."""
    return "infinity" if limit == "unlimited" else f"{int(limit)}K"


def node_settings(
    memlock: str,
    memlock_source: str,
    paths: dict[str, str],
    teams: list[str],
    shared_roots: list[str],
) -> NodeSettings:
    """plan["kubernetes"]["node"]: what the compute role sets on a GPU node for the teams' pods.

    - ``containerd``: the drop-in's path and its ``LimitMEMLOCK`` (``memlock``: the nodes' memlock limit of
      limits.conf, ``unlimited`` or the lab's KiB), with where the value comes from;
    - ``team_folders``: every folder a team's PersistentVolume points to (:func:`storage_objects`,
      ``<path>/<team>`` for each ``paths`` volume and team), sorted, with owner, group and mode (the
      gpucluster.tiers.host_state module's ``paths``);
    - ``team_folder_mounts``: per shared file system root (``shared_roots``: its mount point), the team
      folders on it: the role creates those only once the file system is mounted, never in the empty mount
      point. The node's own folders (local scratch, staging) are in none; the lab passes no root (its
      shared paths are plain folders of the container)."""
    roots = sorted({r.rstrip("/") or "/" for r in shared_roots}, key=len, reverse=True)
    bases = sorted({p.rstrip("/") or "/" for p in paths.values()})
    for i, team in enumerate(teams):
        # a team folder that is (or holds) another volume's path would give the team every team's folder of
        # that volume: the team "checkpoint-staging" with the scratch /raid gets /raid/checkpoint-staging
        for base in bases:
            folder = f"{base.rstrip('/')}/{team}"
            clash = [b for b in bases if b == folder or b.startswith(f"{folder}/")]
            require(
                not clash,
                f"gpucluster_tenants[{i}].name",
                team,
                f"a team name that is not a folder of the team storage paths ({', '.join(bases)}): "
                f"{folder} would be or hold {clash[0] if clash else ''}, the path of another volume "
                "with every team's folder",
            )
    folders: list[TeamFolder] = []
    on_root: dict[str, list[str]] = {}
    for _volume, path in sorted(paths.items()):
        base = path.rstrip("/")
        root = next((r for r in roots if r == "/" or base == r or base.startswith(f"{r}/")), None)
        for team in teams:
            folder = f"{base}/{team}"
            folders.append(
                {"path": folder, "owner": TEAM_FOLDER_OWNER, "group": TEAM_FOLDER_GROUP, "mode": TEAM_FOLDER_MODE}
            )
            if root is not None:
                on_root.setdefault(root, []).append(folder)
    return {
        "containerd": {
            "dropin": CONTAINERD_DROPIN,
            "limit_memlock": systemd_memlock(memlock),
            "source": memlock_source,
        },
        "team_folders": sorted(folders, key=lambda f: f["path"]),
        "team_folder_mounts": {root: sorted(f) for root, f in sorted(on_root.items())},
    }
