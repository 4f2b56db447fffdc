"""Cooling: coolant flow (Q = m c dT) and thresholds (tiers.md corrections, dossier 1.2, 6)."""

from __future__ import annotations

import copy

import pytest
from conftest import load_inventory
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.cooling import (
    WATER_KG_PER_L,
    WATER_KJ_PER_KG_K,
    dlc_thresholds,
    flow_for,
    gpu_temperature_thresholds,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import gpu_model
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan


def delta_t_for(heat_kw: float, flow_lpm: float) -> float:
    """Supply-to-return rise in K for ``heat_kw`` at ``flow_lpm``: Q = m c dT solved for dT, the check of flow_for."""
    return heat_kw / (WATER_KJ_PER_KG_K * flow_lpm * WATER_KG_PER_L / 60.0)


def test_tiers_md_flow_correction() -> None:
    """tiers.md: 44.8 kW at a 5 K rise needs ~128 L/min; 60 L/min gives ~10.7 K."""
    assert flow_for(44.8, 5) == pytest.approx(128.4, abs=0.1)
    assert delta_t_for(44.8, 60) == pytest.approx(10.7, abs=0.1)


def test_dlc_thresholds_w32() -> None:
    t = dlc_thresholds(cooling="dlc", heat_load_kw=44.8, delta_t_k=5, ashrae_class="W32")
    assert t["required_flow_lpm"] == pytest.approx(128.4, abs=0.1)
    assert t["supply_max_c"] == 32 and t["supply_warn_c"] == 30  # dossier 6.1: W32 = 32 C max supply
    assert t["return_max_c"] > t["return_warn_c"] > t["supply_max_c"]
    assert t["flow_critical_lpm"] < t["flow_low_lpm"] < t["required_flow_lpm"]
    assert t["delta_t_low_k"] < 5 < t["delta_t_high_k"]


def test_air_has_no_coolant_alarms() -> None:
    assert dlc_thresholds(cooling="air", heat_load_kw=40) == {
        "cooling": "air",
        "notes": ["air cooled: no coolant alarms"],
    }


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"ashrae_class": "W99"}, "ashrae_class"),
        ({"delta_t_k": 0.5}, "coolant_delta_t_k"),
        ({"liquid_fraction": 1.5}, "liquid_heat_fraction"),
        ({"cooling": "immersion"}, "cooling"),
    ],
)
def test_bad_cooling_input_names_the_field(args: dict, field: str) -> None:
    with pytest.raises(PlanError, match=rf"gpucluster_facility\.{field}"):
        dlc_thresholds(**{"cooling": "dlc", "heat_load_kw": 40, **args})


def test_gpu_temperatures_drain_at_max_operating() -> None:
    """dossier 1.2: H100 max operating 87 C; dossier 5.1: DCGM -T = Max Operating Temp."""
    t = gpu_temperature_thresholds(gpu_model("h100_sxm"))
    assert (t["warn_c"], t["critical_c"], t["slowdown_c"], t["shutdown_c"]) == (84, 87, 89, 92)
    assert gpu_temperature_thresholds(gpu_model("a100_sxm4"))["critical_c"] == 85


def test_models_without_limits_need_the_inventory() -> None:
    # issue 43: no sourced Max Operating Temp and none from the inventory: refused, not a plan without a drain
    for key in ("b200", "gb200", "h100_pcie", "rtx_pro_6000"):
        with pytest.raises(PlanError, match=r"gpu_temp_limits\.max_operating_c.*nvidia-smi -q -d TEMPERATURE"):
            gpu_temperature_thresholds(gpu_model(key))
    with pytest.raises(PlanError, match=r"gpu_temp_limits\.max_operating_c"):
        gpu_temperature_thresholds(gpu_model("b200"), {"slowdown_c": 88})
    with pytest.raises(PlanError, match=r"gpu_temp_limits\.slowdown_c.*at least max_operating_c \(87 C\)"):
        gpu_temperature_thresholds(gpu_model("b200"), {"max_operating_c": 87, "slowdown_c": 80})
    t = gpu_temperature_thresholds(gpu_model("b200"), {"max_operating_c": 85, "slowdown_c": 88})
    assert t["critical_c"] == 85 and t["source"].startswith("inventory")
    with pytest.raises(PlanError, match=r"gpu_temp_limits\.max_operating_c"):
        gpu_temperature_thresholds(gpu_model("b200"), {"max_operating_c": 200})


@given(heat=st.floats(0.1, 500), dt=st.floats(1, 30))
def test_flow_and_delta_t_are_inverse(heat: float, dt: float) -> None:
    assert delta_t_for(heat, flow_for(heat, dt)) == pytest.approx(dt)


def test_the_loop_is_sized_for_the_capped_rack() -> None:
    """A rack the budget caps makes the heat of its GPUs at the applied limit, not at the model default."""
    site, groups = load_inventory("tier4")
    site = copy.deepcopy(site)
    site["gpucluster_facility"] = {
        **site["gpucluster_facility"],
        **{"racks": 2, "rack_power_budget_kw": 30, "pdu_rating_kw": 30, "cooling": "dlc", "coolant_delta_t_k": 10},
    }
    plan = cluster_plan(site, groups)
    pw, cool = plan["power"], plan["cooling"]
    assert pw["capped"] and plan["gpu"]["clocks"]["power_limit_w"] == 362  # 4 nodes per rack, as the issue
    assert cool["heat_load_kw"] == pytest.approx(pw["rack_kw"], abs=1e-3) and cool["heat_load_kw"] <= 30
    assert cool["required_flow_lpm"] == pytest.approx(flow_for(pw["rack_kw"], 10), abs=0.1)
    assert cool["required_flow_lpm"] < flow_for(pw["rack_kw_uncapped"], 10)
