"""GPU clocks and power limits: never outside the model's limits (dossier 1.1, 1.3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils.gpu import check_against_hardware
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.clocks import gpu_clocks, requested_power_limit
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import PowerLimit
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS, gpu_model
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError

H100 = gpu_model("h100_sxm")
KNOWN = [m for m in GPUS.values() if None not in (m.max_sm_mhz, m.power_min_w, m.power_max_w, m.power_default_w)]


def test_max_performance_locks_at_1980_not_2505() -> None:
    """tiers.md correction: the articles' -lgc 2505 is wrong; H100 SXM clocks.max.sm is 1980 MHz."""
    c = gpu_clocks(H100, "max_performance")
    assert c["lock_gpu_clocks"] == [1980, 1980]
    assert c["lock_memory_clocks"] == [2619, 2619]
    assert c["power_limit_w"] == 700 and c["power_limit_source"] == "model_default"
    assert c["apply_args"] == ["-pm 1", "-lgc 1980,1980", "-lmc 2619,2619", "-pl 700"]
    assert c["reset_args"] == ["-rgc", "-rmc", "-pl 700"]
    assert any("2505" in n for n in c["notes"])


def test_fixed_2505_is_refused_naming_the_field() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_gpu_policy\.sm_mhz.*2505.*<= 1980"):
        gpu_clocks(H100, "fixed", sm_mhz=2505)


def test_fixed_needs_a_clock() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_gpu_policy\.sm_mhz"):
        gpu_clocks(H100, "fixed")


def test_power_capped() -> None:
    c = gpu_clocks(H100, "power_capped", power_cap_w=550)
    assert c["lock_gpu_clocks"] is None and c["power_limit_w"] == 550
    assert c["apply_args"] == ["-pm 1", "-pl 550"]
    with pytest.raises(PlanError, match=r"power_cap_w.*>= 200"):
        gpu_clocks(H100, "power_capped", power_cap_w=150)
    with pytest.raises(PlanError, match=r"power_cap_w"):
        gpu_clocks(H100, "power_capped")


def test_unknown_limits_are_refused_not_guessed() -> None:
    """The error names the inventory key that supplies the value (issue 19 item 5: it named clock_policy)."""
    with pytest.raises(PlanError, match="read from the hardware") as caught:
        gpu_clocks(gpu_model("rtx_pro_6000"), "max_performance")
    assert caught.value.field == "gpucluster_node.gpu_limits.max_sm_mhz"
    assert "clocks.max.sm" in str(caught.value) and "clock_policy max_performance" in str(caught.value)
    with pytest.raises(PlanError, match="read from the hardware") as caught:
        gpu_clocks(gpu_model("b200"), "power_capped", power_cap_w=800)
    assert caught.value.field == "gpucluster_node.gpu_limits.power_min_w"


def test_unknown_policy() -> None:
    with pytest.raises(PlanError, match=r"clock_policy.*turbo"):
        gpu_clocks(H100, "turbo")


@given(model=st.sampled_from(KNOWN), data=st.data())
def test_accepted_settings_are_always_within_limits(model, data) -> None:  # type: ignore[no-untyped-def]
    sm = data.draw(st.integers(-100, 4000))
    cap = data.draw(st.integers(0, 1500))
    try:
        c = gpu_clocks(model, "fixed", sm_mhz=sm, power_cap_w=cap)
    except PlanError:
        assert not (1 <= sm <= model.max_sm_mhz and model.power_min_w <= cap <= model.power_max_w)
        return
    assert c["lock_gpu_clocks"][1] <= model.max_sm_mhz
    assert model.power_min_w <= c["power_limit_w"] <= model.power_max_w


def test_hardware_wins_over_the_catalog() -> None:
    plan = gpu_clocks(H100, "max_performance")
    assert check_against_hardware(plan, {"max_sm_mhz": 1980, "power_min_w": 200, "power_max_w": 700}) == []
    problems = check_against_hardware(plan, {"max_sm_mhz": 1755, "max_mem_mhz": 2619, "power_max_w": 650})
    assert len(problems) == 2
    assert "1980 MHz is above the GPU's clocks.max.sm 1755" in problems[0]


def test_the_requested_limit_and_its_source() -> None:
    assert requested_power_limit(H100, "max_performance") == (700, "model_default")
    assert requested_power_limit(H100, "fixed", 450) == (450, "site_cap")
    with pytest.raises(PlanError, match=r"power_cap_w.*<= 700"):
        requested_power_limit(H100, "max_performance", 800)


RACK_CAP = PowerLimit(
    power_limit_w=362,
    power_limit_source="rack_budget",
    power_limit_reason="gpucluster_facility.rack_power_budget_kw (30 kW) holds 4 nodes per rack only at 362 W",
    power_limit_w_uncapped=700,
    reset_power_limit_w=362,
)


def test_the_plans_decision_is_what_nvidia_smi_applies() -> None:
    """The rack budget's cap replaces the default in -pl, at start and at stop: a reset to the 700 W
    default would lift the rack over its budget."""
    c = gpu_clocks(H100, "max_performance", power_limit=RACK_CAP)
    assert c["power_limit_w"] == 362
    assert (c["power_limit_source"], c["power_limit_reason"]) == ("rack_budget", RACK_CAP.power_limit_reason)
    assert c["apply_args"] == ["-pm 1", "-lgc 1980,1980", "-lmc 2619,2619", "-pl 362"]
    assert c["reset_args"] == ["-rgc", "-rmc", "-pl 362"]
    # a clock lock does not lift the power limit: the plan says so
    assert any("362 W" in n and "1980 MHz" in n for n in c["notes"])


def test_a_decision_for_another_request_or_outside_the_model_is_refused() -> None:
    with pytest.raises(PlanError, match=r"power_cap_w.*700 W"):
        gpu_clocks(H100, "power_capped", power_cap_w=550, power_limit=RACK_CAP)  # computed for 700 W
    low = PowerLimit(150, "rack_budget", "too low", 700, 150)
    with pytest.raises(PlanError, match=r"power_cap_w.*>= 200"):
        gpu_clocks(H100, "max_performance", power_limit=low)


def test_a_site_cap_without_a_decision_names_its_field() -> None:
    c = gpu_clocks(H100, "power_capped", power_cap_w=550)
    assert c["power_limit_source"] == "site_cap" and "gpucluster_gpu_policy.power_cap_w" in c["power_limit_reason"]
    assert not c["notes"]  # no clock lock, nothing to warn about


def test_a_site_cap_resets_to_the_most_the_rack_holds_not_the_default() -> None:
    site = PowerLimit(300, "site_cap", "gpucluster_gpu_policy.power_cap_w 300 W", 300, 362)
    c = gpu_clocks(H100, "power_capped", power_cap_w=300, power_limit=site)
    assert c["apply_args"] == ["-pm 1", "-pl 300"] and c["reset_args"] == ["-pl 362"]
