"""Kueue's objects (docs/kubernetes.md): a ``Topology`` over the node labels, a ``ResourceFlavor`` for the GPU
model (the GPU nodes, ``node-pool: gpu``) and one for the CPU node pool (``node-pool: cpu``, where the Ray heads
run), ``ClusterQueue``s whose GPU flavor quotas add up to exactly what the GPU nodes allocate, a ``LocalQueue``
per team (``plan["tenants"]``), a ``Cohort`` holding what no team is guaranteed, and the
``WorkloadPriorityClass``es."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.common import (
    CONTROL_PLANE_TOLERATION,
    CPU_FLAVOR,
    DEFAULT_NAMESPACE,
    GPU_RESOURCE,
    GPU_TOLERATION,
    POOL_LABEL,
    PREFIX,
    RAY_HEAD_CPU,
    RAY_HEAD_MEMORY_MIB,
    RDMA_RESOURCE,
    dns,
    meta,
    number,
    percent,
    tenants,
    toleration,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.model import JsonObject, JsonValue, NodeShape
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import PlanView

API = "kueue.x-k8s.io/v1beta2"
#: Kueue priorities: values are relative (higher admits first and may preempt lower)
#: (https://kueue.sigs.k8s.io/docs/concepts/workload_priority_class/)
PRIORITIES = (
    ("production", 10000, "deadline-bound training and evaluation; may preempt lower priorities"),
    ("normal", 1000, "the default for research training"),
    ("preemptible", 100, "best-effort work that borrows idle GPUs and is preempted first"),
)

#: a flavor of a resource group: its name, its nominal quota per resource, its borrowing limits (None: none)
Flavor = tuple[str, dict[str, int], dict[str, int] | None]


def _quantity(resource: str, value: int) -> JsonValue:
    return f"{value}Mi" if resource == "memory" else value


def _split(total: int, percent: float) -> int:
    return math.floor(total * percent / 100)


def _quotas(plan: PlanView, shape: NodeShape) -> dict[str, int]:
    nodes = int(plan["cluster"]["compute_nodes"])
    mig = plan["gpu"]["mig"]
    return {
        # a GPU in MIG mode is advertised as its MIG devices, not as nvidia.com/gpu (mixed strategy, [G8])
        GPU_RESOURCE: int(plan["cluster"]["gpus_total"]) - (mig["mig_gpus"] if mig else 0),
        "cpu": shape.cpus * nodes,
        "memory": shape.memory_mib * nodes,
        RDMA_RESOURCE: shape.rdma * nodes,
    } | dict(mig["k8s_resources"] if mig else {})


def _resource_group(flavors: list[Flavor]) -> JsonObject:
    """One resource group over the first flavor's resources; every flavor lists them all, in that order
    (Kueue: each flavor of a group covers exactly the group's coveredResources)."""
    covered = list(flavors[0][1])
    out: list[JsonValue] = []
    for flavor, quota, borrowing in flavors:
        resources: list[JsonValue] = []
        for name in covered:
            entry: JsonObject = {"name": name, "nominalQuota": _quantity(name, quota.get(name, 0))}
            if borrowing is not None:
                entry["borrowingLimit"] = _quantity(name, borrowing.get(name, 0))
            resources.append(entry)
        out.append({"name": flavor, "resources": resources})
    return {"coveredResources": list[JsonValue](covered), "flavors": out}


def _head_quota(heads: int) -> dict[str, int]:
    """The CPU pool flavor's quota: ``heads`` Ray heads (CPU and memory; nothing else)."""
    return {"cpu": RAY_HEAD_CPU * heads, "memory": RAY_HEAD_MEMORY_MIB * heads}


def check_tenants(teams: Sequence[Mapping[str, object]], gpus_total: int) -> None:
    """Tenants' guaranteed GPUs fit the cluster (the inventory layer checks shares; this checks GPUs)."""
    total = 0
    for i, t in enumerate(teams):
        gpus = number(t["gpus"])
        require(
            0 <= gpus <= gpus_total,
            f"gpucluster_tenants[{i}].gpu_share_percent",
            t["gpu_share_percent"],
            f"a share whose GPUs fit the cluster's {gpus_total} GPUs",
        )
        total += gpus
    require(
        total <= gpus_total,
        "gpucluster_tenants",
        [t["name"] for t in teams],
        f"guaranteed GPUs summing to at most the cluster's {gpus_total} (found {total})",
    )


def _flavors_and_priorities(plan: PlanView, levels: list[str]) -> list[JsonObject]:
    """The Topology, the GPU and the CPU pool's ResourceFlavors and the WorkloadPriorityClasses."""
    cl = plan["cluster"]
    name = dns(cl["name"])
    out: list[JsonObject] = [
        {
            "apiVersion": API,
            "kind": "Topology",
            "metadata": meta(name),
            "spec": {"levels": [{"nodeLabel": label} for label in levels]},
        },
        {
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": meta(dns(cl["gpu_model"])),
            "spec": {
                "nodeLabels": {
                    f"{PREFIX}/gpu-model": cl["gpu_model"],
                    f"{PREFIX}/cluster": cl["name"],
                    POOL_LABEL: "gpu",
                },
                "tolerations": [toleration(GPU_TOLERATION)],
                "topologyName": name,
            },
        },
        {
            # the Ray heads' flavor: a pod that selects node-pool=cpu cannot take the GPU flavor (its
            # nodeLabels say gpu), so Kueue assigns it this one and the head lands on the CPU pool
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": meta(CPU_FLAVOR),
            "spec": {
                "nodeLabels": {f"{PREFIX}/cluster": cl["name"], POOL_LABEL: "cpu"},
                "tolerations": [toleration(CONTROL_PLANE_TOLERATION)],
            },
        },
    ]
    for prio, value, why in PRIORITIES:
        out.append(
            {
                "apiVersion": API,
                "kind": "WorkloadPriorityClass",
                "metadata": meta(prio),
                "value": value,
                "description": why,
            }
        )
    return out


def _cluster_queue(plan: PlanView, total: dict[str, int]) -> list[JsonObject]:
    """Without teams: one ClusterQueue over every GPU node, and its LocalQueue in the ``training`` namespace."""
    cl = plan["cluster"]
    name = dns(cl["name"])
    # one Ray head per GPU node at most: as many Ray clusters as there are nodes
    heads = _head_quota(int(cl["compute_nodes"]))
    return [
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": meta(name),
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [_resource_group([(dns(cl["gpu_model"]), total, None), (CPU_FLAVOR, heads, None)])],
            },
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": meta(name, DEFAULT_NAMESPACE),
            "spec": {"clusterQueue": name},
        },
    ]


def _team_queues(plan: PlanView, total: dict[str, int], teams: Sequence[Mapping[str, object]]) -> list[JsonObject]:
    """Per team: a ClusterQueue of its share in the cluster's cohort and its LocalQueue; then the Cohort, which
    holds what no team is guaranteed (shares under 100 %, rounding): any team borrows it."""
    cl = plan["cluster"]
    name, flavor = dns(cl["name"]), dns(cl["gpu_model"])
    gpus_per_node = max(1, int(cl["gpus_per_node"]))
    preemption: JsonObject = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    rest = dict(total)
    out: list[JsonObject] = []
    for t in teams:
        team, gpus = str(t["name"]), number(t["gpus"])
        share = percent(t["gpu_share_percent"])
        limit = percent(t["borrowing_limit_percent"])
        # with MIG the whole GPUs left are shared like the other resources (a team's GPU count is of all GPUs)
        whole = GPU_RESOURCE if not plan["gpu"].get("mig") else None
        quota = {r: (gpus if r == whole else _split(v, share)) for r, v in total.items()}
        borrow = {r: (number(t["borrowing_limit_gpus"]) if r == whole else _split(v, limit)) for r, v in total.items()}
        for r in rest:
            rest[r] -= quota[r]
        # the team's Ray heads: one per GPU node its guaranteed GPUs make (at least one), on the CPU pool
        heads = _head_quota(max(1, math.ceil(gpus / gpus_per_node)))
        out.append(
            {
                "apiVersion": API,
                "kind": "ClusterQueue",
                "metadata": meta(team, labels={f"{PREFIX}/tenant": team}),
                "spec": {
                    "cohortName": name,
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team}},
                    "preemption": dict(preemption),
                    "resourceGroups": [_resource_group([(flavor, quota, borrow), (CPU_FLAVOR, heads, {})])],
                },
            }
        )
        out.append(
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": meta(team, team, {f"{PREFIX}/tenant": team}),
                "spec": {"clusterQueue": team},
            }
        )
    cohort_spec: JsonObject = {}
    if any(v > 0 for v in rest.values()):
        cohort_spec["resourceGroups"] = [_resource_group([(flavor, rest, None), (CPU_FLAVOR, {}, None)])]
    out.append({"apiVersion": API, "kind": "Cohort", "metadata": meta(name), "spec": cohort_spec})
    return out


def kueue_objects(plan: PlanView, shape: NodeShape, levels: list[str]) -> list[JsonObject]:
    """Topology, ResourceFlavor, Cohort, ClusterQueues, LocalQueues, WorkloadPriorityClasses."""
    out = _flavors_and_priorities(plan, levels)
    total = _quotas(plan, shape)
    teams = tenants(plan)
    if not teams:
        return out + _cluster_queue(plan, total)
    check_tenants(teams, int(plan["cluster"]["gpus_total"]))
    return out + _team_queues(plan, total, teams)
