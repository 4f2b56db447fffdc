"""The whole plan from the four reference inventories, and the bad inputs of the design.

Each bad input must fail with a PlanError that names the inventory field, before any
host is contacted (the plan play computes the plan on the controller first).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory, render_role_template
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import gpu_model
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.alerts import rules_yaml
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host


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
        assert files_by_host(plan)[name], name


def test_tier1_single_server_carries_every_role() -> None:
    from conftest import load_inventory

    plan = cluster_plan(*load_inventory("tier1"))
    assert list(plan["hosts"]) == ["dgx01"]
    assert set(plan["hosts"]["dgx01"]["roles"]) >= {"head", "compute", "storage"}
    assert plan["nccl"]["enabled"] is False  # NVLink only: no /etc/nccl.conf
    assert plan["fabric"]["slurm_topology"] == []  # no switch: no topology.conf
    dests = [f["dest"] for f in files_by_host(plan)["dgx01"]]
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
    site["gpucluster_fabric"].pop("infiniband")  # an InfiniBand section on RoCE is refused (inventory/rules.py)
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


# --- the applied GPU power limit (issue 13, point 1) ------------------------------------------


def _rack(tier: str = "tier3", policy: dict[str, Any] | None = None, **facility: Any) -> dict[str, Any]:
    """A reference tier's plan with facility (and GPU policy) changes."""
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    site["gpucluster_facility"] = {**site["gpucluster_facility"], **facility}
    if policy is not None:
        site["gpucluster_gpu_policy"] = policy
    return cluster_plan(site, groups)


def test_a_rack_cap_is_the_limit_every_host_applies() -> None:
    """Four 8x H100 nodes (4.6 kW base) in one 30 kW rack: 4 x (8 x 362 + 4600) W <= 30 kW, so 362 W,
    and -pl, the DCGM policy, the power alert, the circuits, the rack kW and the coolant all use it."""
    plan = _rack(racks=1, rack_power_budget_kw=30, pdu_rating_kw=30, cooling="dlc")
    clocks, pw = plan["gpu"]["clocks"], plan["power"]
    assert plan["cluster"]["compute_nodes"] == 4 and plan["cluster"]["gpus_per_node"] == 8
    assert clocks["power_limit_w"] == 362 and isinstance(clocks["power_limit_w"], int)
    assert clocks["power_limit_source"] == "rack_budget"
    assert "gpucluster_facility.rack_power_budget_kw" in clocks["power_limit_reason"]
    assert "-pl 362" in clocks["apply_args"] and "-pl 700" not in clocks["apply_args"]
    unit = render_role_template("compute", "gpucluster-gpu-clocks.service.j2", plan, "compute01")
    assert "ExecStart=/usr/bin/nvidia-smi -pl 362" in unit and "ExecStop=/usr/bin/nvidia-smi -pl 362" in unit
    assert "-pl 700" not in unit  # neither at start nor at stop: 700 W would draw 40.8 kW
    # the Prometheus power alert (DCGM sets no policy: docs/monitoring.md, "DCGM policy")
    assert plan["monitoring"]["thresholds"]["GpuPowerAboveCap"]["value"] == 362
    assert "DCGM_FI_DEV_POWER_USAGE > 362" in rules_yaml(plan["monitoring"]["rules"])
    # power figures at the applied limit, the uncapped ones kept
    assert pw["capped"] is True and pw["fits"] is False
    assert pw["rack_kw"] <= 30 and pw["rack_kw"] == pytest.approx(4 * (8 * 362 + 4600) / 1000)
    assert pw["rack_kw_uncapped"] == pytest.approx(40.8) and pw["node_kw_uncapped"] == pytest.approx(10.2)
    assert pw["nodes_per_circuit"] * pw["node_kw"] <= pw["circuit_kw"]
    assert pw["nodes_per_circuit"] == math.floor(pw["circuit_kw"] / pw["node_kw"]) == 2
    # the loop carries the heat the capped rack makes
    assert plan["cooling"]["heat_load_kw"] == pytest.approx(pw["rack_kw"], abs=1e-3)


def test_a_rack_that_holds_the_default_keeps_it(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    plan = cluster_plan(*tier3)
    clocks, pw = plan["gpu"]["clocks"], plan["power"]
    assert (clocks["power_limit_w"], clocks["power_limit_source"]) == (700, "model_default")
    assert pw["fits"] is True and pw["capped"] is False
    assert pw["rack_kw"] == pw["rack_kw_uncapped"] == pytest.approx(40.8)


def test_20_kw_cannot_hold_four_nodes_even_at_the_minimum() -> None:
    with pytest.raises(PlanError) as err:
        _rack(racks=1, rack_power_budget_kw=20, pdu_rating_kw=20)
    assert err.value.field == "gpucluster_facility.rack_power_budget_kw" and err.value.value == 20
    assert "minimum power limit" in str(err.value)


def test_a_site_cap_above_what_the_rack_holds_names_both_fields() -> None:
    policy = {"clock_policy": "power_capped", "power_cap_w": 500}
    with pytest.raises(PlanError) as err:
        _rack(policy=policy, racks=1, rack_power_budget_kw=30, pdu_rating_kw=30)
    text = str(err.value)
    assert err.value.field == "gpucluster_gpu_policy.power_cap_w" and err.value.value == 500
    assert "gpucluster_facility.rack_power_budget_kw" in text and "at most 362 W" in text


def test_a_site_cap_below_what_the_rack_holds_is_kept() -> None:
    policy = {"clock_policy": "max_performance", "power_cap_w": 300}
    plan = _rack(policy=policy, racks=1, rack_power_budget_kw=30, pdu_rating_kw=30)
    clocks, pw = plan["gpu"]["clocks"], plan["power"]
    assert (clocks["power_limit_w"], clocks["power_limit_source"]) == (300, "site_cap")
    assert "gpucluster_gpu_policy.power_cap_w" in clocks["power_limit_reason"]
    assert clocks["apply_args"][-1] == "-pl 300"
    assert pw["capped"] is False and pw["rack_kw"] == pytest.approx(4 * (8 * 300 + 4600) / 1000)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tier=st.sampled_from(["tier2", "tier3", "tier4"]),
    racks=st.integers(1, 8),
    budget=st.floats(5, 120),
    base=st.integers(500, 8000),
)
def test_any_plan_applies_a_limit_within_the_model_and_a_rack_within_budget(
    tier: str, racks: int, budget: float, base: int
) -> None:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    nodes = len(groups["compute"])
    racks = min(racks, nodes)
    site["gpucluster_facility"] = {
        **site["gpucluster_facility"],
        "racks": racks,
        "rack_power_budget_kw": budget,
        "pdu_rating_kw": budget,
    }
    site["gpucluster_node"] = {**site["gpucluster_node"], "base_power_w": base}
    try:
        plan = cluster_plan(site, groups)
    except PlanError as err:
        assert err.field == "gpucluster_facility.rack_power_budget_kw"
        return
    model = gpu_model(plan["cluster"]["gpu_model"])
    limit = plan["gpu"]["clocks"]["power_limit_w"]
    assert model.power_min_w <= limit <= model.power_max_w
    assert plan["power"]["rack_kw"] <= budget + 1e-6
    assert plan["monitoring"]["thresholds"]["GpuPowerAboveCap"]["value"] == limit
    assert f"-pl {limit}" in plan["gpu"]["clocks"]["apply_args"]
    reset = [int(a.split()[1]) for a in plan["gpu"]["clocks"]["reset_args"] if a.startswith("-pl ")]
    nodes_per_rack = plan["power"]["nodes_per_rack"]
    assert all(nodes_per_rack * (8 * w + base) / 1000 <= budget + 1e-6 for w in reset)
