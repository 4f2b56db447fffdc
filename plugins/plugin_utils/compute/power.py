"""Node and rack power, the breaker plan, and the one decision of the GPU power limit.

node kW = GPUs x per-GPU power + the node's base load (CPUs, memory, NICs, fans).
A circuit carries V x A (single phase) or sqrt(3) x V(line-to-line) x A (three phase),
of which 80 % is usable for a continuous load (NEC 210.19/210.20: breakers for
continuous loads sized at 125 %, i.e. loaded to 80 %).

The power limit every GPU gets (``nvidia-smi -pl``, the DCGM policy, the power alert, the
circuit plan, the rack kW and the coolant heat load) is decided here, once, by
:func:`decide_power_limit`: the limit the GPU policy asks for (the model default or the
site's ``gpucluster_gpu_policy.power_cap_w``) unless the fullest rack cannot hold it, in
which case the largest whole-watt limit that fits the rack (or PDU) budget. A site cap
above that limit, or a budget that does not even hold the model's minimum, is a PlanError.
The same decision gives the limit a stop of the clocks unit restores (``reset_power_limit_w``):
the model default, or the largest limit the rack holds when that is lower.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
)

CONTINUOUS_LOAD_FACTOR = 0.8  # NEC 80 % rule for continuous loads

#: Which constraint set the applied GPU power limit (plan gpu.clocks.power_limit_source).
LIMIT_SOURCES = ("model_default", "site_cap", "rack_budget")
#: Where the limit the policy asks for comes from, before the rack budget.
REQUESTED_SOURCES = ("model_default", "site_cap")

CAP_FIELD = "gpucluster_gpu_policy.power_cap_w"


@dataclass(frozen=True)
class PowerLimit:
    """The per-GPU power limit every consumer applies, and the constraint that set it."""

    power_limit_w: int  # applied: nvidia-smi -pl, DCGM -P, the power alert, node/rack kW
    power_limit_source: str  # one of LIMIT_SOURCES
    power_limit_reason: str  # one sentence naming the inventory field(s) and the numbers
    power_limit_w_uncapped: int  # what the GPU policy asked for, before the rack budget
    # what the clocks unit restores when it stops (nvidia-smi -pl at ExecStop): the model default, or the
    # largest limit the rack holds when that is lower, so that stopping the unit never overloads the rack;
    # None when the model default is unknown (no -pl at stop)
    reset_power_limit_w: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PowerLimit:
        """The decision back from a plan's ``power`` section (plain data)."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


def circuit_kw(breaker_amps: float, voltage_v: float, phases: int) -> float:
    """Usable kW of one circuit after the continuous-load derating."""
    raw = voltage_v * breaker_amps * (math.sqrt(3) if phases == 3 else 1.0) / 1000.0
    return raw * CONTINUOUS_LOAD_FACTOR


def node_kw(gpus_per_node: int, gpu_power_w: float, base_power_w: float) -> float:
    """One node's draw: its GPUs at ``gpu_power_w`` each plus the base load."""
    return (gpus_per_node * gpu_power_w + base_power_w) / 1000.0


def largest_fitting_limit_w(*, per_rack: int, gpus_per_node: int, base_power_w: float, limit_kw: float) -> int:
    """The largest whole-watt per-GPU limit with per_rack x (GPUs x limit + base) <= the rack's kW."""
    # round the quotient to 1e-6 W first so that float noise (e.g. 361.99999999) does not lose a watt
    return math.floor(round((limit_kw * 1000.0 / per_rack - base_power_w) / gpus_per_node, 6))


def decide_power_limit(
    *,
    requested_w: float,
    requested_source: str,
    default_w: float | None,
    per_rack: int,
    gpus_per_node: int,
    base_power_w: float,
    gpu_min_w: float | None,
    gpu_max_w: float | None,
    budget_kw: float,
    pdu_kw: float,
    field: str = "gpucluster_facility",
) -> PowerLimit:
    """The applied per-GPU power limit: the requested one if the fullest rack holds it, else the rack's cap.

    ``requested_w`` is what the GPU policy asks for (``requested_source``: the model default or the
    site's cap); ``default_w`` is the model's default limit (what a reset restores). PlanError when the
    budget cannot hold even the model's minimum, or when the site's own cap is above the largest limit
    that fits.
    """
    check_choice(requested_source, "gpu_power_source", REQUESTED_SOURCES)
    requested = int(requested_w)
    limit_kw = min(budget_kw, pdu_kw)
    # the binding facility field: the PDU when it is below the rack budget
    budget_field = f"{field}.rack_power_budget_kw" if budget_kw <= pdu_kw else f"{field}.pdu_rating_kw"
    rack_kw = per_rack * node_kw(gpus_per_node, requested, base_power_w)
    largest = largest_fitting_limit_w(
        per_rack=per_rack, gpus_per_node=gpus_per_node, base_power_w=base_power_w, limit_kw=limit_kw
    )
    reset = None if default_w is None else min(int(default_w), largest)
    what = "the model's default limit" if requested_source == "model_default" else f"{CAP_FIELD}"
    if rack_kw <= limit_kw + 1e-9:
        return PowerLimit(
            power_limit_w=requested,
            power_limit_source=requested_source,
            power_limit_reason=(
                f"{what} {requested} W per GPU: {per_rack} nodes per rack draw {rack_kw:.1f} kW, "
                f"within {budget_field} ({limit_kw:g} kW)"
            ),
            power_limit_w_uncapped=requested,
            reset_power_limit_w=reset,
        )
    cap = largest
    if gpu_max_w is not None:
        cap = min(cap, int(gpu_max_w))
    if gpu_min_w is None:  # the cap may not go below a minimum nobody knows: the site reads it from the hardware
        raise PlanError(
            "gpucluster_node.gpu_limits.power_min_w",
            None,
            f"the GPU's minimum power limit (nvidia-smi --query-gpu=power.min_limit): {budget_field} "
            f"({limit_kw:g} kW) holds {per_rack} nodes per rack only with every GPU capped at {cap} W, and the "
            "catalog has no sourced minimum to check that cap against; or add racks or power",
        )
    if cap < gpu_min_w:
        floor_kw = per_rack * node_kw(gpus_per_node, gpu_min_w or 0, base_power_w)
        raise PlanError(
            f"{field}.rack_power_budget_kw",
            budget_kw,
            f"at least {floor_kw:.1f} kW for {per_rack} nodes per rack even with every GPU at its minimum "
            f"power limit ({gpu_min_w} W); add racks (gpucluster_facility.racks) or power",
        )
    if requested_source == "site_cap":
        raise PlanError(
            CAP_FIELD,
            requested,
            f"at most {cap} W: {field}.rack_power_budget_kw ({budget_kw:g} kW"
            + ("" if budget_kw <= pdu_kw else f", {field}.pdu_rating_kw {pdu_kw:g} kW")
            + f") holds {per_rack} nodes per rack only with every GPU at or below {cap} W "
            f"({requested} W would draw {rack_kw:.1f} kW); lower {CAP_FIELD}, unset it to let the budget "
            f"cap the GPUs, or add racks/power",
        )
    return PowerLimit(
        power_limit_w=cap,
        power_limit_source="rack_budget",
        power_limit_reason=(
            f"{budget_field} ({limit_kw:g} kW) holds {per_rack} nodes per rack only with every GPU capped at "
            f"{cap} W ({per_rack * node_kw(gpus_per_node, cap, base_power_w):.2f} kW); "
            f"{what} {requested} W would draw {rack_kw:.1f} kW"
        ),
        power_limit_w_uncapped=requested,
        reset_power_limit_w=None if reset is None else min(reset, cap),
    )


def power_budget(**kwargs: Any) -> dict[str, Any]:
    """The plan's power section (:func:`power_plan`'s first half): the filter power_budget returns it."""
    return power_plan(**kwargs)[0]  # pylint: disable=missing-kwoa  # power_plan's keywords, passed through


def power_plan(
    *,
    nodes: int,
    gpus_per_node: int,
    gpu_power_w: float,
    gpu_min_w: float | None,
    gpu_max_w: float | None,
    base_power_w: float,
    racks: int,
    rack_budget_kw: float,
    pdu_rating_kw: float | None = None,
    breaker_amps: float,
    circuit_voltage_v: float,
    circuit_phases: int,
    gpu_power_source: str = "model_default",
    gpu_default_w: float | None = None,
    field: str = "gpucluster_facility",
) -> tuple[dict[str, Any], PowerLimit]:
    """Power per node and rack at the APPLIED GPU limit, the limit's decision, and the breaker plan;
    with the decision itself (:class:`PowerLimit`), which the GPU clocks apply (assembly.py).

    ``gpu_power_w`` is the limit the GPU policy asks for; ``gpu_power_source`` says whether it is the
    model default (the rack budget may lower it) or the site's own ``power_cap_w`` (it may not: a cap
    that does not fit is a PlanError). Every kW figure (node, rack, total, circuits) is at the applied
    limit; the ``*_uncapped`` keys hold the same figures at the requested limit. ``gpu_default_w``: the
    model's default limit (default: ``gpu_power_w`` when that is the model default).
    """
    nodes = check_range(nodes, "groups.compute", 1, None, integer=True)
    racks = check_range(racks, f"{field}.racks", 1, nodes, integer=True)
    budget = check_range(rack_budget_kw, f"{field}.rack_power_budget_kw", 0.1, 2000, unit=" kW")
    pdu = check_range(pdu_rating_kw if pdu_rating_kw is not None else budget, f"{field}.pdu_rating_kw", 0.1, 2000)
    amps = check_range(breaker_amps, f"{field}.breaker_amps", 1, 1000, unit=" A")
    volts = check_range(circuit_voltage_v, f"{field}.circuit_voltage_v", 100, 1000, unit=" V")
    if circuit_phases not in (1, 3):
        raise PlanError(f"{field}.circuit_phases", circuit_phases, "1 or 3")
    per_rack = math.ceil(nodes / racks)
    default_w = gpu_default_w
    if default_w is None and gpu_power_source == "model_default":
        default_w = gpu_power_w
    limit = decide_power_limit(
        requested_w=gpu_power_w,
        requested_source=gpu_power_source,
        default_w=default_w,
        per_rack=per_rack,
        gpus_per_node=gpus_per_node,
        base_power_w=base_power_w,
        gpu_min_w=gpu_min_w,
        gpu_max_w=gpu_max_w,
        budget_kw=budget,
        pdu_kw=pdu,
        field=field,
    )
    capped = limit.power_limit_source == "rack_budget"
    applied_w, uncapped_w = limit.power_limit_w, limit.power_limit_w_uncapped

    def figures(gpu_w: float, suffix: str) -> dict[str, float]:
        gpu_kw_node = gpus_per_node * gpu_w / 1000.0
        one = node_kw(gpus_per_node, gpu_w, base_power_w)
        return {
            f"gpu_load_kw_per_node{suffix}": round(gpu_kw_node, 4),
            f"node_kw{suffix}": round(one, 4),
            f"gpu_load_kw_total{suffix}": round(gpu_kw_node * nodes, 4),
            f"total_kw{suffix}": round(one * nodes, 4),
            f"rack_kw{suffix}": round(per_rack * one, 4),
        }

    applied = figures(applied_w, "")
    uncapped = figures(uncapped_w, "_uncapped")
    notes = []
    if capped:
        notes.append(
            f"{per_rack} nodes at {uncapped['node_kw_uncapped']:.2f} kW = {uncapped['rack_kw_uncapped']:.1f} kW "
            f"exceed the rack's {min(budget, pdu):g} kW: every GPU is capped at {applied_w} W "
            f"({applied['rack_kw']:.2f} kW per rack)"
        )
    one_node = applied["node_kw"]
    circuit = circuit_kw(amps, volts, circuit_phases)
    per_circuit = math.floor(circuit / one_node) if one_node > 0 else 0
    if not per_circuit:
        notes.append(f"one node ({one_node:.1f} kW) needs more than one {circuit:.1f} kW circuit")
    section = {
        **limit.as_dict(),
        **applied,
        **uncapped,
        "nodes_per_rack": per_rack,
        "rack_budget_kw": min(budget, pdu),
        # fits: the rack holds the GPUs at the limit the policy asks for; capped: the budget lowered it
        "fits": not capped,
        "capped": capped,
        "per_gpu_cap_w_to_fit": applied_w if capped else None,
        # the applied figures under their former names (the diagram's "fitted" line)
        "node_kw_fitted": applied["node_kw"],
        "rack_kw_fitted": applied["rack_kw"],
        "circuit_kw": round(circuit, 3),
        "nodes_per_circuit": per_circuit,
        "circuits_per_rack": math.ceil(per_rack / per_circuit) if per_circuit else None,
        "notes": notes,
    }
    return section, limit
