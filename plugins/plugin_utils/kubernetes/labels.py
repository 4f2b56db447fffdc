"""The nodes' labels and taints, and the Kueue topology levels over them (docs/kubernetes.md).

Per compute node: GPU model and count, NVLink domain, fabric block and leaf group, rack, cooling, storage
and the GPU node pool, with the GPU taint; the CPU node pool (the head, where the Ray heads run); the
Kueue ``Topology`` levels, widest first, from the fabric plan."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.common import (
    GPU_TAINT,
    POOL_LABEL,
    PREFIX,
    toleration,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.model import JsonObject, NodeEntry
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import PlanView

HOSTNAME_LABEL = "kubernetes.io/hostname"  # set by the kubelet on every node (Kubernetes well-known labels)
#: MIG (compute/mig.py): the node label MIG Manager reads (docs/sources.md [G8])
MIG_CONFIG_LABEL = "nvidia.com/mig.config"


def _blocks(plan: PlanView) -> dict[str, str]:
    """Host -> its scalable unit (the hosts that share the same leaf switches) from the fabric plan."""
    cabling = plan["fabric"].get("cabling") or {}
    out: dict[str, str] = {}
    for su in cabling.get("scalable_units") or []:
        for host in su["hosts"]:
            out[host] = su["name"]
    return out


def topology_levels(plan: PlanView) -> list[str]:
    """Kueue Topology levels, widest first, from the fabric plan.

    A fat tree has blocks (scalable units under their leaves) joined by spines, and racks within a
    block: block > rack > hostname. A rail-optimized fabric or a single switch has one leaf group
    that every node touches on all rails: leaf group > hostname. Kueue places a gang in the lowest
    level that holds it (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/)."""
    if plan["fabric"]["topology"] == "fat_tree":
        return [f"{PREFIX}/block", f"{PREFIX}/rack", HOSTNAME_LABEL]
    return [f"{PREFIX}/leaf-group", HOSTNAME_LABEL]


def node_labels(plan: PlanView, cooling: str) -> dict[str, NodeEntry]:
    """Per compute node: labels and taints (plan["kubernetes"]["nodes"])."""
    cl = plan["cluster"]
    compute = [h for h, v in plan["hosts"].items() if "compute" in v["roles"]]
    blocks = _blocks(plan)
    per_rack = int(plan["power"]["nodes_per_rack"])
    out: dict[str, NodeEntry] = {}
    for i, host in enumerate(compute):
        block = blocks[host] if host in blocks else str(cl["name"])  # no switched fabric: the cluster is one block
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
        mig_plan = plan["gpu"]["mig"]
        mig = mig_plan["host_config"].get(host) if mig_plan else None
        if mig:  # the GPU Operator's MIG Manager applies the mig-parted config the label names ([G8])
            out[host]["labels"][MIG_CONFIG_LABEL] = mig
    return out


def cpu_pool(plan: PlanView) -> dict[str, NodeEntry]:
    """The CPU node pool where the Ray heads run: the cluster's head (no GPU, no GPU taint) unless it is a
    compute node too. A site with CPU workers of its own labels them node-pool=cpu as well."""
    cl = plan["cluster"]
    head = cl["head"]
    host = plan["hosts"].get(head)
    if host and "compute" in host["roles"]:
        return {}
    return {head: {"labels": {f"{PREFIX}/cluster": cl["name"], POOL_LABEL: "cpu"}, "taints": []}}


def node_objects(nodes: dict[str, NodeEntry]) -> list[JsonObject]:
    """The Node patches: each node's labels, and its taints when it has any of ours."""
    out: list[JsonObject] = []
    for host, entry in nodes.items():
        obj: JsonObject = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": host, "labels": dict(entry["labels"])},
        }
        # a node without taints of ours gets no spec: the patch leaves its own (a control plane's) alone
        if entry["taints"]:
            obj["spec"] = {"taints": [toleration(t) for t in entry["taints"]]}
        out.append(obj)
    return out
