"""Node and rack power, breakers, power caps (tiers.md power figures; NEC 80 % rule)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.module_utils.power import circuit_kw, power_budget

TIER4 = dict(
    nodes=8, gpus_per_node=8, gpu_power_w=700, gpu_min_w=200, gpu_max_w=700, base_power_w=4600,
    racks=2, rack_budget_kw=60, pdu_rating_kw=60, breaker_amps=32, circuit_voltage_v=400, circuit_phases=3,
)  # fmt: skip


def test_tiers_md_gpu_load() -> None:
    """tiers.md: 700 W per H100 SXM, 5.6 kW of GPU load per node, 44.8 kW for 8 nodes."""
    p = power_budget(**TIER4)
    assert p["gpu_load_kw_per_node"] == pytest.approx(5.6)
    assert p["gpu_load_kw_total"] == pytest.approx(44.8)
    assert p["node_kw"] == pytest.approx(10.2)  # DGX H100: ~10.2 kW max
    assert p["nodes_per_rack"] == 4 and p["rack_kw"] == pytest.approx(40.8)
    assert p["fits"] and p["per_gpu_cap_w_to_fit"] is None


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
    assert not p["fits"]
    assert p["per_gpu_cap_w_to_fit"] == 362
    assert p["rack_kw_fitted"] <= 60


def test_a_rack_that_cannot_fit_names_the_field() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_facility\.rack_power_budget_kw.*minimum power limit"):
        power_budget(**{**TIER4, "racks": 1, "rack_budget_kw": 40, "pdu_rating_kw": 40})


def test_bad_phases() -> None:
    with pytest.raises(PlanError, match=r"circuit_phases"):
        power_budget(**{**TIER4, "circuit_phases": 2})


@given(
    nodes=st.integers(1, 64),
    racks=st.integers(1, 16),
    budget=st.floats(5, 200),
    base=st.integers(500, 6000),
)
def test_any_cap_is_within_limits_and_fits(nodes: int, racks: int, budget: float, base: int) -> None:
    racks = min(racks, nodes)
    args = {
        **TIER4,
        "nodes": nodes,
        "racks": racks,
        "rack_budget_kw": budget,
        "pdu_rating_kw": budget,
        "base_power_w": base,
    }
    try:
        p = power_budget(**args)
    except PlanError:
        per_rack = math.ceil(nodes / racks)
        assert per_rack * (8 * 200 + base) / 1000 > budget  # only when even the minimum does not fit
        return
    cap = p["per_gpu_cap_w_to_fit"]
    if cap is not None:
        assert 200 <= cap <= 700
    assert p["rack_kw_fitted"] <= budget + 1e-6
