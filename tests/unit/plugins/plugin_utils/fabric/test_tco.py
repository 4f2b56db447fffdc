"""Fabric cost, InfiniBand vs RoCEv2 (plugins/plugin_utils/fabric/tco.py).

Reference case: the reference article's table "InfiniBand vs RoCEv2 - The Real TCO for a 64-GPU
Cluster" (/work/shared/reference/articles/000, 8 nodes x 8 H100, NDR 400G vs 400G Ethernet), which is
also the tier4 fabric plan (non-blocking fat tree, 8 rail leaves + 2 spines, radix 64: 64 host links and 64
uplinks).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory
from hypothesis import assume, given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.filter.calculators import FilterModule
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import tco
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.links import links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections

TIER4 = {"topology": "fat_tree", "rails": 8, "gpus_per_node": 8, "switch_radix": 64}
HOSTS8 = [f"compute{i:02d}" for i in range(1, 9)]

#: The article's table, line by line (USD, its "~" estimates), as printed.
ARTICLE_LINES = {
    "infiniband": {"nics": 128000, "switches": 220000, "optics": 48000, "support": 214000, "staff": 360000,
                   "power": 47000},
    "roce": {"nics": 64000, "switches": 110000, "optics": 38000, "support": 113000, "staff": 120000, "power": 39000},
}  # fmt: skip
ARTICLE_TOTALS = {"infiniband": 1220000, "roce": 577000, "delta": 643000}
ARTICLE_SUPPORT_DELTA_3Y = 303000  # "+$303K IB over 3yr"


def tier4_tco(**costs: Any) -> dict[str, Any]:
    return tco.fabric_tco(compute_hosts=HOSTS8, costs=costs, **TIER4)


# --- the article's reference case ------------------------------------------------------------


def test_article_component_lines_reproduced_from_unit_prices() -> None:
    """Defaults are the article's lines spread over the tier4 parts: the hardware lines come back exactly."""
    t = tier4_tco()
    assert t["counts"] == {
        "nics": 64, "leaves": 8, "spines": 2, "cores": 0, "host_links": 64, "uplinks": 64, "core_links": 0,
        "switches": 10, "links": 128, "switch_radix": 64,
    }  # fmt: skip
    # the RoCE column is sized with the 51.2 Tb/s Ethernet switch (128 x 400G): the same counts at 8 nodes
    assert t["fabrics"]["roce"]["counts"] == {**t["counts"], "switch_radix": 128}
    for kind in tco.FABRICS:
        lines = t["fabrics"][kind]["lines_usd"]
        for name in ("nics", "switches", "optics", "staff"):
            assert lines[name] == pytest.approx(ARTICLE_LINES[kind][name]), (kind, name)
    # support: 18% of hardware per year x 3 years; the article's rounded "~" values are within 1.5%
    ib, roce = t["fabrics"]["infiniband"], t["fabrics"]["roce"]
    assert ib["hardware_usd"] == 396000 and roce["hardware_usd"] == 212000
    assert ib["lines_usd"]["support"] == pytest.approx(0.18 * 396000 * 3) == pytest.approx(213840)
    assert roce["lines_usd"]["support"] == pytest.approx(0.18 * 212000 * 3) == pytest.approx(114480)
    assert ib["lines_usd"]["support"] == pytest.approx(ARTICLE_LINES["infiniband"]["support"], rel=0.001)
    assert roce["lines_usd"]["support"] == pytest.approx(ARTICLE_LINES["roce"]["support"], rel=0.015)


def test_article_totals_do_not_add_up() -> None:
    """Where the article's arithmetic does not add up (docs/fabric.md, What the fabric costs)."""
    ib, roce = (sum(ARTICLE_LINES[k].values()) for k in tco.FABRICS)
    # its own lines sum to $1,017K and $484K, not the $1,220K and $577K it states
    assert (ib, roce) == (1017000, 484000)
    assert ARTICLE_TOTALS["infiniband"] - ib == 203000
    assert ARTICLE_TOTALS["roce"] - roce == 93000
    # the gap of its lines is $533K, not $643K
    assert ib - roce == 533000 != ARTICLE_TOTALS["delta"]
    # "Annual support ... ~$214,000/yr": 18% of $396K hardware is $71,280/yr; $214K is the 3-year sum
    assert round(0.18 * 396000) == 71280 and round(0.18 * 396000 * 3, -3) == 214000
    # ... and its "+$303K over 3yr" is 3 x the 3-year difference ($214K - $113K = $101K)
    support_gap = ARTICLE_LINES["infiniband"]["support"] - ARTICLE_LINES["roce"]["support"]
    assert support_gap == 101000 and 3 * support_gap == ARTICLE_SUPPORT_DELTA_3Y
    # staff: the text says a "$120K/year" specialist premium (= $360K over 3 years); the table's gap is $240K
    assert ARTICLE_LINES["infiniband"]["staff"] - ARTICLE_LINES["roce"]["staff"] == 240000 != 3 * 120000
    # power: $47K / $39K over 3 years at $0.10/kWh means 17.9 kW / 14.8 kW of network, around the clock
    kw = {k: ARTICLE_LINES[k]["power"] / (0.10 * tco.HOURS_PER_YEAR * 3) for k in tco.FABRICS}
    assert kw["infiniband"] == pytest.approx(17.88, abs=0.01)
    assert kw["roce"] == pytest.approx(14.84, abs=0.01)
    # the engine, from datasheet watts (10 x 747 W switches + 128 links x 18 W optics): 9.8 kW for both
    t = tier4_tco()
    assert t["fabrics"]["infiniband"]["power_kw"] == pytest.approx((10 * 747 + 128 * 18) / 1000)


def test_article_case_with_the_article_power_reproduces_line_sums() -> None:
    """Given the article's implied network power, the engine's totals are the sums of the article's lines
    (support taken as the 3-year figure), i.e. $1,016,840 and $485,480, not $1,220K and $577K."""
    ib_w = 47000 / (0.10 * tco.HOURS_PER_YEAR * 3) * 1000 / 10
    roce_w = 39000 / (0.10 * tco.HOURS_PER_YEAR * 3) * 1000 / 10
    t = tier4_tco(infiniband={"switch_w": ib_w, "link_w": 0}, roce={"switch_w": roce_w, "link_w": 0})
    ib, roce = t["fabrics"]["infiniband"], t["fabrics"]["roce"]
    assert ib["lines_usd"]["power"] == pytest.approx(47000)
    assert roce["lines_usd"]["power"] == pytest.approx(39000)
    assert ib["total_usd"] == pytest.approx(128000 + 220000 + 48000 + 213840 + 360000 + 47000)
    assert roce["total_usd"] == pytest.approx(64000 + 110000 + 38000 + 114480 + 120000 + 39000)
    assert t["delta_usd"] == pytest.approx(1016840 - 485480)


def test_performance_ratio_as_gpu_hours() -> None:
    """64 GPUs x 8760 h x 3 years = 1,681,920 GPU-h; at 90% RoCE does not deliver 10% of them, at $4/GPU-h."""
    t = tier4_tco()
    perf = t["performance"]
    assert perf["gpu_hours"] == 64 * 8760 * 3 == 1681920
    assert perf["lost_gpu_hours"] == pytest.approx(168192)
    assert perf["lost_usd"] == pytest.approx(672768)
    assert perf["range"]["low_ratio"]["lost_usd"] == pytest.approx(0.15 * 1681920 * 4)
    assert perf["range"]["high_ratio"]["lost_usd"] == pytest.approx(0.05 * 1681920 * 4)
    assert t["roce_with_performance_usd"] == pytest.approx(t["fabrics"]["roce"]["total_usd"] + 672768)


def test_ratio_one_means_no_penalty_and_roce_cheaper() -> None:
    t = tier4_tco(roce_performance_ratio=1.0)
    assert t["performance"]["lost_gpu_hours"] == 0 and t["performance"]["lost_usd"] == 0
    assert t["roce_with_performance_usd"] == t["fabrics"]["roce"]["total_usd"]
    assert t["cheaper_with_performance"] == "roce"


def test_overrides_and_sources() -> None:
    t = tier4_tco(years=5, power_usd_per_kwh=0.2, infiniband={"nic_usd": 2500})
    ib = t["fabrics"]["infiniband"]
    assert ib["lines_usd"]["nics"] == 64 * 2500
    assert ib["lines_usd"]["staff"] == 5 * 120000
    assert ib["lines_usd"]["power"] == pytest.approx(ib["power_kw"] * 8760 * 5 * 0.2)
    assert t["sources"]["infiniband"]["nic_usd"] == "inventory gpucluster_costs.infiniband.nic_usd"
    assert t["sources"]["years"] == "inventory gpucluster_costs.years"
    assert "article 000" in t["sources"]["roce"]["nic_usd"]
    assert "list-price estimates" in t["caveat"].lower()


def test_no_fabric() -> None:
    t = tco.fabric_tco(topology="none", compute_hosts=["compute01"], rails=0, gpus_per_node=8)
    assert t["applies"] is False and t["reason"].startswith("no fabric")
    assert "fabrics" not in t
    assert "no fabric" in tco.tco_text(t)


def test_text_table() -> None:
    text = tco.tco_text(tier4_tco())
    assert "IB: 10 switches (8 leaf + 2 spine, 64-port); RoCE: 10 switches (8 leaf + 2 spine, 128-port)" in text
    assert "128 links (64 host + 64 uplinks)" in text
    assert "$995,526" in text  # the InfiniBand 3-year total from the defaults
    assert "-$672,768" in text


# --- properties ------------------------------------------------------------------------------


def _total(nodes: int, rails: int, topology: str, kind: str, spines: int) -> float:
    try:
        t = tco.fabric_tco(
            topology=topology,
            compute_hosts=[f"n{i}" for i in range(nodes)],
            rails=rails,
            gpus_per_node=8,
            switch_radix=64,
            spines=spines,
        )
    except PlanError:
        assume(False)
    return t["fabrics"][kind]["total_usd"]


@given(
    nodes=st.integers(1, 95),
    rails=st.integers(1, 8),
    topology=st.sampled_from(["rail_optimized", "fat_tree"]),
    kind=st.sampled_from(tco.FABRICS),
    spines=st.sampled_from([1, 2, 4, 8]),
)
def test_more_nodes_never_cheaper(nodes: int, rails: int, topology: str, kind: str, spines: int) -> None:
    assert _total(nodes + 1, rails, topology, kind, spines) >= _total(nodes, rails, topology, kind, spines)


@given(low=st.floats(0.01, 1.0), high=st.floats(0.01, 1.0))
def test_better_roce_never_costs_more_gpu_hours(low: float, high: float) -> None:
    low, high = sorted((low, high))
    lost_low = tier4_tco(roce_performance_ratio=low)["performance"]["lost_usd"]
    lost_high = tier4_tco(roce_performance_ratio=high)["performance"]["lost_usd"]
    assert lost_high <= lost_low
    assert lost_high >= 0


# --- the plan and the filter -------------------------------------------------------------------


@pytest.mark.parametrize("tier", ["tier1", "tier2", "tier3", "tier4"])
def test_each_tier_plan_has_the_section(tier: str) -> None:
    site, groups = load_inventory(tier)
    plan = cluster_plan(site, groups)
    t = plan["fabric_tco"]
    section = next(s for s in report_sections(plan) if s["title"] == "What the fabric costs")
    if tier == "tier1":
        assert t["applies"] is False and "no fabric" in t["reason"]
        assert section["rows"][0][0] == "fabric"
        return
    assert t["applies"] is True
    nodes = {"tier2": 2, "tier3": 4, "tier4": 8}[tier]
    assert t["nodes"] == nodes and t["counts"]["nics"] == nodes * 8
    assert t["counts"]["switches"] == len(plan["fabric"]["cabling"]["switches"])
    assert t["counts"]["links"] == len(list(links(plan["fabric"]["cabling"])))
    assert t["fabrics"]["infiniband"]["total_usd"] > t["fabrics"]["roce"]["total_usd"]
    assert any(r[0] == "fabric total" for r in section["rows"])


def test_counts_follow_the_plan_and_each_kinds_switch_radix() -> None:
    """The site's own kind is priced on the plan's fabric; the other kind on the tree its default switch
    makes: 128 nodes x 8 rails are 4 SUs of 32 on 64-port InfiniBand leaves, 2 SUs of 64 on 128-port
    Ethernet leaves, so the RoCE column has half the leaves and half the spines."""
    site, groups = load_inventory("tier4")
    site = copy.deepcopy(site)
    site["gpucluster_facility"] = {**site["gpucluster_facility"], "racks": 32}
    # full SUs leave no leaf port for the head's SM: the fabric's own SM (UFM) runs it
    site["gpucluster_fabric"] = {**site["gpucluster_fabric"], "subnet_manager": "external"}
    # two storage NICs per node, an address each: 256 do not fit the reference /24
    network = site["gpucluster_network"]
    site["gpucluster_network"] = {**network, "storage": {**network["storage"], "cidr": "10.40.4.0/22"}}
    groups = {k: v for k, v in groups.items() if k != "all"} | {"compute": [f"compute{i:03d}" for i in range(1, 129)]}
    plan = cluster_plan(site, groups)
    t = plan["fabric_tco"]
    assert t["fabric_type"] == "infiniband"
    assert (
        t["counts"]
        == t["fabrics"]["infiniband"]["counts"]
        == tco._counts_dict(tco.fabric_counts(plan["fabric"]["cabling"]))
    )
    ib, roce = t["fabrics"]["infiniband"]["counts"], t["fabrics"]["roce"]["counts"]
    assert ib["switches"] == len(plan["fabric"]["cabling"]["switches"]) == 32 + 16
    assert ib["links"] == len(list(links(plan["fabric"]["cabling"]))) == 1024 + 1024
    assert (ib["switch_radix"], roce["switch_radix"]) == (64, 128)
    assert (roce["leaves"], roce["spines"], roce["uplinks"]) == (16, 8, 1024)
    assert t["fabrics"]["roce"]["lines_usd"]["switches"] == pytest.approx(24 * 110000 / 10)
    # a RoCE site: its own plan (128-port) for the RoCE column, 64-port InfiniBand for the other
    site["gpucluster_fabric"] = {"type": "roce", "topology": "fat_tree", "link_rate_gbps": 400}
    t = cluster_plan(site, groups)["fabric_tco"]
    assert t["fabric_type"] == "roce"
    assert (t["counts"]["switch_radix"], t["fabrics"]["infiniband"]["counts"]["switch_radix"]) == (128, 64)
    assert t["fabrics"]["infiniband"]["counts"]["leaves"] == 32


def test_filter_from_arguments_and_from_plan() -> None:
    f = FilterModule().filters()["fabric_tco"]
    data = f({**TIER4, "nodes": 8})
    assert data["fabrics"]["infiniband"]["total_usd"] == tier4_tco()["fabrics"]["infiniband"]["total_usd"]
    assert f({"schema": 1, "fabric_tco": data}) == data
    assert "fabric total" in f({**TIER4, "nodes": 8}, text=True)


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("costs", "field"),
    [
        ({"infiniband": {"nic_usd": -1}}, "gpucluster_costs.infiniband.nic_usd"),
        ({"roce": {"switch_usd": "cheap"}}, "gpucluster_costs.roce.switch_usd"),
        ({"roce": {"link_w": -5}}, "gpucluster_costs.roce.link_w"),
        ({"roce_performance_ratio": 1.2}, "gpucluster_costs.roce_performance_ratio"),
        ({"roce_performance_ratio": 0}, "gpucluster_costs.roce_performance_ratio"),
        ({"gpu_utilization": -0.1}, "gpucluster_costs.gpu_utilization"),
        ({"years": 0}, "gpucluster_costs.years"),
        ({"years": 2.5}, "gpucluster_costs.years"),
        ({"support_fraction_per_year": 1.5}, "gpucluster_costs.support_fraction_per_year"),
        ({"power_usd_per_kwh": -0.1}, "gpucluster_costs.power_usd_per_kwh"),
        ({"infiniband": {"nic_price": 1}}, "gpucluster_costs.infiniband.nic_price"),
        ({"fx_rate": 1}, "gpucluster_costs.fx_rate"),
    ],
)
def test_bad_costs_name_the_field(costs: dict[str, Any], field: str) -> None:
    with pytest.raises(PlanError) as err:
        tier4_tco(**costs)
    assert err.value.field == field


def test_bad_gpu_hour_cost_names_the_workload_field() -> None:
    with pytest.raises(PlanError) as err:
        tco.fabric_tco(compute_hosts=HOSTS8, gpu_hour_usd=-4, **TIER4)
    assert err.value.field == "gpucluster_workload.gpu_hour_cost_usd"


@pytest.mark.parametrize(
    ("costs", "field"),
    [
        ({"roce_performance_ratio": 1.5}, "gpucluster_costs.roce_performance_ratio"),
        ({"infiniband": {"switch_usd": -10}}, "gpucluster_costs.infiniband.switch_usd"),
        ({"infiniband": {"switch_usd": "a lot"}}, "gpucluster_costs.infiniband.switch_usd"),
        ({"staff": 1}, "gpucluster_costs"),
    ],
)
def test_bad_costs_in_the_inventory_stop_the_plan(costs: dict[str, Any], field: str) -> None:
    site, groups = load_inventory("tier4")
    site = copy.deepcopy(site)
    site["gpucluster_costs"] = costs
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    assert err.value.field.startswith(field)
    assert "allowed" in str(err.value)


def test_inventory_costs_reach_the_plan() -> None:
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    site["gpucluster_costs"] = {"years": 5, "roce": {"nic_usd": 1500}}
    t = cluster_plan(site, groups)["fabric_tco"]
    assert t["years"] == 5
    assert t["fabrics"]["roce"]["lines_usd"]["nics"] == 32 * 1500
