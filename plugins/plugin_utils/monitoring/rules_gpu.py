"""The GPU alerts (dcgm-exporter): temperature, power cap, XID, double-bit ECC, NVLink CRC errors,
thermal throttling and HW slowdown, and the exporters' own ``up`` (NodeDown, GpuExporterDown)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import AlertCase, Labels
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import (
    NVLINK_WINDOW,
    RuleBook,
    num,
)

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import GpuSection


def gpu_rules(r: RuleBook, section: GpuSection, gpu: Labels) -> None:
    """Temperature (when the model has a warning point), the power cap, XID, double-bit ECC and, on NVLink
    models, NVLink CRC errors, for the GPU ``gpu`` (the labels of its test series)."""
    temp = section["temperature"]
    where = "GPU {gpu} on {host}"
    if temp.get("warn_c") is not None:
        r.threshold(
            "gpu",
            "GpuTemperatureWarning",
            metric="DCGM_FI_DEV_GPU_TEMP",
            op=">=",
            value=temp["warn_c"],
            plan_key="gpu.temperature.warn_c",
            step=1,
            for_="2m",
            severity="warning",
            labels=gpu,
            summary=f"{where} at {{value:.0f}} C (warning from {temp['warn_c']} C)",
        )
        r.threshold(
            "gpu",
            "GpuTemperatureCritical",
            metric="DCGM_FI_DEV_GPU_TEMP",
            op=">=",
            value=temp["critical_c"],
            plan_key="gpu.temperature.critical_c",
            step=1,
            for_="1m",
            severity="critical",
            labels=gpu,
            summary=f"{where} at {{value:.0f}} C, at or above its max operating {temp['critical_c']} C: drain the node",
        )
    cap = section["clocks"]["power_limit_w"]
    r.threshold(
        "gpu",
        "GpuPowerAboveCap",
        metric="DCGM_FI_DEV_POWER_USAGE",
        op=">",
        value=cap,
        plan_key="gpu.clocks.power_limit_w",
        step=1,
        for_="5m",
        severity="warning",
        labels=gpu,
        summary=f"{where} draws {{value:.0f}} W, above its {num(cap)} W limit: the power limit is not applied",
    )

    def flag(name: str, metric: str, fire: float, quiet: float, severity: str, summary: str) -> None:
        cases: list[AlertCase] = [
            {"state": s, "value": v, "series": [(metric, gpu, num(v))], "labels": gpu}
            for s, v in (("fire", fire), ("quiet", quiet))
        ]
        r.add("gpu", name, f"{metric} > 0", "0m", severity, summary, cases)

    # XID_ERRORS is a gauge holding the last XID (docs/sources.md §5.4): any non-zero value is an XID
    flag("GpuXidError", "DCGM_FI_DEV_XID_ERRORS", 79, 0, "critical", f"{where} reported XID {{value:.0f}}")
    flag(
        "GpuDoubleBitEcc",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        1,
        0,
        "critical",
        f"{where} has {{value:.0f}} double-bit ECC errors: drain the node and reset the GPU",
    )
    if section["model"].get("nvlink_gen") is None:
        return  # no NVLink (a PCIe-only node): dcgm.py exports no NVLink counter, so no NVLink alert
    # NVLink CRC counters only grow: alert on new errors, not on the total since boot
    metric = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    r.add(
        "gpu",
        "GpuNvlinkErrors",
        f"increase({metric}[{NVLINK_WINDOW}]) > 0",
        "0m",
        "warning",
        f"{where} counted NVLink CRC errors in the last {NVLINK_WINDOW}",
        [
            {"state": "fire", "value": None, "series": [(metric, gpu, "3x5 4x10")], "labels": gpu, "start": 6},
            {"state": "quiet", "value": None, "series": [(metric, gpu, "3x15")], "labels": gpu},
        ],
    )


#: DCGM_FI_DEV_CLOCKS_EVENT_REASONS (dcgm.py): NVML's nvmlClocksEventReasons bits (nvml.h;
#: DCGM dcgm_fields.h DCGM_CLOCKS_THROTTLE_REASON_*, "a 1:1 map to the NVML reasons")
CLOCKS_EVENT = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
EVENT_SW_POWER_CAP = 0x4  # the power cap: normal for a loaded GPU at the planned -pl, never alerted
EVENT_HW_SLOWDOWN = 0x8
EVENT_SW_THERMAL = 0x20
EVENT_HW_THERMAL = 0x40
EVENT_HW_POWER_BRAKE = 0x80
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
#: how long a throttle must last to alert: the exporter samples every 30 s (docs/sources.md §5.4), and
#: HW slowdown "may be also reported during PState or clock change" (dcgm_fields.h): minutes, not a sample
THROTTLE_FOR = "5m"
THROTTLE_WINDOW = "5m"


def bit_test(metric: str, mask: int, width: int = 1) -> str:
    """PromQL has no bitwise AND (https://prometheus.io/docs/prometheus/latest/querying/operators/):
    ``floor(x / mask) % 2^width`` is non-zero exactly when one of the ``width`` bits from ``mask`` up is
    set. The metric is an integer below 2^53 (NVML's bits end at 0x100), exact as a float64; DCGM's
    blank values (>= 0x7ffffffffffffff0, no reading) round to 2^63, whose low bits are all zero."""
    return f"floor({metric} / {mask}) % {2**width}"


def throttle_rules(r: RuleBook, gpu: Labels) -> None:
    """Sustained thermal throttling and HW slowdown (clock-event reasons and the thermal violation
    counter; the power violation counter and the SW power cap bit only on the dashboard: a loaded GPU
    at its planned power cap sits there by design, GpuPowerAboveCap watches the cap itself)."""
    where = "GPU {gpu} on {host}"
    thermal = bit_test(CLOCKS_EVENT, EVENT_SW_THERMAL, 2)  # 0x20 and 0x40 are adjacent bits
    r.add(
        "gpu_throttle",
        "GpuThermalThrottling",
        f"{thermal} > 0 or rate({THERMAL_VIOLATION}[{THROTTLE_WINDOW}]) > 0",
        THROTTLE_FOR,
        "warning",
        f"{where} is thermally throttled (SW/HW thermal slowdown) for {THROTTLE_FOR}",
        [
            # HW thermal (0x40) with the power cap (0x4) set too; the violation counter still flat
            {
                "state": "fire",
                "value": None,
                "series": [
                    (CLOCKS_EVENT, gpu, num(EVENT_HW_THERMAL | EVENT_SW_POWER_CAP)),
                    (THERMAL_VIOLATION, gpu, "0"),
                ],
                "labels": gpu,
            },
            # power cap, HW slowdown, power brake, idle: no thermal bit, and no thermal violation time
            {
                "state": "quiet",
                "value": None,
                "series": [
                    (
                        CLOCKS_EVENT,
                        gpu,
                        num(0x1 | EVENT_SW_POWER_CAP | EVENT_HW_SLOWDOWN | EVENT_HW_POWER_BRAKE | 0x10),
                    ),
                    (THERMAL_VIOLATION, gpu, "5000"),
                ],
                "labels": gpu,
            },
        ],
    )
    slowdown = f"{bit_test(CLOCKS_EVENT, EVENT_HW_SLOWDOWN)} + {bit_test(CLOCKS_EVENT, EVENT_HW_POWER_BRAKE)}"
    r.add(
        "gpu_throttle",
        "GpuHwSlowdown",
        f"{slowdown} > 0",
        THROTTLE_FOR,
        "warning",
        f"{where} is in HW slowdown or power brake for {THROTTLE_FOR}: clocks halved",
        [
            {
                "state": "fire",
                "value": None,
                "series": [(CLOCKS_EVENT, gpu, num(EVENT_HW_POWER_BRAKE))],
                "labels": gpu,
            },
            # SW power cap and SW/HW thermal (GpuThermalThrottling's) and display clocks (0x100): not this alert
            {
                "state": "quiet",
                "value": None,
                "series": [(CLOCKS_EVENT, gpu, num(EVENT_SW_POWER_CAP | EVENT_SW_THERMAL | EVENT_HW_THERMAL | 0x100))],
                "labels": gpu,
            },
        ],
    )


def up_rule(r: RuleBook, name: str, job: str, severity: str, labels: Labels, summary: str) -> None:
    lab = {"job": job, **labels}
    cases: list[AlertCase] = [
        {"state": s, "value": v, "series": [("up", lab, num(v))], "labels": lab} for s, v in (("fire", 0), ("quiet", 1))
    ]
    r.add("node", name, f'up{{job="{job}"}} == 0', "2m" if job == "node" else "5m", severity, summary, cases)
