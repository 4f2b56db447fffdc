"""The ``gpu`` dashboard: utilisation, power, temperature, clocks, framebuffer, throttling and XIDs
from dcgm-exporter, only the counters the plan enables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.panels import (
    HOST,
    RATE_WINDOW,
    Panel,
    Query,
    Step,
    metric_names,
    threshold_steps,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rules_gpu import (
    CLOCKS_EVENT,
    EVENT_HW_POWER_BRAKE,
    EVENT_HW_SLOWDOWN,
    EVENT_SW_POWER_CAP,
    EVENT_SW_THERMAL,
    THERMAL_VIOLATION,
    bit_test,
)


def gpu_panels(plan: Mapping[str, Any], counters: set[str]) -> list[Panel]:
    sel = "{" + HOST + "}"
    gpu = "{{host}} GPU {{gpu}}"
    ok = Step(None, "green")
    events = f"{CLOCKS_EVENT}{sel}"
    candidates = [
        Panel("GPU utilisation", [Query(f"DCGM_FI_DEV_GPU_UTIL{sel}", gpu)], "percent"),
        Panel(
            "GPU power draw",
            [Query(f"DCGM_FI_DEV_POWER_USAGE{sel}", gpu)],
            "watt",
            [ok, *threshold_steps(plan, ("GpuPowerAboveCap", "red"))],
            "Red line: the GPU power limit the plan sets (gpu.clocks.power_limit_w); GpuPowerAboveCap fires above it.",
        ),
        Panel(
            "GPU temperature",
            [Query(f"DCGM_FI_DEV_GPU_TEMP{sel}", gpu)],
            "celsius",
            [ok, *threshold_steps(plan, ("GpuTemperatureWarning", "orange"), ("GpuTemperatureCritical", "red"))],
            "Lines: the warning and critical temperatures of the alerts (gpu.temperature.warn_c, critical_c).",
        ),
        Panel(
            "SM clock (MHz)",
            [Query(f"DCGM_FI_DEV_SM_CLOCK{sel}", gpu)],
            "none",
            description="The locked clock range is plan.gpu.clocks (nvidia-smi -lgc).",
        ),
        Panel("Memory clock (MHz)", [Query(f"DCGM_FI_DEV_MEM_CLOCK{sel}", gpu)], "none"),
        Panel("Framebuffer used", [Query(f"DCGM_FI_DEV_FB_USED{sel}", gpu)], "mbytes"),
        Panel(
            "Throttling (clock-event reasons)",
            [
                Query(f"clamp_max({bit_test(events, EVENT_SW_THERMAL, 2)}, 1)", f"{gpu} thermal"),
                Query(
                    f"clamp_max({bit_test(events, EVENT_HW_SLOWDOWN)} + {bit_test(events, EVENT_HW_POWER_BRAKE)}, 1)",
                    f"{gpu} HW slowdown/power brake",
                ),
                Query(bit_test(events, EVENT_SW_POWER_CAP), f"{gpu} power cap"),
            ],
            "none",
            description="1 while the reason holds (DCGM_FI_DEV_CLOCKS_EVENT_REASONS, NVML clocks-event bits): "
            "thermal = SW/HW thermal slowdown 0x20/0x40 (GpuThermalThrottling), HW slowdown 0x8 or power brake "
            "0x80 (GpuHwSlowdown), power cap 0x4: normal for a loaded GPU at the planned power limit.",
        ),
        Panel(
            "Throttle time (violation counters)",
            [
                Query(f"rate({THERMAL_VIOLATION}{sel}[{RATE_WINDOW}])", f"{gpu} thermal"),
                Query(f"rate(DCGM_FI_DEV_POWER_VIOLATION{sel}[{RATE_WINDOW}])", f"{gpu} power"),
            ],
            "short",
            description="Growth of the time the GPU was held below its application clocks by thermal or power "
            "limits (DCGM_FI_DEV_THERMAL_VIOLATION/POWER_VIOLATION). Any thermal growth for 5 minutes fires "
            "GpuThermalThrottling; power growth at the planned power cap is expected. DCGM documents the unit "
            "as microseconds, dcgm-exporter as nanoseconds: read the shape, not the scale.",
        ),
        Panel(
            "Last XID error",
            [Query(f"DCGM_FI_DEV_XID_ERRORS{sel}", gpu)],
            "none",
            [ok, Step(1, "red", "any XID (GpuXidError)")],
        ),
    ]
    return [p for p in candidates if all(metric_names(q.expr) <= counters for q in p.queries)]
