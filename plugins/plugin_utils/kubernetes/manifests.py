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

This module assembles them (:func:`kubernetes_plan`): node labels and taints (kubernetes/labels.py), Kueue
(kubernetes/kueue.py), KubeRay (kubernetes/kuberay.py), the operators (kubernetes/operators.py), the team
namespaces (kubernetes/namespaces.py, kubernetes/tenancy.py), and the kubelet's reservation of a GPU node.

Pure: takes the plan (and nothing else), returns ``{"nodes", "manifests", "kustomization", ...}``
(kubernetes/model.py ``KubernetesSection``);
each manifest entry is ``{"path": "<dir>/<name>.yaml", "object": {...}, "template": bool}`` with plain
JSON types; ``template`` objects (the KubeRay jobs) are for the teams to submit, never applied.
"""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.node import NodeResources
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tenants import check_namespaces
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes import tenancy
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.common import RDMA_RESOURCE
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.kuberay import ray_objects, ray_sizes
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.kueue import kueue_objects
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.labels import (
    cpu_pool,
    node_labels,
    node_objects,
    topology_levels,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.model import (
    JsonObject,
    KubeletReservation,
    KubernetesSection,
    Manifest,
    NodeShape,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.namespaces import namespaces, node_settings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.operators import (
    GPU_OPERATOR_NAMESPACE,
    operator_policies,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import PlanView

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
#: the namespaces outside the teams' that the plan itself writes objects into or names in a policy
OPERATOR_NAMESPACES = (GPU_OPERATOR_NAMESPACE, tenancy.KUBERAY_NAMESPACE)
#: objects rendered as templates to submit, never applied by the role (kuberay/)
TEMPLATE_KINDS = frozenset({"RayJob", "RayCluster"})
#: the folder of each kind's manifest; every other kind (Namespace, RoleBinding, NetworkPolicy, claim) is in
#: namespaces/
FOLDERS = {
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
}


def _node_shape(plan: PlanView, node: NodeResources) -> NodeShape:
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


def kubelet_reservation(shape: NodeShape) -> KubeletReservation:
    """The KubeletConfiguration fields every GPU node needs for ``shape``'s Node Allocatable ([K1])."""
    system_mib = shape.capacity_memory_mib - shape.memory_mib - KUBE_RESERVED_MEMORY_MIB - EVICTION_HARD_MEMORY_MIB
    return {
        "kubeReserved": {"cpu": str(KUBE_RESERVED_CPU), "memory": f"{KUBE_RESERVED_MEMORY_MIB}Mi"},
        "systemReserved": {"cpu": str(SYSTEM_RESERVED_CPU), "memory": f"{max(system_mib, 0)}Mi"},
        "evictionHard": {"memory.available": f"{EVICTION_HARD_MEMORY_MIB}Mi"},
        "allocatable": {"cpu": shape.cpus, "memory": f"{shape.memory_mib}Mi"},
    }


def _path(obj: JsonObject) -> str:
    """``<folder>/<kind>-[<namespace>-]<name>.yaml``: the object's manifest file."""
    kind, metadata = obj["kind"], obj["metadata"]
    if not isinstance(kind, str) or not isinstance(metadata, dict):
        raise TypeError(f"not a Kubernetes object: {obj!r}")
    ns = metadata.get("namespace")
    stem = f"{kind.lower()}-{f'{ns}-' if ns else ''}{metadata['name']}"
    return f"{FOLDERS.get(kind, 'namespaces')}/{stem}.yaml"


def kubernetes_plan(plan: PlanView, node: NodeResources, cooling: str = "air") -> KubernetesSection:
    """plan["kubernetes"]: node labels/taints, every manifest (path + object) and the kustomization;
    ``node``: a GPU node's CPUs and memory (compute/node.py), for the kubelet's reservation."""
    # a team gets edit in the namespace of its name: never an operator's, the system's or one the plan uses
    teams = plan.get("tenants")
    check_namespaces(teams if isinstance(teams, list) else [], OPERATOR_NAMESPACES)
    shape = _node_shape(plan, node)
    levels = topology_levels(plan)
    nodes = node_labels(plan, cooling)
    pool = cpu_pool(plan)
    objects = (
        namespaces(plan)
        + node_objects(nodes | pool)
        + kueue_objects(plan, shape, levels)
        + ray_objects(plan, shape, levels)
        + operator_policies(plan, shape)
    )
    # the KubeRay objects are templates for the teams to submit (kubectl create -f): applying them would
    # start a job, or hold every GPU node with an idle RayCluster; they stay out of the kustomization
    manifests: list[Manifest] = [
        {"path": _path(o), "object": o, "template": o["kind"] in TEMPLATE_KINDS} for o in objects
    ]
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
