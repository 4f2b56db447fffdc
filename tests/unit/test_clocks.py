"""GPU clocks and power limits: never outside the model's limits (dossier 1.1, 1.3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils.catalog import GPUS, gpu_model
from ansible_collections.gpucluster.tiers.plugins.module_utils.clocks import check_against_hardware, gpu_clocks
from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError

H100 = gpu_model("h100_sxm")
KNOWN = [m for m in GPUS.values() if None not in (m.max_sm_mhz, m.power_min_w, m.power_max_w, m.power_default_w)]


def test_max_performance_locks_at_1980_not_2505() -> None:
    """tiers.md correction: the articles' -lgc 2505 is wrong; H100 SXM clocks.max.sm is 1980 MHz."""
    c = gpu_clocks(H100, "max_performance")
    assert c["lock_gpu_clocks"] == [1980, 1980]
    assert c["lock_memory_clocks"] == [2619, 2619]
    assert c["power_limit_w"] == 700
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
    with pytest.raises(PlanError, match="read it from the hardware"):
        gpu_clocks(gpu_model("rtx_pro_6000"), "max_performance")
    with pytest.raises(PlanError, match="read it from the hardware"):
        gpu_clocks(gpu_model("b200"), "power_capped", power_cap_w=800)


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
