"""The ``cooling`` dashboard: the DLC loop's supply, return, flow and ΔT with the coolant alerts'
thresholds (a text panel on air-cooled sites)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.panels import (
    Panel,
    Query,
    Step,
    threshold_steps,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import FLOW, RETURN, SUPPLY


def cooling_panels(plan: Mapping[str, Any]) -> list[Panel]:
    if plan["cooling"]["cooling"] != "dlc":
        return [
            Panel(
                "Coolant loop",
                text=f"Cooling is {plan['cooling']['cooling']}: the plan has no coolant loop and no coolant alerts.",
            )
        ]
    loop = "{{loop}}"
    return [
        Panel(
            "Coolant supply temperature",
            [Query(SUPPLY, loop)],
            "celsius",
            [
                Step(None, "green"),
                *threshold_steps(plan, ("CoolantSupplyWarning", "orange"), ("CoolantSupplyHigh", "red")),
            ],
        ),
        Panel(
            "Coolant return temperature",
            [Query(RETURN, loop)],
            "celsius",
            [
                Step(None, "green"),
                *threshold_steps(plan, ("CoolantReturnWarning", "orange"), ("CoolantReturnHigh", "red")),
            ],
        ),
        Panel(
            "Coolant flow (L/min)",
            [Query(FLOW, loop)],
            "none",
            [
                Step(None, "red"),
                *threshold_steps(plan, ("CoolantFlowCritical", "orange"), ("CoolantFlowLow", "green")),
            ],
            "The alerts fire at or below these values (CoolantFlowLow, CoolantFlowCritical).",
        ),
        Panel(
            "Coolant ΔT (return − supply)",
            [Query(f"{RETURN} - on(loop) {SUPPLY}", loop)],
            "none",
            [Step(None, "green"), *threshold_steps(plan, ("CoolantDeltaTHigh", "orange"))],
            "Kelvin; CoolantDeltaTHigh fires at or above the line (cooling.delta_t_high_k).",
        ),
    ]
