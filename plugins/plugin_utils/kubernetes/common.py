"""What the Kubernetes objects of the plan share: the collection's label prefix, the GPU and RDMA resources
with the GPU nodes' taint, the node pools, the Ray head's size, the default namespace and priority, and the
object metadata every manifest carries."""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.model import JsonObject
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import PlanView

#: label prefix of the collection's own node labels
PREFIX = "gpucluster.io"
POOL_LABEL = f"{PREFIX}/node-pool"
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
#: kubeadm taints control-plane nodes so that ordinary pods stay off; the Ray head tolerates it on the CPU
#: pool (https://kubernetes.io/docs/reference/labels-annotations-taints/#node-role-kubernetes-io-control-plane)
CONTROL_PLANE_TOLERATION = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Exists",
    "effect": "NoSchedule",
}
CPU_FLAVOR = "cpu-pool"
#: Ray head pod (no GPU, no storage mounts): a project choice. It runs on the CPU node pool (nodes labelled
#: node-pool=cpu: the cluster's head by default), never on a GPU node whose CPUs the workers take.
RAY_HEAD_CPU = 8
RAY_HEAD_MEMORY_MIB = 32 * 1024
RAY_HEAD_MEMORY = f"{RAY_HEAD_MEMORY_MIB // 1024}Gi"
DEFAULT_PRIORITY = "normal"
DEFAULT_NAMESPACE = "training"


def dns(name: str) -> str:
    """A name usable as a Kubernetes object name (RFC 1123): h100_sxm -> h100-sxm."""
    return name.lower().replace("_", "-").replace(".", "-")


def meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> JsonObject:
    """An object's metadata: its name, its namespace if any, the collection's managed-by label and ``labels``."""
    all_labels: JsonObject = {"app.kubernetes.io/managed-by": "gpucluster.tiers"}
    all_labels.update(labels or {})
    out: JsonObject = {"name": name, "labels": all_labels}
    if namespace:
        out["namespace"] = namespace
    return out


def toleration(spec: dict[str, str]) -> JsonObject:
    """A copy of a taint or toleration as object data."""
    return dict(spec)


def tenants(plan: PlanView) -> list[Mapping[str, object]]:
    """The plan's teams (``plan["tenants"]``: name, gpus, shares, users), none on a site without teams."""
    teams = plan.get("tenants")
    return list(teams) if isinstance(teams, list) else []


def number(value: object) -> int:
    """A team's count (GPUs) as an int."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"not a number: {value!r}")


def percent(value: object) -> float:
    """A team's share (percent) as a float."""
    if isinstance(value, (int, float, str)):
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def text(value: object) -> str:
    """A team's name as text."""
    return str(value)
