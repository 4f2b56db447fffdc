"""The DLC loop's alerts (the site's BMC/CDU exporter): supply, return, flow, ΔT and absent telemetry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import AlertCase, Labels
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import (
    COOLANT_METRICS,
    FLOW,
    RETURN,
    SUPPLY,
    RuleBook,
    num,
)

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import CoolingSection


def cooling_limit(cool: Mapping[str, object], key: str) -> float:
    """One of the cooling section's DLC thresholds by name (compute/cooling.py dlc_thresholds), as written."""
    value = cool[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"plan.cooling.{key}: a number, not {value!r}")
    return value


def cooling_rules(r: RuleBook, cool: CoolingSection, loop: Labels) -> None:
    """The coolant thresholds of the plan's cooling section, ΔT and absent telemetry for the loop ``loop``."""
    at = "coolant {what} of loop {loop} at {value:.1f} "
    for name, metric, key, op, for_, severity, what, unit, limit in (
        ("CoolantSupplyWarning", SUPPLY, "supply_warn_c", ">=", "2m", "warning", "supply", "C", "warning from"),
        (
            "CoolantSupplyHigh",
            SUPPLY,
            "supply_max_c",
            ">",
            "1m",
            "critical",
            "supply",
            "C",
            f"above the {cool['ashrae_class']} maximum",
        ),
        ("CoolantReturnWarning", RETURN, "return_warn_c", ">=", "2m", "warning", "return", "C", "warning from"),
        ("CoolantReturnHigh", RETURN, "return_max_c", ">", "1m", "critical", "return", "C", "above the maximum"),
        ("CoolantFlowLow", FLOW, "flow_low_lpm", "<=", "2m", "warning", "flow", "L/min", "low from"),
        ("CoolantFlowCritical", FLOW, "flow_critical_lpm", "<=", "1m", "critical", "flow", "L/min", "critical from"),
    ):
        r.threshold(
            "cooling",
            name,
            metric=metric,
            op=op,
            value=cooling_limit(cool, key),
            plan_key=f"cooling.{key}",
            step=0.1,
            for_=for_,
            severity=severity,
            labels=loop,
            summary=at.replace("{what}", what) + f"{unit} ({limit} {num(cooling_limit(cool, key))} {unit})",
        )

    # dT: return - supply of the same loop; the supply sample is chosen so the difference is exact
    rise = cool["delta_t_high_k"]
    fire, quiet = rise, round(rise - 0.1, 6)
    base = next(
        s for s in (float(cool["supply_warn_c"] - 10), 20.0, 16.0, 0.0) if all((s + v) - s == v for v in (fire, quiet))
    )

    def dt_case(state: str, v: float) -> AlertCase:
        return {
            "state": state,
            "value": v,
            "labels": {"loop": loop["loop"]},
            "series": [(SUPPLY, loop, num(base)), (RETURN, loop, num(base + v))],
        }

    r.add(
        "cooling",
        "CoolantDeltaTHigh",
        f"{RETURN} - on(loop) {SUPPLY} >= {num(rise)}",
        "5m",
        "warning",
        f"coolant of loop {{loop}} rises {{value:.1f}} K (warning from {num(rise)} K, design "
        f"{num(cool['design_delta_t_k'])} K): flow too low for the heat load",
        [dt_case("fire", fire), dt_case("quiet", quiet)],
        {"plan": "cooling.delta_t_high_k", "op": ">=", "value": rise, "fire": fire, "quiet": quiet},
    )

    # without the coolant series every rule above stays silent: say so
    present = [(m, loop, "20x15") for m in COOLANT_METRICS]
    r.add(
        "cooling",
        "CoolantTelemetryAbsent",
        " or ".join(f"absent({m})" for m in COOLANT_METRICS),
        "5m",
        "warning",
        "no coolant telemetry: the BMC/CDU exporter must publish "
        + ", ".join(COOLANT_METRICS)
        + " (docs/monitoring.md)",
        [
            {"state": "fire", "value": 1, "series": present[:2], "labels": {}},
            {"state": "quiet", "value": None, "series": present, "labels": {}},
        ],
    )
