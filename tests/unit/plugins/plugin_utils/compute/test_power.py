"""Node and rack power, breakers, the GPU power limit a rack budget forces (tiers.md; NEC 80 % rule)."""

from __future__ import annotations

import math

import pytest
from conftest import cluster_plan, load_inventory
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import (
    LIMIT_SOURCES,
    PowerLimit,
    circuit_kw,
    power_budget,
    psu_redundant,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError

TIER4 = dict(
    nodes=8, gpus_per_node=8, gpu_power_w=700, gpu_min_w=200, gpu_max_w=700, base_power_w=4600,
    racks=2, rack_budget_kw=60, pdu_rating_kw=60, breaker_amps=32, circuit_voltage_v=400, circuit_phases=3,
)  # fmt: skip
#: the issue's case: four 8x H100 nodes with a 4.6 kW base load in one 30 kW rack
ISSUE = {**TIER4, "nodes": 4, "racks": 1, "rack_budget_kw": 30, "pdu_rating_kw": 30}


def test_tiers_md_gpu_load() -> None:
    """tiers.md: 700 W per H100 SXM, 5.6 kW of GPU load per node, 44.8 kW for 8 nodes."""
    p = power_budget(**TIER4)
    assert p["gpu_load_kw_per_node"] == pytest.approx(5.6)
    assert p["gpu_load_kw_total"] == pytest.approx(44.8)
    assert p["node_kw"] == pytest.approx(10.2)  # DGX H100: ~10.2 kW max
    assert p["nodes_per_rack"] == 4 and p["rack_kw"] == pytest.approx(40.8)
    assert p["fits"] and not p["capped"] and p["per_gpu_cap_w_to_fit"] is None
    assert (p["power_limit_w"], p["power_limit_source"]) == (700, "model_default")
    assert p["reset_power_limit_w"] == 700  # the rack holds the default: stopping the unit restores it
    assert p["node_kw_uncapped"] == p["node_kw"] and p["rack_kw_uncapped"] == p["rack_kw"]


def test_circuit_capacity() -> None:
    """32 A three-phase at 400 V: sqrt(3) x 400 x 32 = 22.17 kW raw, 17.7 kW at the 80 % continuous rule."""
    assert circuit_kw(32, 400, 3) == pytest.approx(22.17 * 0.8, rel=1e-3)
    assert circuit_kw(32, 230, 1) == pytest.approx(7.36 * 0.8, rel=1e-3)
    p = power_budget(**TIER4)
    assert p["nodes_per_circuit"] == 1  # 17.7 kW / 10.2 kW
    assert p["circuits_per_rack"] == 4


def test_one_rack_of_eight_needs_a_cap() -> None:
    # 8 x 10.2 = 81.6 kW > 60: cap so that 8 x (8 cap + 4600) <= 60000 -> cap = 362 W
    p = power_budget(**{**TIER4, "racks": 1})
    assert not p["fits"] and p["capped"]
    assert p["per_gpu_cap_w_to_fit"] == p["power_limit_w"] == 362
    assert p["rack_kw"] <= 60


def test_the_issue_rack_gets_the_cap_in_every_figure() -> None:
    """4 x 8 H100 + 4.6 kW base in 30 kW: 4 x (8 cap + 4600) <= 30000 -> 362 W; every kW is at 362 W."""
    p = power_budget(**ISSUE)
    assert (p["power_limit_w"], p["power_limit_source"], p["power_limit_w_uncapped"]) == (362, "rack_budget", 700)
    assert p["reset_power_limit_w"] == 362  # never reset to the 700 W default the rack cannot hold
    assert p["capped"] and not p["fits"]
    assert p["gpu_load_kw_per_node"] == pytest.approx(8 * 0.362)
    assert p["node_kw"] == pytest.approx(8 * 0.362 + 4.6)
    assert p["rack_kw"] == pytest.approx(4 * (8 * 0.362 + 4.6)) and p["rack_kw"] <= 30
    assert p["total_kw"] == p["rack_kw"]  # one rack
    # the uncapped figures stay for the report
    assert p["node_kw_uncapped"] == pytest.approx(10.2) and p["rack_kw_uncapped"] == pytest.approx(40.8)
    # the breaker plan is computed from the node kW the GPUs actually draw: 17.7 kW / 7.5 kW = 2
    assert p["nodes_per_circuit"] == 2 and p["circuits_per_rack"] == 2
    assert p["nodes_per_circuit"] * p["node_kw"] <= p["circuit_kw"]
    reason = p["power_limit_reason"]
    assert "gpucluster_facility.rack_power_budget_kw" in reason and "362 W" in reason and "700 W" in reason


def test_the_pdu_can_be_the_binding_limit() -> None:
    p = power_budget(**{**ISSUE, "rack_budget_kw": 60})  # the PDU's 30 kW binds
    assert p["power_limit_w"] == 362 and "gpucluster_facility.pdu_rating_kw" in p["power_limit_reason"]


def test_a_rack_that_cannot_fit_names_the_field() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_facility\.rack_power_budget_kw.*minimum power limit"):
        power_budget(**{**TIER4, "racks": 1, "rack_budget_kw": 40, "pdu_rating_kw": 40})


def test_20_kw_cannot_hold_four_nodes_even_at_the_minimum() -> None:
    """4 x (8 x 200 W + 4600 W) = 24.8 kW > 20 kW: no cap fits; the error names the budget and the floor."""
    with pytest.raises(PlanError) as err:
        power_budget(**{**ISSUE, "rack_budget_kw": 20, "pdu_rating_kw": 20})
    assert err.value.field == "gpucluster_facility.rack_power_budget_kw" and err.value.value == 20
    assert "24.8 kW" in err.value.allowed


def test_a_site_cap_above_the_fitting_cap_names_both_fields() -> None:
    with pytest.raises(PlanError) as err:
        power_budget(**{**ISSUE, "gpu_power_w": 500, "gpu_power_source": "site_cap"})
    text = str(err.value)
    assert err.value.field == "gpucluster_gpu_policy.power_cap_w" and err.value.value == 500
    assert "gpucluster_facility.rack_power_budget_kw" in text and "at most 362 W" in text


def test_a_site_cap_below_the_fitting_cap_is_kept() -> None:
    p = power_budget(**{**ISSUE, "gpu_power_w": 300, "gpu_power_source": "site_cap"})
    assert (p["power_limit_w"], p["power_limit_source"]) == (300, "site_cap")
    assert p["reset_power_limit_w"] is None  # the filter was not told the model default
    with_default = power_budget(**{**ISSUE, "gpu_power_w": 300, "gpu_power_source": "site_cap", "gpu_default_w": 700})
    assert with_default["reset_power_limit_w"] == 362
    assert p["fits"] and not p["capped"] and p["per_gpu_cap_w_to_fit"] is None
    assert p["rack_kw"] == pytest.approx(4 * (8 * 0.3 + 4.6))
    assert "gpucluster_gpu_policy.power_cap_w" in p["power_limit_reason"]
    # exactly at the fitting cap is still the site's own
    assert power_budget(**{**ISSUE, "gpu_power_w": 362, "gpu_power_source": "site_cap"})["power_limit_w"] == 362


def test_the_decision_round_trips_through_plain_data() -> None:
    p = power_budget(**ISSUE)
    limit = PowerLimit.from_dict(p)
    assert limit.power_limit_w == 362 and limit.as_dict() == {k: p[k] for k in limit.as_dict()}


def test_bad_phases() -> None:
    with pytest.raises(PlanError, match=r"circuit_phases"):
        power_budget(**{**TIER4, "circuit_phases": 2})


def test_bad_source() -> None:
    with pytest.raises(PlanError, match=r"gpu_power_source"):
        power_budget(**{**TIER4, "gpu_power_source": "rack_budget"})


@given(
    nodes=st.integers(1, 64),
    racks=st.integers(1, 16),
    budget=st.floats(5, 200),
    pdu=st.one_of(st.none(), st.floats(5, 200)),
    base=st.integers(500, 6000),
    site_cap=st.one_of(st.none(), st.integers(200, 700)),
)
def test_the_applied_limit_is_within_the_model_and_the_rack_within_budget(
    nodes: int, racks: int, budget: float, pdu: float | None, base: int, site_cap: int | None
) -> None:
    racks = min(racks, nodes)
    args = {
        **TIER4,
        "nodes": nodes,
        "racks": racks,
        "rack_budget_kw": budget,
        "pdu_rating_kw": pdu,
        "base_power_w": base,
        "gpu_power_w": site_cap if site_cap is not None else 700,
        "gpu_power_source": "site_cap" if site_cap is not None else "model_default",
        "gpu_default_w": 700,
    }
    limit_kw = min(budget, pdu if pdu is not None else budget)
    per_rack = math.ceil(nodes / racks)
    try:
        p = power_budget(**args)
    except PlanError as err:
        if err.field == "gpucluster_gpu_policy.power_cap_w":  # only a site cap the rack cannot hold
            assert site_cap is not None and per_rack * (8 * site_cap + base) / 1000 > limit_kw
        else:  # only when even the minimum does not fit
            assert per_rack * (8 * 200 + base) / 1000 > limit_kw
        return
    assert 200 <= p["power_limit_w"] <= 700
    assert p["power_limit_source"] in LIMIT_SOURCES
    assert p["power_limit_w"] <= p["reset_power_limit_w"] <= 700  # a reset never overloads the rack either
    assert per_rack * (8 * p["reset_power_limit_w"] + base) / 1000 <= limit_kw + 1e-6
    assert p["rack_kw"] <= limit_kw + 1e-6
    assert p["rack_kw"] == pytest.approx(per_rack * (8 * p["power_limit_w"] + base) / 1000)
    assert p["capped"] == (p["power_limit_source"] == "rack_budget") == (p["power_limit_w"] < args["gpu_power_w"])
    if site_cap is not None:
        assert p["power_limit_w"] == site_cap
    if p["nodes_per_circuit"]:
        assert p["nodes_per_circuit"] * p["node_kw"] <= p["circuit_kw"] + 1e-9


# ---------------------------------------------------------------- the node's PSUs after the redundant ones fail
#: DGX H100: six 3.3 kW PSUs, 4+2 redundancy, 10.2 kW maximum input (docs/sources.md [S29])
DGX_PSUS = {"psu_count": 6, "psu_rating_w": 3300}


@pytest.mark.parametrize(("level", "redundant"), [(None, 1), ("N", 0), ("N+1", 1), ("N+2", 2), ("N+N", 3)])
def test_psu_redundancy_levels(level: str | None, redundant: int) -> None:
    assert psu_redundant(6, level)[0] == redundant
    assert psu_redundant(1, None) == (0, "N")  # one PSU: no spare by default


@pytest.mark.parametrize(
    ("count", "level", "fragment"),
    [
        (6, "N+6", "N+1 to N+5, N+N or N"),
        (5, "N+N", "even psu_count"),
        (1, "N+1", "a node of one PSU"),
        (6, "2N", "N+<k>"),
    ],
)
def test_psu_redundancy_refused(count: int, level: str, fragment: str) -> None:
    with pytest.raises(PlanError, match=r"gpucluster_node\.psu_redundancy") as caught:
        psu_redundant(count, level)
    assert fragment in str(caught.value)


@pytest.mark.parametrize("level", [None, "N+1", "N+2"])
def test_dgx_h100_psus_hold_700_w_at_n1_and_4_plus_2(level: str | None) -> None:
    p = power_budget(**TIER4, **DGX_PSUS, psu_redundancy=level)
    assert (p["power_limit_w"], p["power_limit_source"], p["capped"]) == (700, "model_default", False)
    assert p["psu"]["surviving_w"] >= p["node_kw"] * 1000
    assert "psu_redundancy" in p["power_limit_reason"]


def test_dgx_h100_at_n_plus_n_caps_the_gpus_to_what_three_psus_carry() -> None:
    """3 x 3300 W = 9900 W for a 4.6 kW base: (9900 - 4600) / 8 = 662.5 -> 662 W."""
    p = power_budget(**TIER4, **DGX_PSUS, psu_redundancy="N+N")
    assert (p["power_limit_w"], p["power_limit_source"], p["power_limit_w_uncapped"]) == (662, "node_psu", 700)
    assert p["capped"] and not p["fits"] and p["reset_power_limit_w"] == 662
    assert p["node_kw"] == pytest.approx(9.896)
    assert "(6 - 3) x 3300 W = 9900 W" in p["power_limit_reason"] and "10200 W" in p["power_limit_reason"]


def test_tier4_variant_with_two_3_3_kw_psus_is_refused_at_n1_and_capped_without_a_spare() -> None:
    """The issue's case: 2 x 3.3 kW PSUs under a 10.2 kW node."""
    with pytest.raises(PlanError) as caught:  # N+1 (the default for 2 PSUs): one 3.3 kW PSU, 6.2 kW at 200 W
        power_budget(**TIER4, psu_count=2, psu_rating_w=3300)
    assert caught.value.field == "gpucluster_node.psu_count" and caught.value.value == 2
    assert "(2 - 1) x 3300 W = 3300 W" in str(caught.value) and ">= 6200 W" in str(caught.value)
    assert "at least 3 PSUs of 3300 W" in str(caught.value)
    p = power_budget(**TIER4, psu_count=2, psu_rating_w=3300, psu_redundancy="N")  # 6600 W: (6600-4600)/8
    assert (p["power_limit_w"], p["power_limit_source"]) == (250, "node_psu")
    assert p["node_kw"] == pytest.approx(6.6) and p["rack_kw"] == pytest.approx(4 * 6.6)
    assert any("capped at 250 W" in n for n in p["notes"])


def test_a_site_cap_above_what_the_psus_carry_names_the_cap_and_the_psus() -> None:
    with pytest.raises(PlanError) as caught:
        power_budget(**{**TIER4, "gpu_power_w": 690, "gpu_power_source": "site_cap"}, **DGX_PSUS, psu_redundancy="N+N")
    assert caught.value.field == "gpucluster_gpu_policy.power_cap_w"
    assert "at most 662 W" in str(caught.value) and "9900 W" in str(caught.value)


def test_the_tighter_of_the_rack_and_the_psus_binds() -> None:
    # one rack of 8: the rack holds 362 W, the PSUs at N+N 662 W -> the rack binds
    p = power_budget(**{**TIER4, "racks": 1}, **DGX_PSUS, psu_redundancy="N+N")
    assert (p["power_limit_w"], p["power_limit_source"]) == (362, "rack_budget")


def test_a_redundancy_without_the_psus_is_refused() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_node\.psu_redundancy.*psu_rating_w"):
        power_budget(**TIER4, psu_count=6, psu_redundancy="N+1")


@given(
    count=st.integers(1, 8),
    rating=st.integers(500, 5000),
    level=st.sampled_from([None, "N", "N+1", "N+2", "N+N"]),
    base=st.integers(500, 6000),
    gpu_min=st.integers(100, 400),
    gpu_max=st.integers(400, 1200),
    racks=st.integers(1, 8),
    site_cap=st.one_of(st.none(), st.integers(0, 1100)),
)
def test_the_cap_stays_in_the_gpus_limits_and_the_node_on_its_surviving_psus(
    count: int, rating: int, level: str | None, base: int, gpu_min: int, gpu_max: int, racks: int, site_cap: int | None
) -> None:
    if site_cap is not None:  # a site cap is within the GPU's limits (compute/clocks.py refuses one outside)
        site_cap = min(gpu_max, gpu_min + site_cap)
    args = {
        **TIER4,
        "racks": racks,
        "base_power_w": base,
        "gpu_min_w": gpu_min,
        "gpu_max_w": gpu_max,
        "gpu_power_w": site_cap if site_cap is not None else gpu_max,
        "gpu_power_source": "site_cap" if site_cap is not None else "model_default",
        "gpu_default_w": gpu_max,
        "psu_count": count,
        "psu_rating_w": rating,
        "psu_redundancy": level,
    }
    try:
        redundant = psu_redundant(count, level)[0]
    except PlanError:
        with pytest.raises(PlanError, match="psu_redundancy"):
            power_budget(**args)
        return
    surviving = (count - redundant) * rating
    try:
        p = power_budget(**args)
    except PlanError as err:
        assert err.field in (
            "gpucluster_node.psu_count",
            "gpucluster_gpu_policy.power_cap_w",
            "gpucluster_facility.rack_power_budget_kw",
        ), str(err)
        if err.field == "gpucluster_node.psu_count":  # even the minimum does not fit the surviving PSUs
            assert 8 * gpu_min + base > surviving
        return
    assert gpu_min <= p["power_limit_w"] <= gpu_max
    assert 8 * p["power_limit_w"] + base <= surviving + 1e-6  # the node never outdraws its surviving PSUs
    assert 8 * p["reset_power_limit_w"] + base <= surviving + 1e-6  # nor does a reset
    assert p["capped"] == (p["power_limit_source"] in ("rack_budget", "node_psu"))
    if site_cap is not None:
        assert p["power_limit_w"] == site_cap


def _tier4_with_psus(count: int, level: str) -> tuple[dict, dict]:
    site, groups = load_inventory("tier4")
    site["gpucluster_node"].update(psu_count=count, psu_redundancy=level)
    return site, groups


def test_tier4_plan_with_two_3_3_kw_psus() -> None:
    """Acceptance (issue 43): a tier4 variant with 2 x 3.3 kW PSUs is refused at N+1, capped without a spare."""
    with pytest.raises(PlanError) as caught:
        cluster_plan(*_tier4_with_psus(2, "N+1"))
    assert caught.value.field == "gpucluster_node.psu_count" and caught.value.value == 2
    assert "(2 - 1) x 3300 W is 3300 W" in str(caught.value) and ">= 6200 W" in str(caught.value)
    plan = cluster_plan(*_tier4_with_psus(2, "N"))
    clocks = plan["gpu"]["clocks"]
    assert (clocks["power_limit_w"], clocks["power_limit_source"]) == (250, "node_psu")
    assert "-pl 250" in clocks["apply_args"] and "-pl 250" in clocks["reset_args"]
    assert plan["power"]["node_kw"] == pytest.approx(6.6) and plan["power"]["psu"]["surviving_w"] == 6600
