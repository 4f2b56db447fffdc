"""The site's own reading of GPU limits the catalog has no source for.

catalog.yml leaves a number null where the sources found none (the RTX PRO 6000's maximum SM clock,
the B200's minimum power limit). The engine never guesses one: a plan that needs it stops with a
PlanError naming ``gpucluster_node.gpu_limits.<key>``, and the site fills it from its own hardware
(``nvidia-smi --query-gpu=<query>``; gpu_facts reads the same values at run time and checks the plan
against them). Only unknowns can be filled: a value the catalog has from a source stays (the hardware
check at run time still compares it), so a typo cannot lift a clock or power limit over the model's.
"""

from __future__ import annotations

import dataclasses

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range

FIELD = "gpucluster_node.gpu_limits"
#: key -> (nvidia-smi --query-gpu field, low, high, unit); the bounds only catch typos and unit mix-ups
LIMITS: dict[str, tuple[str, int, int, str]] = {
    "max_sm_mhz": ("clocks.max.sm", 100, 5000, " MHz"),
    "max_mem_mhz": ("clocks.max.mem", 100, 40000, " MHz"),
    "power_min_w": ("power.min_limit", 1, 5000, " W"),
    "power_default_w": ("power.default_limit", 1, 5000, " W"),
    "power_max_w": ("power.max_limit", 1, 5000, " W"),
}


def query(key: str) -> str:
    """The nvidia-smi query that reads ``key`` on the hardware."""
    return f"nvidia-smi --query-gpu={LIMITS[key][0]} --format=csv"


def apply_gpu_limits(gpu: GpuModel, limits: object, field: str = FIELD) -> GpuModel:
    """``gpu`` with the site's values for its unknown limits; PlanError for an unknown key, a value out of
    range, a value the catalog already has, or a minimum above the maximum."""
    if limits is None:
        return gpu
    if not isinstance(limits, dict):
        raise PlanError(field, limits, "a mapping of " + ", ".join(LIMITS))
    values: dict[str, int] = {}
    for key, value in limits.items():
        if key not in LIMITS:
            raise PlanError(f"{field}.{key}", value, "one of " + ", ".join(LIMITS))
        _query, low, high, unit = LIMITS[key]
        known = getattr(gpu, key)
        if known is not None:
            raise PlanError(
                f"{field}.{key}",
                value,
                f"unset: the catalog has {known}{unit} for {gpu.key} from a source "
                f"({gpu.sources.get('clocks' if 'mhz' in key else 'power', 'catalog.yml')}); gpu_facts compares it "
                "with the hardware at run time",
            )
        values[key] = int(check_range(value, f"{field}.{key}", low, high, integer=True, unit=unit))
    merged = dataclasses.replace(
        gpu,
        max_sm_mhz=values.get("max_sm_mhz", gpu.max_sm_mhz),
        max_mem_mhz=values.get("max_mem_mhz", gpu.max_mem_mhz),
        power_min_w=values.get("power_min_w", gpu.power_min_w),
        power_default_w=values.get("power_default_w", gpu.power_default_w),
        power_max_w=values.get("power_max_w", gpu.power_max_w),
    )
    for low_key, high_key in (("power_min_w", "power_default_w"), ("power_default_w", "power_max_w")):
        low, high = getattr(merged, low_key), getattr(merged, high_key)
        if low is not None and high is not None and low > high:
            bad = low_key if low_key in values else high_key
            raise PlanError(
                f"{field}.{bad}", values[bad], f"{low_key} <= {high_key} ({low} W > {high} W for {gpu.key})"
            )
    if not values:
        return gpu
    note = f"inventory {field} ({', '.join(sorted(values))}): the site's reading, unconfirmed by the catalog"
    return dataclasses.replace(merged, sources={**gpu.sources, "site": note})
