"""Node variants (issue 19 item 5): the 8x RTX PRO 6000 node of tier1 and the DGX B200 of tier4 plan with
their own decisions, each shown in the report with why (docs/tiers.md, "Node variants")."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.alerts import rules_yaml
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections

RTX = "examples/tier1-rtxpro6000"
B200 = "examples/tier4-b200"


def _plan(inventory: str) -> dict[str, Any]:
    site, groups = load_inventory(inventory)
    return cluster_plan(copy.deepcopy(site), groups)


@pytest.fixture(scope="module")
def rtx() -> dict[str, Any]:
    return _plan(RTX)


@pytest.fixture(scope="module")
def b200() -> dict[str, Any]:
    return _plan(B200)


def _rows(plan: dict[str, Any], title: str) -> dict[str, list[str]]:
    section = next(s for s in report_sections(plan) if s["title"] == title)
    return {r[0]: r[1:] for r in section["rows"]}


def test_rtx_node_is_pcie_only_and_keeps_tp_at_one(rtx: dict[str, Any]) -> None:
    link = rtx["gpu"]["interconnect"]
    assert (link["kind"], link["domain_gpus"], link["link_gbs_per_direction"]) == ("pcie", 1, 63)
    par = rtx["parallelism"]
    assert (par["tp"], par["pp"], par["dp"], par["zero_stage"], par["fits"]) == (1, 1, 8, 1, True)
    assert rtx["nccl"]["intra_node"]["transport"].startswith("P2P over PCIe")
    assert rtx["nccl"]["conf"] == {}  # one node, no fabric: no /etc/nccl.conf, nothing written for P2P either


def test_rtx_clocks_follow_the_site_policy_without_guessing_a_clock(rtx: dict[str, Any]) -> None:
    clocks = rtx["gpu"]["clocks"]
    assert clocks["policy"] == "power_capped" and clocks["lock_gpu_clocks"] is None
    assert clocks["apply_args"] == ["-pm 1", "-pl 600"]  # 600 W: docs/sources.md [S22]
    assert rtx["gpu"]["model"]["max_sm_mhz"] is None
    assert rtx["gpu"]["model"]["power_min_w"] == 300  # the example's gpu_limits bound, docs/sources.md [S27]


def test_rtx_max_performance_names_the_missing_limit() -> None:
    """Before: "inventory field 'gpucluster_gpu_policy.clock_policy': value 'rtx_pro_6000'" (issue 19 item 5)."""
    site, groups = load_inventory(RTX)
    site = copy.deepcopy(site)
    site["gpucluster_gpu_policy"] = {"clock_policy": "max_performance"}
    with pytest.raises(PlanError) as caught:
        cluster_plan(site, groups)
    assert caught.value.field == "gpucluster_node.gpu_limits.max_sm_mhz"
    site["gpucluster_node"]["gpu_limits"]["max_sm_mhz"] = 2400  # a site's own reading
    assert cluster_plan(site, groups)["gpu"]["clocks"]["lock_gpu_clocks"] == [2400, 2400]


def test_rtx_has_no_nvlink_monitoring(rtx: dict[str, Any]) -> None:
    dcgm = rtx["dcgm"]
    assert "n" not in dcgm["health_systems"] and dcgm["policy"] is None
    assert not any("NVLINK" in c["field"] for c in dcgm["exporter"]["counters"])
    assert "GpuNvlinkErrors" not in rules_yaml(rtx["monitoring"]["rules"])
    assert "NVLINK" not in rules_yaml(rtx["monitoring"]["rules"])
    fabric = rtx["monitoring"]["grafana"]
    text = str(fabric)
    assert "DCGM_FI_DEV_NVLINK" not in text and "rtx_pro_6000 has no NVLink" in text


def test_rtx_floor_is_none_with_the_pcie_ceiling_and_can_be_calibrated(rtx: dict[str, Any]) -> None:
    val = rtx["validation"]
    assert val["allreduce_intra_node_busbw_gbs"] is None
    assert "63 GB/s per direction" in val["reasons"]["allreduce_intra_node_busbw_gbs"]
    site, groups = load_inventory(RTX)
    site = copy.deepcopy(site)
    site["gpucluster_node"]["allreduce_intra_node_busbw_gbs"] = 40
    val = cluster_plan(site, groups)["validation"]
    assert val["allreduce_intra_node_busbw_gbs"] == 40 and "calibration" in val["allreduce_intra_node_source"]


def test_rtx_report_shows_each_decision(rtx: dict[str, Any]) -> None:
    rows = _rows(rtx, "Inside the node")
    assert rows["GPU-to-GPU link"][0] == "PCIe Gen5 x16 only (no NVLink)"
    assert rows["tensor-parallel domain (GPUs)"][0] == "1" and "TP=1" in rows["tensor-parallel domain (GPUs)"][1]
    assert "SHM" in rows["NCCL inside the node"][0]
    assert rows["all_reduce floor in a node (GB/s)"][0] == "none"
    assert rows["NVLink monitoring"][0] == "none"
    assert "ACSCtl" in rows["host check"][0]
    assert "power_min_w" in rows["GPU limits from the site"][0]


def test_b200_decisions(b200: dict[str, Any]) -> None:
    link = b200["gpu"]["interconnect"]
    assert (link["kind"], link["domain_gpus"], link["link_gbs_per_direction"]) == ("nvswitch", 8, 900)
    assert b200["validation"]["allreduce_intra_node_busbw_gbs"] == 432  # docs/sources.md [A3]
    clocks = b200["gpu"]["clocks"]
    assert clocks["apply_args"] == ["-pm 1", "-lgc 1965,1965", "-lmc 3996,3996", "-pl 1000"]  # [S10][S19]
    pw = b200["power"]
    # DGX B200: 14.3 kW maximum (docs/sources.md [S28]) = 8 x 1000 W + 6300 W base
    assert (pw["node_kw"], pw["nodes_per_rack"], pw["rack_kw"], pw["capped"]) == (14.3, 4, 57.2, False)
    assert pw["nodes_per_circuit"] == 1  # 32 A at 400 V three-phase: 17.7 kW usable
    cool = b200["cooling"]
    assert (cool["heat_load_kw"], cool["required_flow_lpm"]) == (57.2, 82.0)  # 57.2 / (4.186 x 10) x 60
    assert b200["nccl"]["conf"] == _plan("tier4")["nccl"]["conf"]  # NCCL settings as the H100 tier4
    assert "GpuNvlinkErrors" in rules_yaml(b200["monitoring"]["rules"])
    assert _rows(b200, "Inside the node")["all_reduce floor in a node (GB/s)"][0] == "432"


def test_b200_rack_without_room_asks_for_the_missing_minimum() -> None:
    """Capping a B200 needs its minimum power limit, which the sources do not give: the error names it."""
    site, groups = load_inventory(B200)
    site = copy.deepcopy(site)
    site["gpucluster_facility"]["rack_power_budget_kw"] = 50
    site["gpucluster_facility"]["pdu_rating_kw"] = 50
    with pytest.raises(PlanError) as caught:
        cluster_plan(site, groups)
    assert caught.value.field == "gpucluster_node.gpu_limits.power_min_w"
    site["gpucluster_node"]["gpu_limits"] = {"power_min_w": 200}
    pw = cluster_plan(site, groups)["power"]
    assert pw["capped"] and pw["power_limit_w"] == 775  # floor((50 kW / 4 - 6300 W) / 8)


@pytest.mark.parametrize("tier", ["tier1", "tier2", "tier3", "tier4"])
def test_reference_tiers_keep_nvswitch_decisions(tier: str) -> None:
    plan = _plan(tier)
    assert plan["gpu"]["interconnect"]["kind"] == "nvswitch"
    assert plan["parallelism"]["tp_domain_gpus"] == 8
    assert "GpuNvlinkErrors" in rules_yaml(plan["monitoring"]["rules"])
    assert re.search(r"NVLink and fabric", str(plan["monitoring"]["grafana"]))
