"""The site's readings of GPU limits the catalog has no source for (inventory/gpu_limits.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.clocks import gpu_clocks
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import gpu_model
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.gpu_limits import apply_gpu_limits

RTX = gpu_model("rtx_pro_6000")


def test_no_limits_is_the_catalog_entry() -> None:
    assert apply_gpu_limits(RTX, None) is RTX
    assert apply_gpu_limits(RTX, {}) is RTX


def test_unknowns_are_filled_and_marked_as_the_sites() -> None:
    gpu = apply_gpu_limits(RTX, {"max_sm_mhz": 2400, "power_min_w": 300})
    assert (gpu.max_sm_mhz, gpu.power_min_w, gpu.power_max_w) == (2400, 300, 600)
    assert "unconfirmed" in gpu.sources["site"] and "max_sm_mhz" in gpu.sources["site"]
    c = gpu_clocks(gpu, "max_performance")
    assert c["lock_gpu_clocks"] == [2400, 2400]
    assert c["lock_memory_clocks"] is None  # catalog: no -lmc on this card
    assert gpu_clocks(gpu, "power_capped", power_cap_w=300)["power_limit_w"] == 300


@pytest.mark.parametrize(
    ("limits", "field", "fragment"),
    [
        ({"max_sm_mhz": 2000}, "gpucluster_node.gpu_limits.max_sm_mhz", "unset: the catalog has 1980 MHz"),
        ({"max_sm": 2000}, "gpucluster_node.gpu_limits.max_sm", "one of max_sm_mhz"),
        ({"power_min_w": "300"}, "gpucluster_node.gpu_limits.power_min_w", "an integer"),
        ({"power_min_w": 9000}, "gpucluster_node.gpu_limits.power_min_w", "<= 5000 W"),
        ([300], "gpucluster_node.gpu_limits", "a mapping"),
    ],
)
def test_bad_limits_name_the_key(limits: object, field: str, fragment: str) -> None:
    with pytest.raises(PlanError) as caught:
        apply_gpu_limits(gpu_model("h100_sxm") if "max_sm_mhz" in str(limits) else RTX, limits)
    assert caught.value.field == field
    assert fragment in str(caught.value)


def test_minimum_above_the_default_is_refused() -> None:
    with pytest.raises(PlanError, match="power_min_w <= power_default_w") as caught:
        apply_gpu_limits(RTX, {"power_min_w": 700})
    assert caught.value.field == "gpucluster_node.gpu_limits.power_min_w"
