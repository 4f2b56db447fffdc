"""The Kubernetes objects a GPU training cluster needs, computed from the plan (docs/kubernetes.md).

Used when ``gpucluster_cluster.scheduler`` is ``kubernetes``. The collection does not install
Kubernetes (the site brings kubeadm, Kubespray or a vendor distribution, with Kueue, KubeRay, the
NVIDIA GPU Operator and the NVIDIA Network Operator); it computes what sits on it, as plain data:

- node labels and taints per compute node (GPU model and count, NVLink domain, fabric block,
  rack, cooling, storage) and a Kueue ``Topology`` over them so a gang lands under as few switches
  as possible;
- Kueue: a ``ResourceFlavor`` for the GPU model (the GPU nodes, ``node-pool: gpu``) and one for the
  CPU node pool (``node-pool: cpu``, the head: where the Ray heads run), ``ClusterQueue``s whose GPU
  flavor quotas add up to exactly what the GPU nodes allocate, a ``LocalQueue`` per team
  (``plan["tenants"]``) and ``WorkloadPriorityClass``es;
- KubeRay: a ``RayCluster`` and a ``RayJob`` whose workers take whole GPU nodes (less the kubelet's
  and the system's reservation and the node's DaemonSets), with the plan's NCCL environment, the
  shared file system and the RDMA devices, and whose head runs on the CPU pool (its own node selector
  and flavor: it never takes a GPU node's last CPUs, so a whole-cluster job fits);
- the GPU Operator's ``ClusterPolicy`` and the Network Operator's ``NicClusterPolicy``;
- per team namespace what keeps the team in it (kubernetes/tenancy.py): Pod Security ``baseline``,
  default-deny NetworkPolicies, the team's storage as PersistentVolumes of its own folders; team names
  that are an operator's or the system's namespace are refused (inventory/tenants.py).

Pure: takes the plan (and nothing else), returns ``{"nodes", "manifests", "kustomization", ...}``;
each manifest entry is ``{"path": "<dir>/<name>.yaml", "object": {...}, "template": bool}`` with plain
JSON types; ``template`` objects (the KubeRay jobs) are for the teams to submit, never applied.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.mig import mig_parted_config
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.node import NodeResources
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tenants import check_namespaces
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes import tenancy

#: label prefix of the collection's own node labels
PREFIX = "gpucluster.io"
HOSTNAME_LABEL = "kubernetes.io/hostname"  # set by the kubelet on every node (Kubernetes well-known labels)
#: the GPU Operator's device plugin advertises this extended resource
#: (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html)
GPU_RESOURCE = "nvidia.com/gpu"
#: the Network Operator's RDMA shared device plugin advertises rdma/<resourceName>
#: (https://github.com/Mellanox/k8s-rdma-shared-dev-plugin#rdma-shared-device-plugin-configurations)
RDMA_RESOURCE_NAME = "rdma_shared_device_a"
RDMA_RESOURCE = f"rdma/{RDMA_RESOURCE_NAME}"
#: taint that keeps pods which do not ask for GPUs off the GPU nodes
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
#: MIG (compute/mig.py): the node label MIG Manager reads, and the ConfigMap with the mig-parted configs, in
#: the GPU Operator's namespace (docs/sources.md [G8])
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_MAP = "gpucluster-mig-parted-config"
GPU_OPERATOR_NAMESPACE = "gpu-operator"
#: what a whole-node worker leaves to the node's DaemonSets (GPU/Network Operator agents, DCGM
#: exporter, node-exporter, CNI): a project choice, not a hardware number
DAEMONSET_CPU = 4
DAEMONSET_MEMORY_MIB = 16 * 1024
#: The kubelet's Node Allocatable: capacity - kube-reserved - system-reserved - the hard eviction
#: threshold is what the scheduler may place pods on ("The scheduler does not over-subscribe
#: Allocatable", https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/,
#: docs/sources.md [K1]). kube-reserved (kubelet, container runtime) and the CPU of system-reserved
#: are a project choice; system-reserved memory is the OS reserve Slurm keeps out of RealMemory too
#: (compute/node.py: max(4 GiB, 5 %)); evictionHard memory.available 100Mi is the kubelet's default.
KUBE_RESERVED_CPU = 1
KUBE_RESERVED_MEMORY_MIB = 2 * 1024
SYSTEM_RESERVED_CPU = 1
EVICTION_HARD_MEMORY_MIB = 100
#: Ray head pod (no GPU, no storage mounts): a project choice. It runs on the CPU node pool (nodes labelled
#: node-pool=cpu: the cluster's head by default), never on a GPU node whose CPUs the workers take.
RAY_HEAD_CPU = 8
RAY_HEAD_MEMORY_MIB = 32 * 1024
RAY_HEAD_MEMORY = f"{RAY_HEAD_MEMORY_MIB // 1024}Gi"
POOL_LABEL = f"{PREFIX}/node-pool"
#: kubeadm taints control-plane nodes so that ordinary pods stay off; the Ray head tolerates it on the CPU
#: pool (https://kubernetes.io/docs/reference/labels-annotations-taints/#node-role-kubernetes-io-control-plane)
CONTROL_PLANE_TOLERATION = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Exists",
    "effect": "NoSchedule",
}
CPU_FLAVOR = "cpu-pool"
#: images: pinned here, overridden per site with kustomize's ``images:`` in the overlay. Ray 2.52 is the first
#: release with token authentication of the dashboard, the job API and the GCS (RAY_AUTH_MODE=token), which
#: KubeRay's ``authOptions`` turns on (https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/kuberay-auth.html)
RAY_VERSION = "2.52.0"
RAY_IMAGE = f"rayproject/ray:{RAY_VERSION}-py310-gpu"
RDMA_PLUGIN = {"image": "k8s-rdma-shared-dev-plugin", "repository": "ghcr.io/mellanox", "version": "v1.5.2"}
#: Kueue priorities: values are relative (higher admits first and may preempt lower)
#: (https://kueue.sigs.k8s.io/docs/concepts/workload_priority_class/)
PRIORITIES = (
    ("production", 10000, "deadline-bound training and evaluation; may preempt lower priorities"),
    ("normal", 1000, "the default for research training"),
    ("preemptible", 100, "best-effort work that borrows idle GPUs and is preempted first"),
)
DEFAULT_PRIORITY = "normal"
DEFAULT_NAMESPACE = "training"
#: the pod network's interface in every pod: the container runtime's CNI call names it eth0 (CRI's default);
#: NCCL's socket bootstrap uses it (the workers are not on the host network: Pod Security baseline forbids it)
POD_INTERFACE = "eth0"
#: the namespaces outside the teams' that the plan itself writes objects into or names in a policy
OPERATOR_NAMESPACES = (GPU_OPERATOR_NAMESPACE, tenancy.KUBERAY_NAMESPACE)
#: objects rendered as templates to submit, never applied by the role (kuberay/)
TEMPLATE_KINDS = frozenset({"RayJob", "RayCluster"})
#: the RayJob template's entrypoint: the cluster's resources as Ray sees them (GPUs = the plan's)
ENTRYPOINT = "python -c 'import ray; ray.init(); print(ray.cluster_resources())'"


@dataclass(frozen=True)
class NodeShape:
    """What one compute node offers to pods (the quota unit): ``cpus`` and ``memory_mib`` are its
    Node Allocatable (capacity less the kubelet's and the system's reservation and the eviction
    threshold), ``capacity_cpus`` and ``capacity_memory_mib`` what it has."""

    gpus: int
    cpus: int
    memory_mib: int
    rdma: int
    capacity_cpus: int = 0
    capacity_memory_mib: int = 0


def _dns(name: str) -> str:
    """A name usable as a Kubernetes object name (RFC 1123): h100_sxm -> h100-sxm."""
    return name.lower().replace("_", "-").replace(".", "-")


def _node_shape(plan: Mapping[str, Any], node: NodeResources) -> NodeShape:
    """What a GPU node gives pods: its CPUs and its memory after the OS reserve (compute/node.py), less what
    the kubelet keeps."""
    gpus = int(plan["cluster"]["gpus_per_node"])
    # one RDMA share per GPU: at most one pod per GPU needs the HCAs (rdmaHcaMax below)
    return NodeShape(
        gpus=gpus,
        cpus=node.cpus - KUBE_RESERVED_CPU - SYSTEM_RESERVED_CPU,
        memory_mib=node.after_os_mib - KUBE_RESERVED_MEMORY_MIB - EVICTION_HARD_MEMORY_MIB,
        rdma=gpus,
        capacity_cpus=node.cpus,
        capacity_memory_mib=node.memory_mib,
    )


def kubelet_reservation(shape: NodeShape) -> dict[str, Any]:
    """The KubeletConfiguration fields every GPU node needs for ``shape``'s Node Allocatable ([K1])."""
    system_mib = shape.capacity_memory_mib - shape.memory_mib - KUBE_RESERVED_MEMORY_MIB - EVICTION_HARD_MEMORY_MIB
    return {
        "kubeReserved": {"cpu": str(KUBE_RESERVED_CPU), "memory": f"{KUBE_RESERVED_MEMORY_MIB}Mi"},
        "systemReserved": {"cpu": str(SYSTEM_RESERVED_CPU), "memory": f"{max(system_mib, 0)}Mi"},
        "evictionHard": {"memory.available": f"{EVICTION_HARD_MEMORY_MIB}Mi"},
        "allocatable": {"cpu": shape.cpus, "memory": f"{shape.memory_mib}Mi"},
    }


def _blocks(plan: dict[str, Any]) -> dict[str, str]:
    """Host -> its scalable unit (the hosts that share the same leaf switches) from the fabric plan."""
    cabling = plan["fabric"].get("cabling") or {}
    out: dict[str, str] = {}
    for su in cabling.get("scalable_units") or []:
        for host in su["hosts"]:
            out[host] = su["name"]
    return out


def topology_levels(plan: dict[str, Any]) -> list[str]:
    """Kueue Topology levels, widest first, from the fabric plan.

    A fat tree has blocks (scalable units under their leaves) joined by spines, and racks within a
    block: block > rack > hostname. A rail-optimized fabric or a single switch has one leaf group
    that every node touches on all rails: leaf group > hostname. Kueue places a gang in the lowest
    level that holds it (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/)."""
    if plan["fabric"]["topology"] == "fat_tree":
        return [f"{PREFIX}/block", f"{PREFIX}/rack", HOSTNAME_LABEL]
    return [f"{PREFIX}/leaf-group", HOSTNAME_LABEL]


def node_labels(plan: dict[str, Any], cooling: str) -> dict[str, dict[str, Any]]:
    """Per compute node: labels and taints (plan["kubernetes"]["nodes"])."""
    cl = plan["cluster"]
    compute = [h for h, v in plan["hosts"].items() if "compute" in v["roles"]]
    blocks = _blocks(plan)
    per_rack = int(plan["power"]["nodes_per_rack"])
    out: dict[str, dict[str, Any]] = {}
    for i, host in enumerate(compute):
        block = blocks.get(host, cl["name"])  # no switched fabric: the whole cluster is one block
        out[host] = {
            "labels": {
                f"{PREFIX}/cluster": cl["name"],
                f"{PREFIX}/gpu-model": cl["gpu_model"],
                f"{PREFIX}/gpu-count": str(cl["gpus_per_node"]),
                # an HGX/DGX board: its GPUs share NVSwitches, the NVLink domain is the node itself
                f"{PREFIX}/nvlink-domain": host,
                f"{PREFIX}/fabric": plan["fabric"]["type"],
                f"{PREFIX}/block": block,
                f"{PREFIX}/leaf-group": block,
                f"{PREFIX}/rack": f"rack{i // per_rack + 1:02d}",  # the power plan's nodes per rack
                f"{PREFIX}/cooling": cooling,
                f"{PREFIX}/storage": plan["storage"]["type"],
                POOL_LABEL: "gpu",
            },
            "taints": [dict(GPU_TAINT)],
        }
        mig = (plan["gpu"].get("mig") or {}).get("host_config", {}).get(host)
        if mig:  # the GPU Operator's MIG Manager applies the mig-parted config the label names ([G8])
            out[host]["labels"][MIG_CONFIG_LABEL] = mig
    return out


def cpu_pool(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The CPU node pool where the Ray heads run: the cluster's head (no GPU, no GPU taint) unless it is a
    compute node too. A site with CPU workers of its own labels them node-pool=cpu as well."""
    cl = plan["cluster"]
    head = cl["head"]
    if "compute" in plan["hosts"].get(head, {}).get("roles", []):
        return {}
    return {head: {"labels": {f"{PREFIX}/cluster": cl["name"], POOL_LABEL: "cpu"}, "taints": []}}


def _quantity(resource: str, value: int) -> Any:
    return f"{value}Mi" if resource == "memory" else value


def _split(total: int, percent: float) -> int:
    return math.floor(total * percent / 100)


def _quotas(plan: dict[str, Any], shape: NodeShape) -> dict[str, int]:
    nodes = int(plan["cluster"]["compute_nodes"])
    mig = plan["gpu"].get("mig") or {}
    return {
        # a GPU in MIG mode is advertised as its MIG devices, not as nvidia.com/gpu (mixed strategy, [G8])
        GPU_RESOURCE: int(plan["cluster"]["gpus_total"]) - int(mig.get("mig_gpus", 0)),
        "cpu": shape.cpus * nodes,
        "memory": shape.memory_mib * nodes,
        RDMA_RESOURCE: shape.rdma * nodes,
    } | dict(mig.get("k8s_resources", {}))


def _resource_group(flavors: list[tuple[str, dict[str, int], dict[str, int] | None]]) -> dict[str, Any]:
    """One resource group over the first flavor's resources; every flavor lists them all, in that order
    (Kueue: each flavor of a group covers exactly the group's coveredResources)."""
    covered = list(flavors[0][1])
    out = []
    for flavor, quota, borrowing in flavors:
        resources = []
        for name in covered:
            entry: dict[str, Any] = {"name": name, "nominalQuota": _quantity(name, quota.get(name, 0))}
            if borrowing is not None:
                entry["borrowingLimit"] = _quantity(name, borrowing.get(name, 0))
            resources.append(entry)
        out.append({"name": flavor, "resources": resources})
    return {"coveredResources": covered, "flavors": out}


def _head_quota(heads: int) -> dict[str, int]:
    """The CPU pool flavor's quota: ``heads`` Ray heads (CPU and memory; nothing else)."""
    return {"cpu": RAY_HEAD_CPU * heads, "memory": RAY_HEAD_MEMORY_MIB * heads}


def _meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpucluster.tiers"}}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"].update(labels)
    return meta


def check_tenants(tenants: list[dict[str, Any]], gpus_total: int) -> None:
    """Tenants' guaranteed GPUs fit the cluster (the inventory layer checks shares; this checks GPUs)."""
    total = 0
    for i, t in enumerate(tenants):
        require(
            0 <= int(t["gpus"]) <= gpus_total,
            f"gpucluster_tenants[{i}].gpu_share_percent",
            t["gpu_share_percent"],
            f"a share whose GPUs fit the cluster's {gpus_total} GPUs",
        )
        total += int(t["gpus"])
    require(
        total <= gpus_total,
        "gpucluster_tenants",
        [t["name"] for t in tenants],
        f"guaranteed GPUs summing to at most the cluster's {gpus_total} (found {total})",
    )


def kueue_objects(plan: dict[str, Any], shape: NodeShape, levels: list[str]) -> list[dict[str, Any]]:
    """Topology, ResourceFlavor, Cohort, ClusterQueues, LocalQueues, WorkloadPriorityClasses."""
    cl = plan["cluster"]
    name = _dns(cl["name"])
    flavor = _dns(cl["gpu_model"])
    api = "kueue.x-k8s.io/v1beta2"
    out: list[dict[str, Any]] = [
        {
            "apiVersion": api,
            "kind": "Topology",
            "metadata": _meta(name),
            "spec": {"levels": [{"nodeLabel": label} for label in levels]},
        },
        {
            "apiVersion": api,
            "kind": "ResourceFlavor",
            "metadata": _meta(flavor),
            "spec": {
                "nodeLabels": {
                    f"{PREFIX}/gpu-model": cl["gpu_model"],
                    f"{PREFIX}/cluster": cl["name"],
                    POOL_LABEL: "gpu",
                },
                "tolerations": [dict(GPU_TOLERATION)],
                "topologyName": name,
            },
        },
        {
            # the Ray heads' flavor: a pod that selects node-pool=cpu cannot take the GPU flavor (its
            # nodeLabels say gpu), so Kueue assigns it this one and the head lands on the CPU pool
            "apiVersion": api,
            "kind": "ResourceFlavor",
            "metadata": _meta(CPU_FLAVOR),
            "spec": {
                "nodeLabels": {f"{PREFIX}/cluster": cl["name"], POOL_LABEL: "cpu"},
                "tolerations": [dict(CONTROL_PLANE_TOLERATION)],
            },
        },
    ]
    for prio, value, why in PRIORITIES:
        out.append(
            {
                "apiVersion": api,
                "kind": "WorkloadPriorityClass",
                "metadata": _meta(prio),
                "value": value,
                "description": why,
            }
        )
    total = _quotas(plan, shape)
    gpus_per_node = max(1, int(cl["gpus_per_node"]))
    tenants = plan.get("tenants") or []
    preemption = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    if not tenants:
        out.append(
            {
                "apiVersion": api,
                "kind": "ClusterQueue",
                "metadata": _meta(name),
                "spec": {
                    "namespaceSelector": {},
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    # one Ray head per GPU node at most: as many Ray clusters as there are nodes
                    "resourceGroups": [
                        _resource_group(
                            [(flavor, total, None), (CPU_FLAVOR, _head_quota(int(cl["compute_nodes"])), None)]
                        )
                    ],
                },
            }
        )
        out.append(
            {
                "apiVersion": api,
                "kind": "LocalQueue",
                "metadata": _meta(name, DEFAULT_NAMESPACE),
                "spec": {"clusterQueue": name},
            }
        )
        return out
    check_tenants(tenants, int(cl["gpus_total"]))
    rest = dict(total)
    for t in tenants:
        share = float(t["gpu_share_percent"])
        limit = float(t["borrowing_limit_percent"])
        # with MIG the whole GPUs left are shared like the other resources (a team's GPU count is of all GPUs)
        whole = GPU_RESOURCE if not plan["gpu"].get("mig") else None
        quota = {r: (int(t["gpus"]) if r == whole else _split(v, share)) for r, v in total.items()}
        borrow = {r: (int(t["borrowing_limit_gpus"]) if r == whole else _split(v, limit)) for r, v in total.items()}
        for r in rest:
            rest[r] -= quota[r]
        # the team's Ray heads: one per GPU node its guaranteed GPUs make (at least one), on the CPU pool
        heads = _head_quota(max(1, math.ceil(int(t["gpus"]) / gpus_per_node)))
        out.append(
            {
                "apiVersion": api,
                "kind": "ClusterQueue",
                "metadata": _meta(t["name"], labels={f"{PREFIX}/tenant": t["name"]}),
                "spec": {
                    "cohortName": name,
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": t["name"]}},
                    "preemption": dict(preemption),
                    "resourceGroups": [_resource_group([(flavor, quota, borrow), (CPU_FLAVOR, heads, {})])],
                },
            }
        )
        out.append(
            {
                "apiVersion": api,
                "kind": "LocalQueue",
                "metadata": _meta(t["name"], t["name"], {f"{PREFIX}/tenant": t["name"]}),
                "spec": {"clusterQueue": t["name"]},
            }
        )
    # the cohort holds what no team is guaranteed (shares under 100 %, rounding): any team borrows it
    cohort: dict[str, Any] = {"apiVersion": api, "kind": "Cohort", "metadata": _meta(name), "spec": {}}
    if any(v > 0 for v in rest.values()):
        cohort["spec"]["resourceGroups"] = [_resource_group([(flavor, rest, None), (CPU_FLAVOR, {}, None)])]
    out.append(cohort)
    return out


def team_namespaces(plan: dict[str, Any]) -> list[str]:
    """The namespaces the teams' jobs run in: one per team (``plan["tenants"]``), else ``training``."""
    return [t["name"] for t in plan.get("tenants") or []] or [DEFAULT_NAMESPACE]


def namespaces(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Per team namespace (else the one ``training`` namespace): the Namespace with its Pod Security level,
    the users' RoleBinding to ``edit``, the NetworkPolicies and the team's storage (kubernetes/tenancy.py)."""
    users = {t["name"]: t.get("users") or [] for t in plan.get("tenants") or []}
    paths = _volume_paths(plan)
    out: list[dict[str, Any]] = []
    for ns in team_namespaces(plan):
        team = {f"{PREFIX}/tenant": ns} if ns in users else {}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": _meta(ns, labels={**team, **tenancy.namespace_labels()}),
            }
        )
        if users.get(ns):
            out.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": _meta(f"{ns}-edit", ns),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                    "subjects": [
                        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u} for u in users[ns]
                    ],
                }
            )
        out += tenancy.network_policies(ns, {f"{PREFIX}/tenant": ns})
        out += tenancy.storage_objects(ns, paths, {f"{PREFIX}/tenant": ns})
    return out


def nccl_env(plan: dict[str, Any]) -> list[dict[str, str]]:
    """The plan's /etc/nccl.conf as container env (same keys, same values: HCAs, GID index and TC on RoCE,
    socket interface)."""
    return [{"name": k, "value": str(v)} for k, v in sorted(plan["nccl"]["conf"].items())]


def worker_env(plan: dict[str, Any]) -> list[dict[str, str]]:
    """A Ray worker's env: nccl.conf's, but the socket interface is the pod's (the worker is on the pod
    network); the HCAs (and on RoCE the GID index and traffic class) are the node's, as the RDMA devices are."""
    env = nccl_env(plan)
    if "NCCL_SOCKET_IFNAME" in plan["nccl"]["conf"]:
        env = [e if e["name"] != "NCCL_SOCKET_IFNAME" else {**e, "value": f"={POD_INTERFACE}"} for e in env]
    return env


def _volume_paths(plan: dict[str, Any]) -> dict[str, str]:
    """Volume name -> the node's path: the shared file system paths the compute role mounts on every node,
    the local scratch, and every other mount a Slurm job container gets (plan.containers.mounts: the
    checkpoint staging folder, the site's extra mounts; docs/containers.md): one convention for both
    schedulers."""
    st = plan["storage"]
    paths = dict(st.get("paths") or {})
    if st.get("local_scratch"):
        paths["scratch"] = st["local_scratch"]
    extra = [
        m["target"] for m in (plan.get("containers") or {}).get("mounts") or [] if m["target"] not in paths.values()
    ]
    for i, target in enumerate(extra):
        paths[f"container-mount-{i}"] = target
    return {_dns(key): path for key, path in paths.items()}


def node_settings(plan: Mapping[str, Any]) -> dict[str, Any]:
    """plan["kubernetes"]["node"] (tenancy.node_settings): containerd's LimitMEMLOCK, the GPU nodes' memlock
    limit of limits.conf (plan.hosts.<compute>.limits: unlimited, the lab's gpucluster_lab.memlock_kb), and the
    team folders the PersistentVolumes point to (:func:`_volume_paths` x :func:`team_namespaces`), the shared
    file system's ones under its mount point (none in the lab: its containers mount no shared file system)."""
    compute = [h for h, v in sorted(plan["hosts"].items()) if "compute" in (v.get("roles") or [])]
    limits = plan["hosts"][compute[0]].get("limits") or [] if compute else []
    memlock = next(
        (e["value"] for e in limits if e["item"] == "memlock" and e["domain"] == "*" and e["type"] == "hard"),
        "unlimited",
    )
    lab = bool(plan["cluster"].get("lab"))
    source = (
        f"gpucluster_lab.memlock_kb {memlock} (the lab container's hard limit, as limits.conf)"
        if memlock != "unlimited"
        else "unlimited, as limits.conf's memlock (plan/system.py): RDMA's registered memory is pinned"
    )
    st = plan["storage"]
    kind = st.get(st["type"]) if isinstance(st.get(st["type"]), dict) else {}
    roots = [kind.get("mount_point")] + [e.get("mount_point") for e in kind.get("exports") or [] if isinstance(e, dict)]
    shared = [] if lab else [r for r in roots if isinstance(r, str)]
    return tenancy.node_settings(memlock, source, _volume_paths(plan), team_namespaces(plan), shared)


def _storage_mounts(plan: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The job pods' volumes: each path of :func:`_volume_paths` through the team's claim of the same name
    (a PersistentVolume of the team's folder on the node: no hostPath in the pod, which Pod Security baseline
    refuses), mounted at the node's path; /dev/shm in memory."""
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]  # NCCL's shared-memory transport
    for vol, path in sorted(_volume_paths(plan).items()):
        volumes.append({"name": vol, "persistentVolumeClaim": {"claimName": vol}})
        mounts.append({"name": vol, "mountPath": path})
    return volumes, mounts


def ray_sizes(plan: dict[str, Any], shape: NodeShape) -> dict[str, Any]:
    """What a Ray worker and the Ray head request, and where the head runs: a worker takes a GPU node's
    allocatable less its DaemonSets; the head runs on the CPU pool, or, without one, beside a worker
    (which then leaves it room)."""
    on_pool = bool(cpu_pool(plan))
    head_cpu, head_mem = (0, 0) if on_pool else (RAY_HEAD_CPU, RAY_HEAD_MEMORY_MIB)
    return {
        "worker": {
            "cpu": shape.cpus - DAEMONSET_CPU - head_cpu,
            "memory_mib": shape.memory_mib - DAEMONSET_MEMORY_MIB - head_mem,
        },
        "head": {"cpu": RAY_HEAD_CPU, "memory_mib": RAY_HEAD_MEMORY_MIB, "node_pool": "cpu" if on_pool else "gpu"},
        "daemonsets": {"cpu": DAEMONSET_CPU, "memory_mib": DAEMONSET_MEMORY_MIB},
    }


def ray_cluster_spec(plan: dict[str, Any], shape: NodeShape, levels: list[str]) -> dict[str, Any]:
    """A RayCluster spec whose workers take whole nodes (all GPUs, the RDMA devices) with the plan's NCCL env."""
    cl = plan["cluster"]
    nodes = int(cl["compute_nodes"])
    volumes, mounts = _storage_mounts(plan)
    sizes = ray_sizes(plan, shape)
    worker_cpu = sizes["worker"]["cpu"]
    worker_mem = sizes["worker"]["memory_mib"]
    gpu_selector = {f"{PREFIX}/gpu-model": cl["gpu_model"], f"{PREFIX}/cluster": cl["name"], POOL_LABEL: "gpu"}
    limits = {
        GPU_RESOURCE: shape.gpus,
        RDMA_RESOURCE: 1,
        "cpu": worker_cpu,
        "memory": f"{worker_mem}Mi",
    }
    pod_security, container_security = tenancy.restricted_security_context()
    worker_pod = {
        "metadata": {
            # Kueue TAS: keep the gang in one block / leaf group if it fits (podset-preferred-topology)
            "annotations": {"kueue.x-k8s.io/podset-preferred-topology": levels[0]},
            "labels": {f"{PREFIX}/role": "ray-worker"},
        },
        "spec": {
            # the pod network, not the host's (Pod Security baseline): NCCL bootstraps over the pod's eth0 and
            # moves data over the RDMA devices the shared device plugin gives the pod (plan["nccl"]'s HCAs)
            "securityContext": dict(pod_security),
            "nodeSelector": dict(gpu_selector),
            "tolerations": [dict(GPU_TOLERATION)],
            "volumes": volumes,
            "containers": [
                {
                    "name": "ray-worker",
                    "image": RAY_IMAGE,
                    "env": worker_env(plan),
                    "resources": {"limits": dict(limits), "requests": dict(limits)},
                    # restricted: no capability (RDMA's pinned memory: the runtime's RLIMIT_MEMLOCK, not IPC_LOCK)
                    "securityContext": dict(container_security),
                    "volumeMounts": mounts,
                }
            ],
        },
    }
    head_pod = {
        "metadata": {"labels": {f"{PREFIX}/role": "ray-head"}},
        "spec": {
            # the CPU node pool: the head never takes a GPU node's CPUs, so every GPU node holds a whole worker;
            # without a pool (the head is a compute node) it shares a GPU node, and the workers leave it room
            "nodeSelector": {POOL_LABEL: "cpu", f"{PREFIX}/cluster": cl["name"]}
            if sizes["head"]["node_pool"] == "cpu"
            else dict(gpu_selector),
            "tolerations": [dict(CONTROL_PLANE_TOLERATION if sizes["head"]["node_pool"] == "cpu" else GPU_TOLERATION)],
            "securityContext": dict(pod_security),
            "containers": [
                {
                    "name": "ray-head",
                    "image": RAY_IMAGE,
                    "securityContext": dict(container_security),
                    "ports": [
                        {"containerPort": 6379, "name": "gcs"},
                        {"containerPort": 8265, "name": "dashboard"},
                        {"containerPort": 10001, "name": "client"},
                    ],
                    "resources": {
                        "limits": {"cpu": RAY_HEAD_CPU, "memory": RAY_HEAD_MEMORY},
                        "requests": {"cpu": RAY_HEAD_CPU, "memory": RAY_HEAD_MEMORY},
                    },
                }
            ],
        },
    }
    return {
        "rayVersion": RAY_VERSION,
        # token authentication of the dashboard, the job API and the GCS: KubeRay makes a Secret per cluster and
        # gives its Ray containers and the RayJob's submitter the token (Ray >= 2.52, KubeRay >= 1.5.1)
        "authOptions": {"mode": "token"},
        # dashboard-host: every address of the head pod's own network namespace (not the node's: the head is
        # not on the host network). KubeRay's head probes call the dashboard on localhost and the operator and
        # submitter call it on the pod's address (its Service), so it cannot be bound to one of them; who may
        # connect is the namespace's NetworkPolicies (the namespace's pods, the KubeRay operator) and the token.
        "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"}, "template": head_pod},
        "workerGroupSpecs": [
            {
                "groupName": "gpu-nodes",
                "replicas": nodes,
                "minReplicas": nodes,
                "maxReplicas": nodes,
                "rayStartParams": {"num-gpus": str(shape.gpus)},
                "template": worker_pod,
            }
        ],
    }


def ray_objects(plan: dict[str, Any], shape: NodeShape, levels: list[str]) -> list[dict[str, Any]]:
    """A RayJob (batch training, admitted by Kueue as one gang) and a RayCluster (interactive), both templates."""
    tenants = plan.get("tenants") or []
    ns = tenants[0]["name"] if tenants else DEFAULT_NAMESPACE
    queue = tenants[0]["name"] if tenants else _dns(plan["cluster"]["name"])
    labels = {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/priority-class": DEFAULT_PRIORITY}
    name = _dns(plan["cluster"]["name"])
    spec = ray_cluster_spec(plan, shape, levels)
    return [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": _meta(f"{name}-train", ns, labels),
            "spec": {
                # the site's training entrypoint goes here; this one prints the GPUs Ray sees (a smoke test)
                "entrypoint": ENTRYPOINT,
                "shutdownAfterJobFinishes": True,
                "ttlSecondsAfterFinished": 600,
                "rayClusterSpec": spec,
            },
        },
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": _meta(f"{name}-interactive", ns, labels),
            "spec": spec,
        },
    ]


def operator_policies(plan: dict[str, Any], shape: NodeShape) -> list[dict[str, Any]]:
    """GPU Operator ClusterPolicy and Network Operator NicClusterPolicy.

    Driver: the site's (driver.enabled false): the node image brings it with the GPUDirect RDMA
    module (nvidia-peermem), as the Network Operator's host DOCA/OFED driver, so a driver container
    never reloads the module under running pods. Clocks and power limit: left to the node, at boot,
    before the kubelet starts pods: plan["gpu"]["clocks"]["apply_args"] (nvidia-smi), what the Slurm
    path's gpucluster-gpu-clocks.service runs; the ClusterPolicy has no clock-lock or power-limit
    setting. DCGM exporter: on, run by the operator (the Kubernetes path installs no host exporter),
    its standalone hostengine off (the exporter embeds one). MIG strategy none: training takes
    whole GPUs; mixed, with MIG Manager and the plan's mig-parted configs, when gpucluster_gpu_policy.mig
    partitions GPUs (compute/mig.py).
    (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html#pre-installed-nvidia-gpu-drivers)
    """
    tolerations = [dict(GPU_TOLERATION)]
    cluster_policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": _meta("cluster-policy"),
        "spec": {
            "operator": {"defaultRuntime": "containerd"},
            "daemonsets": {"tolerations": tolerations},
            "driver": {"enabled": False},
            "toolkit": {"enabled": True},
            "devicePlugin": {"enabled": True},
            "dcgm": {"enabled": False},  # the exporter embeds its own hostengine
            "dcgmExporter": {"enabled": True},
            "gfd": {"enabled": True},
            "nodeStatusExporter": {"enabled": False},
            "mig": {"strategy": "none"},
        },
    }
    mig = plan["gpu"].get("mig")
    config_map = None
    if mig:  # mixed: a node may have GPUs with and without MIG; MIG Manager applies the node's layout ([G8])
        cluster_policy["spec"]["mig"] = {"strategy": "mixed"}
        cluster_policy["spec"]["migManager"] = {
            "enabled": True,
            "config": {"name": MIG_CONFIG_MAP, "default": "all-disabled"},
        }
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(MIG_CONFIG_MAP, GPU_OPERATOR_NAMESPACE),
            # a ConfigMap's data is text by the API: the compute role's file, by the same function
            "data": {"config.yaml": mig_parted_config(mig["parted"])},
        }
    netdevs = [r["netdev"] for r in plan["fabric_host"]["rails"]]
    config = {
        "configList": [
            {
                "resourceName": RDMA_RESOURCE_NAME,
                "rdmaHcaMax": shape.rdma,
                # exactly the compute HCAs (one per rail); the storage NICs stay with the host's Lustre client
                "selectors": {"ifNames": netdevs},
            }
        ]
    }
    nic_policy = {
        "apiVersion": "mellanox.com/v1alpha1",
        "kind": "NicClusterPolicy",
        "metadata": _meta("nic-cluster-policy"),
        "spec": {
            "tolerations": tolerations,
            "rdmaSharedDevicePlugin": dict(RDMA_PLUGIN, config=json.dumps(config, sort_keys=True)),
        },
    }
    return [cluster_policy] + ([config_map] if config_map else []) + ([nic_policy] if netdevs else [])


def _path(obj: dict[str, Any]) -> str:
    kind = obj["kind"]
    group = {
        "Topology": "kueue",
        "ResourceFlavor": "kueue",
        "Cohort": "kueue",
        "ClusterQueue": "kueue",
        "LocalQueue": "kueue",
        "WorkloadPriorityClass": "kueue",
        "RayJob": "kuberay",
        "RayCluster": "kuberay",
        "ClusterPolicy": "operators",
        "ConfigMap": "operators",
        "NicClusterPolicy": "operators",
        "Node": "nodes",
        "PersistentVolume": "storage",
    }.get(kind, "namespaces")
    ns = obj["metadata"].get("namespace")
    stem = f"{kind.lower()}-{ns + '-' if ns else ''}{obj['metadata']['name']}"
    return f"{group}/{stem}.yaml"


def kubernetes_plan(plan: Mapping[str, Any], node: NodeResources, cooling: str = "air") -> dict[str, Any]:
    """plan["kubernetes"]: node labels/taints, every manifest (path + object) and the kustomization;
    ``node``: a GPU node's CPUs and memory (compute/node.py), for the kubelet's reservation."""
    # a team gets edit in the namespace of its name: never an operator's, the system's or one the plan uses
    check_namespaces(plan.get("tenants") or [], OPERATOR_NAMESPACES)
    shape = _node_shape(plan, node)
    levels = topology_levels(plan)
    nodes = node_labels(plan, cooling)
    pool = cpu_pool(plan)
    node_objects = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": h, "labels": v["labels"]},
            # a node without taints of ours gets no spec: the patch leaves its own (a control plane's) alone
            **({"spec": {"taints": v["taints"]}} if v["taints"] else {}),
        }
        for h, v in (nodes | pool).items()
    ]
    objects = (
        namespaces(plan)
        + node_objects
        + kueue_objects(plan, shape, levels)
        + ray_objects(plan, shape, levels)
        + operator_policies(plan, shape)
    )
    # the KubeRay objects are templates for the teams to submit (kubectl create -f): applying them would
    # start a job, or hold every GPU node with an idle RayCluster; they stay out of the kustomization
    manifests = [{"path": _path(o), "object": o, "template": o["kind"] in TEMPLATE_KINDS} for o in objects]
    paths = [m["path"] for m in manifests]
    require(len(set(paths)) == len(paths), "gpucluster_tenants", paths, "team names distinct from each other")
    return {
        "nodes": nodes,
        "node_shape": {
            "gpus": shape.gpus,
            "cpus": shape.cpus,
            "memory_mib": shape.memory_mib,
            "rdma": shape.rdma,
            "capacity_cpus": shape.capacity_cpus,
            "capacity_memory_mib": shape.capacity_memory_mib,
        },
        "cpu_pool": pool,
        "kubelet": kubelet_reservation(shape),
        "node": node_settings(plan),
        "ray": ray_sizes(plan, shape),
        "topology_levels": levels,
        "rdma_resource": RDMA_RESOURCE,
        "manifests": manifests,
        "kustomization": {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [m["path"] for m in manifests if not m["template"]],
        },
    }
