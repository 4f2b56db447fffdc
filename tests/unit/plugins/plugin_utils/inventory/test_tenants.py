"""Teams sharing the cluster (gpucluster_tenants) and the scheduler choice, as the plan carries them."""

from __future__ import annotations

import copy

import pytest
from conftest import load_inventory
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tenants import (
    largest_remainder,
    reserved_namespace,
    tenants,
    tenants_plan,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan


def test_shares_become_gpus_of_this_cluster() -> None:
    site, groups = load_inventory("tier4")  # 64 GPUs
    site = copy.deepcopy(site)
    site["gpucluster_tenants"] = [
        {"name": "nlp", "gpu_share_percent": 50, "users": ["alice", "bob"]},
        {"name": "vision", "gpu_share_percent": 30, "borrowing_limit_percent": 20},
        {"name": "research", "gpu_share_percent": 12.5},
    ]
    plan = cluster_plan(site, groups)
    assert plan["cluster"]["scheduler"] == "slurm"
    by_name = {t["name"]: t for t in plan["tenants"]}
    assert list(by_name) == ["nlp", "vision", "research"]  # inventory order
    assert by_name["nlp"] == {
        "name": "nlp",
        "gpu_share_percent": 50.0,
        "gpus": 32,
        "borrowing_limit_percent": 100.0,
        "borrowing_limit_gpus": 64,
        "fairshare": 50,
        "users": ["alice", "bob"],
    }
    assert (by_name["vision"]["gpus"], by_name["vision"]["borrowing_limit_gpus"]) == (
        19,
        12,
    )  # floor(19.2), floor(12.8)
    assert (by_name["research"]["gpus"], by_name["research"]["fairshare"]) == (8, 12)


def test_no_tenants_and_the_default_scheduler() -> None:
    site, groups = load_inventory("tier1")
    plan = cluster_plan(copy.deepcopy(site), groups)
    assert plan["tenants"] == []
    assert plan["cluster"]["scheduler"] == "slurm"


def test_kubernetes_is_a_scheduler_choice() -> None:
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    site["gpucluster_cluster"]["scheduler"] = "kubernetes"
    assert cluster_plan(site, groups)["cluster"]["scheduler"] == "kubernetes"


def test_a_share_of_less_than_one_gpu_names_the_smallest_share() -> None:
    with pytest.raises(PlanError, match=r"at least one GPU: >= 12.5% of this cluster's 8 GPUs"):
        tenants([{"name": "tiny", "gpu_share_percent": 10}], gpus_total=8)


@given(
    gpus=st.integers(min_value=1, max_value=4096),
    shares=st.lists(st.floats(min_value=0.01, max_value=100, allow_nan=False), min_size=1, max_size=8),
)
def test_guaranteed_gpus_never_exceed_the_cluster(gpus: int, shares: list[float]) -> None:
    raw = [{"name": f"team{i}", "gpu_share_percent": s} for i, s in enumerate(shares)]
    try:
        planned = tenants_plan(raw, gpus)
    except PlanError:
        return  # refused (over 100% or under one GPU): nothing is planned
    assert sum(t["gpus"] for t in planned) <= gpus
    assert all(1 <= t["gpus"] <= gpus and t["borrowing_limit_gpus"] <= gpus for t in planned)


def test_largest_remainder_gives_the_spare_gpu_to_the_largest_fraction() -> None:
    """Issue 26: 50/30/20 % of 48 GPUs is 24/14/10 (flooring gives 24/14/9 and one GPU nobody is guaranteed)."""
    raw = [
        {"name": "a", "gpu_share_percent": 50},
        {"name": "b", "gpu_share_percent": 30},
        {"name": "c", "gpu_share_percent": 20},
    ]
    assert [t["gpus"] for t in tenants_plan(raw, 48)] == [24, 14, 10]
    assert largest_remainder([100 / 3] * 3, 64) == [22, 21, 21]  # ties go to the earlier team
    assert largest_remainder([30, 20], 64) == [19, 13]  # 19.2 + 12.8 = 32 exactly


@given(
    gpus=st.integers(min_value=1, max_value=100_000),
    weights=st.lists(st.integers(min_value=1, max_value=1000), min_size=1, max_size=12),
)
def test_shares_summing_to_100_percent_give_exactly_the_cluster(gpus: int, weights: list[int]) -> None:
    """Largest remainder: the quotas always sum to the total, each within one GPU of its exact share."""
    shares = [100 * w / sum(weights) for w in weights]
    shares[-1] = 100 - sum(shares[:-1])  # exactly 100 % in all, as an inventory would write it
    quotas = largest_remainder(shares, gpus)
    exact = [gpus * s / 100 for s in shares]
    assert sum(quotas) == gpus or abs(sum(exact) - gpus) > 1e-9
    assert all(abs(q - e) < 1 + 1e-9 for q, e in zip(quotas, exact, strict=True))


# --- team names on the Kubernetes path: a team gets edit in the namespace of its name (issue 37) ---------

#: (team index in tier4-k8s, name): an operator's, a system's or the plan's own namespace
RESERVED = [
    (0, "gpu-operator"),  # the GPU Operator's, where the plan writes the MIG ConfigMap
    (1, "nvidia-gpu-operator"),  # prefix nvidia-
    (2, "nvidia-network-operator"),
    (0, "network-operator"),
    (1, "kueue-system"),
    (2, "ray-system"),  # the KubeRay operator's, named by the teams' NetworkPolicies
    (0, "kuberay-operator"),  # prefix kuberay-
    (1, "cert-manager"),
    (2, "monitoring"),
    (0, "kube-flannel"),  # prefix kube-
    (1, "calico-system"),
    (2, "openshift-monitoring"),
]


@pytest.mark.parametrize(("index", "name"), RESERVED, ids=[n for _, n in RESERVED])
def test_a_team_named_like_an_operator_or_system_namespace_is_refused(index: int, name: str) -> None:
    site, groups = load_inventory("tier4-k8s")
    site = copy.deepcopy(site)
    site["gpucluster_tenants"][index]["name"] = name
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    assert err.value.field == f"gpucluster_tenants[{index}].name"
    assert err.value.value == name
    message = str(err.value)
    for reserved in ("gpu-operator", "network-operator", "kueue-system", "ray-system", "cert-manager", "monitoring"):
        assert reserved in message  # the reserved list is in the error
    assert "kube-, nvidia-, kuberay-" in message


def test_every_namespace_the_kubernetes_plan_uses_outside_the_teams_is_reserved() -> None:
    """The plan's own namespaces (objects it writes there, namespaces its policies name) are no team's."""
    plan = cluster_plan(*load_inventory("tier4-k8s"))
    used: set[str] = set()
    for m in plan["kubernetes"]["manifests"]:
        obj = m["object"]
        used.add(obj["metadata"].get("namespace") or "")
        spec = obj.get("spec") or {}
        for rule in [*(spec.get("ingress") or []), *(spec.get("egress") or [])]:
            for peer in [*(rule.get("from") or []), *(rule.get("to") or [])]:
                used.update((peer.get("namespaceSelector") or {}).get("matchLabels", {}).values())
    others = used - {t["name"] for t in plan["tenants"]} - {""}
    assert others == {"kube-system", "ray-system"}  # DNS, the KubeRay operator
    assert all(reserved_namespace(ns) for ns in others)
    assert reserved_namespace("gpu-operator")  # the MIG ConfigMap's (a MIG plan)


def test_a_slurm_cluster_may_have_a_team_named_monitoring() -> None:
    """Only a namespace is at stake: on Slurm a team is an account, and "monitoring" is a fine account."""
    site, groups = load_inventory("tier4")
    site = copy.deepcopy(site)
    site["gpucluster_tenants"] = [{"name": "monitoring", "gpu_share_percent": 10}]
    assert [t["name"] for t in cluster_plan(site, groups)["tenants"]] == ["monitoring"]


def test_the_tenants_rows_have_the_keys_their_type_names() -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import TenantRow
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tenants import tenants_plan

    rows = tenants_plan(
        [{"name": "a", "gpu_share_percent": 60, "users": ["x"]}, {"name": "b", "gpu_share_percent": 40}], 10
    )
    assert [list(r) for r in rows] == [list(TenantRow.__annotations__)] * 2
    assert [(r["name"], r["gpus"], r["users"]) for r in rows] == [("a", 6, ["x"]), ("b", 4, [])]
