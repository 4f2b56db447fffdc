"""The whole plan from the four reference inventories, and the bad inputs of the design.

Each bad input must fail with a PlanError that names the inventory field, before any
host is contacted (the plan play computes the plan on the controller first).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.module_utils.plan import cluster_plan


def test_every_tier_plans_and_is_json(tier_inventory: tuple[str, dict[str, Any], dict[str, list[str]]]) -> None:
    tier, site, groups = tier_inventory
    plan = cluster_plan(site, groups)
    json.dumps(plan)  # plain data only
    assert plan["cluster"]["tier"] == tier
    expected_nodes = {"tier1": 1, "tier2": 2, "tier3": 4, "tier4": 8}[tier]
    assert plan["cluster"]["compute_nodes"] == expected_nodes
    assert plan["cluster"]["gpus_total"] == expected_nodes * 8
    # every host has addresses and a file list, and every file has a template
    for name, host in plan["hosts"].items():
        assert host["addresses"]["management"]
        assert plan["files"][name], name


def test_tier1_single_server_carries_every_role() -> None:
    from conftest import load_inventory

    plan = cluster_plan(*load_inventory("tier1"))
    assert list(plan["hosts"]) == ["dgx01"]
    assert set(plan["hosts"]["dgx01"]["roles"]) >= {"head", "compute", "storage"}
    assert plan["nccl"]["enabled"] is False  # NVLink only: no /etc/nccl.conf
    assert plan["fabric"]["topology_conf"] == ""
    dests = [f["dest"] for f in plan["files"]["dgx01"]]
    assert "/etc/nccl.conf" not in dests


def test_h100_clock_lock_is_never_the_articles_2505(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    """tiers.md correction: an H100 SXM's max SM clock is 1980 MHz (nvidia-smi clocks.max.sm), not 2505."""
    plan = cluster_plan(*tier3)
    low, high = plan["gpu"]["clocks"]["lock_gpu_clocks"]
    assert high == 1980 and low <= high


def test_tier4_gpu_load_is_44_8_kw() -> None:
    """tiers.md: 700 W per H100 SXM, 8 nodes x 8 GPUs = 44.8 kW of GPU load."""
    from conftest import load_inventory

    plan = cluster_plan(*load_inventory("tier4"))
    assert plan["power"]["gpu_load_kw_total"] == pytest.approx(44.8)


def test_tier3_nccl_uses_exact_compute_hcas_only(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    plan = cluster_plan(*tier3)
    hca = plan["nccl"]["conf"]["NCCL_IB_HCA"]
    assert hca.startswith("=")
    assert "mlx5_8" not in hca and "mlx5_9" not in hca  # storage NICs excluded
    assert hca.count("mlx5_") == 8


def test_roce_site_gets_traffic_class_106(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    """dossier 7.2: ToS = DSCP x 4 + ECT(0); DSCP 26 -> NCCL_IB_TC=106."""
    site, groups = tier3
    site["gpucluster_fabric"] = {**site["gpucluster_fabric"], "type": "roce", "roce": {"dscp": 26}}
    plan = cluster_plan(site, groups)
    assert plan["nccl"]["conf"]["NCCL_IB_TC"] == "106"
    assert plan["fabric"]["roce"]["traffic_class"] == 106


def _bad(site: dict[str, Any], section: str, **changes: Any) -> dict[str, Any]:
    site[section] = {**site.get(section, {}), **changes}
    return site


@pytest.mark.parametrize(
    ("section", "changes", "field"),
    [
        ("gpucluster_node", {"gpu_model": "h900"}, "gpucluster_node.gpu_model"),
        ("gpucluster_gpu_policy", {"clock_policy": "fixed", "sm_mhz": 2505}, "gpucluster_gpu_policy.sm_mhz"),
        ("gpucluster_workload", {"tensor_parallel": 16}, "gpucluster_workload.tensor_parallel"),
        ("gpucluster_facility", {"rack_power_budget_kw": 5}, "gpucluster_facility.rack_power_budget_kw"),
        ("gpucluster_network", {"bmc": {"cidr": "10.30.0.128/25", "first_offset": 10}}, "gpucluster_network"),
        ("gpucluster_fabric", {"type": "omnipath"}, "gpucluster_fabric.type"),
        ("gpucluster_cluster", {"tier": "tier9"}, "gpucluster_cluster.tier"),
    ],
)
def test_bad_input_names_the_field(
    tier3: tuple[dict[str, Any], dict[str, list[str]]], section: str, changes: dict[str, Any], field: str
) -> None:
    site, groups = tier3
    with pytest.raises(PlanError) as err:
        cluster_plan(_bad(site, section, **changes), groups)
    assert field in str(err.value)
    assert "allowed" in str(err.value)


def test_stripe_count_above_ost_count_names_the_field(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    site, groups = tier3
    lustre = dict(site["gpucluster_storage"]["lustre"])
    lustre["layouts"] = {"checkpoints": [{"end": -1, "stripe_count": 64, "stripe_size": 4194304}]}
    site["gpucluster_storage"] = {**site["gpucluster_storage"], "lustre": lustre}
    with pytest.raises(PlanError, match=r"gpucluster_storage\.lustre\.layouts\.checkpoints\[0\]\.stripe_count"):
        cluster_plan(site, groups)


@pytest.mark.parametrize(
    ("section", "key"),
    [("gpucluster_node", "gpu_model"), ("gpucluster_node", "gpus_per_node"), ("gpucluster_cluster", "name")],
)
def test_missing_required_field_is_named(
    tier3: tuple[dict[str, Any], dict[str, list[str]]], section: str, key: str
) -> None:
    site, groups = tier3
    site[section] = {k: v for k, v in site[section].items() if k != key}
    with pytest.raises(PlanError, match=rf"{section}\.{key}"):
        cluster_plan(site, groups)


def test_missing_section_is_named(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    site, groups = tier3
    del site["gpucluster_fabric"]
    with pytest.raises(PlanError, match="gpucluster_fabric"):
        cluster_plan(site, groups)


def test_two_heads_are_refused(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    site, groups = tier3
    with pytest.raises(PlanError, match=r"groups\.head"):
        cluster_plan(site, {**groups, "head": ["head01", "head02"]})


def test_plan_is_deterministic(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    assert json.dumps(cluster_plan(*tier3), sort_keys=True) == json.dumps(cluster_plan(*tier3), sort_keys=True)
