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

from typing import Any

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


def _policy(name: str, namespace: str, spec: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }


def network_policies(namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
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


def restricted_security_context() -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod, container) securityContext of the collection's own pods: the ``restricted`` level's rules
    (non-root numeric user, no privilege escalation, every capability dropped, the runtime's seccomp profile).
    RDMA needs no capability: registered memory counts against RLIMIT_MEMLOCK, which the pod inherits from
    the container runtime (containerd's ``LimitMEMLOCK=infinity`` on the node; docs/kubernetes.md)."""
    pod = {
        "runAsNonRoot": True,
        "runAsUser": RAY_UID,
        "runAsGroup": RAY_GID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return pod, container


def storage_name(team: str, volume: str) -> str:
    """The PersistentVolume of a team's volume (cluster-scoped, so the team is in its name)."""
    return f"gpucluster-{team}-{volume}"


def storage_objects(namespace: str, paths: dict[str, str], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Per volume (``paths``: volume name -> the node's path): a PersistentVolume of the team's folder
    ``<path>/<namespace>`` on the node (hostPath, type Directory: the site creates it, owned by the team) and the
    claim in the team's namespace it is bound to (``claimRef`` on the volume, ``volumeName`` on the claim: no
    other namespace's claim can bind it; storage class "": no dynamic provisioning)."""
    out: list[dict[str, Any]] = []
    for volume, path in sorted(paths.items()):
        pv = storage_name(namespace, volume)
        access = ["ReadWriteMany"]
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
