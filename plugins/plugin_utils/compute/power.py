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

The node's own power supplies bound the limit too: a node with redundant PSUs must carry its planned
draw on the PSUs left after the redundant ones fail, ``(psu_count - redundant) x psu_rating_w >=
base_power_w + GPUs x limit``. The redundancy level is ``gpucluster_node.psu_redundancy``: ``N`` (no
spare), ``N+<k>`` (k PSUs may fail) or ``N+N`` (half of them: two feeds, one may drop); default ``N+1``
when the node has more than one PSU, else ``N`` (:func:`psu_redundant`). Where the surviving PSUs
cannot carry the requested limit, the limit is lowered to the largest whole watt they carry (source
``node_psu``), within the GPU's limits; below the GPU's minimum, or under a site cap, the plan refuses
with the numbers. A DGX H100 has six 3.3 kW PSUs in 4+2 redundancy and 10.2 kW maximum input
(docs/sources.md [S29]): N+1 and N+2 hold 8 x 700 W + 4.6 kW, N+N (3 x 3.3 kW = 9.9 kW) caps the
GPUs at 662 W.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import PowerLimitSection, PowerSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.psu import (
    NODE_FIELD,
    PSU_REDUNDANCY_FIELD,
    PsuBudget,
    largest_psu_limit_w,
    psu_budget,
    psu_redundant,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
)

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GpuModel
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site

CONTINUOUS_LOAD_FACTOR = 0.8  # NEC 80 % rule for continuous loads

#: Which constraint set the applied GPU power limit (plan gpu.clocks.power_limit_source): the policy's own
#: limit, or the rack budget or the node's surviving PSUs lowering it.
LIMIT_SOURCES = ("model_default", "site_cap", "rack_budget", "node_psu")
#: sources that lowered the requested limit
CAPPED_SOURCES = ("rack_budget", "node_psu")
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

    def as_dict(self) -> PowerLimitSection:
        return {
            "power_limit_w": self.power_limit_w,
            "power_limit_source": self.power_limit_source,
            "power_limit_reason": self.power_limit_reason,
            "power_limit_w_uncapped": self.power_limit_w_uncapped,
            "reset_power_limit_w": self.reset_power_limit_w,
        }

    @classmethod
    def from_dict(cls, data: PowerLimitSection) -> PowerLimit:
        """The decision back from a plan's ``power`` section (plain data)."""
        return cls(
            power_limit_w=data["power_limit_w"],
            power_limit_source=data["power_limit_source"],
            power_limit_reason=data["power_limit_reason"],
            power_limit_w_uncapped=data["power_limit_w_uncapped"],
            reset_power_limit_w=data["reset_power_limit_w"],
        )


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
    psu: PsuBudget | None = None,
) -> PowerLimit:
    """The applied per-GPU power limit: the requested one if the fullest rack and the node's surviving
    PSUs (``psu``, None: not checked) hold it, else the largest limit both hold.

    ``requested_w`` is what the GPU policy asks for (``requested_source``: the model default or the
    site's cap); ``default_w`` is the model's default limit (what a reset restores). PlanError when the
    budget or the surviving PSUs cannot hold even the model's minimum, or when the site's own cap is
    above the largest limit that fits.

    Longer than 80 lines on purpose: one decision whose branches are its refusals, each naming the binding
    inventory field with the figures computed here (rack and node draw, the largest limit each holds); split,
    every part would take a dozen of them.
    """
    check_choice(requested_source, "gpu_power_source", REQUESTED_SOURCES)
    requested = int(requested_w)
    limit_kw = min(budget_kw, pdu_kw)
    # the binding facility field: the PDU when it is below the rack budget
    budget_field = f"{field}.rack_power_budget_kw" if budget_kw <= pdu_kw else f"{field}.pdu_rating_kw"
    rack_kw = per_rack * node_kw(gpus_per_node, requested, base_power_w)
    node_w = node_kw(gpus_per_node, requested, base_power_w) * 1000.0
    largest = largest_fitting_limit_w(
        per_rack=per_rack, gpus_per_node=gpus_per_node, base_power_w=base_power_w, limit_kw=limit_kw
    )
    largest_psu = largest_psu_limit_w(psu, gpus_per_node, base_power_w) if psu else None
    held = min(largest, largest_psu) if largest_psu is not None else largest
    reset = None if default_w is None else min(int(default_w), held)
    what = "the model's default limit" if requested_source == "model_default" else f"{CAP_FIELD}"
    rack_holds = rack_kw <= limit_kw + 1e-9
    psu_holds = psu is None or node_w <= psu.surviving_w + 1e-6
    if rack_holds and psu_holds:
        psu_text = "" if psu is None else f"; one node ({node_w:g} W) within {psu.describe()}"
        return PowerLimit(
            power_limit_w=requested,
            power_limit_source=requested_source,
            power_limit_reason=(
                f"{what} {requested} W per GPU: {per_rack} nodes per rack draw {rack_kw:.1f} kW, "
                f"within {budget_field} ({limit_kw:g} kW){psu_text}"
            ),
            power_limit_w_uncapped=requested,
            reset_power_limit_w=reset,
        )
    by_psu = psu is not None and largest_psu is not None and largest_psu < largest
    cap = held
    if gpu_max_w is not None:
        cap = min(cap, int(gpu_max_w))
    if gpu_min_w is None:  # the cap may not go below a minimum nobody knows: the site reads it from the hardware
        binding = psu.describe() if by_psu and psu else f"{budget_field} ({limit_kw:g} kW)"
        raise PlanError(
            "gpucluster_node.gpu_limits.power_min_w",
            None,
            f"the GPU's minimum power limit (nvidia-smi --query-gpu=power.min_limit): {binding} "
            f"holds the node only with every GPU capped at {cap} W, and the "
            "catalog has no sourced minimum to check that cap against; or add racks, power or PSUs",
        )
    if by_psu and psu is not None and cap < gpu_min_w:
        need_w = base_power_w + gpus_per_node * gpu_min_w
        least = math.ceil(need_w / psu.rating_w) + psu.redundant
        raise PlanError(
            f"{NODE_FIELD}.psu_count",
            psu.count,
            f"PSUs that carry one node after {psu.redundant} fail ({psu.level}): >= {need_w:g} W even with every "
            f"GPU at its minimum power limit ({gpu_min_w:g} W) and base_power_w {base_power_w:g} W; "
            f"{psu.describe()}: at least {least} PSUs of {psu.rating_w:g} W, bigger PSUs, or a lower psu_redundancy",
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
        if by_psu and psu is not None:
            raise PlanError(
                CAP_FIELD,
                requested,
                f"at most {cap} W: {psu.describe()} carries one node only with every GPU at or below {cap} W "
                f"({requested} W would draw {node_w:g} W with base_power_w {base_power_w:g} W); lower "
                f"{CAP_FIELD}, unset it to let the PSUs cap the GPUs, or add PSUs",
            )
        raise PlanError(
            CAP_FIELD,
            requested,
            f"at most {cap} W: {field}.rack_power_budget_kw ({budget_kw:g} kW"
            + ("" if budget_kw <= pdu_kw else f", {field}.pdu_rating_kw {pdu_kw:g} kW")
            + f") holds {per_rack} nodes per rack only with every GPU at or below {cap} W "
            f"({requested} W would draw {rack_kw:.1f} kW); lower {CAP_FIELD}, unset it to let the budget "
            f"cap the GPUs, or add racks/power",
        )
    if by_psu and psu is not None:
        reason = (
            f"{psu.describe()} carries one node only with every GPU capped at {cap} W "
            f"({node_kw(gpus_per_node, cap, base_power_w) * 1000:g} W with base_power_w {base_power_w:g} W); "
            f"{what} {requested} W would draw {node_w:g} W"
        )
    else:
        reason = (
            f"{budget_field} ({limit_kw:g} kW) holds {per_rack} nodes per rack only with every GPU capped at "
            f"{cap} W ({per_rack * node_kw(gpus_per_node, cap, base_power_w):.2f} kW); "
            f"{what} {requested} W would draw {rack_kw:.1f} kW"
        )
    return PowerLimit(
        power_limit_w=cap,
        power_limit_source="node_psu" if by_psu else "rack_budget",
        power_limit_reason=reason,
        power_limit_w_uncapped=requested,
        reset_power_limit_w=None if reset is None else min(reset, cap),
    )


def power_budget(**kwargs: Any) -> PowerSection:
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
    rack_budget_kw: float | None,
    pdu_rating_kw: float | None = None,
    breaker_amps: float | None,
    circuit_voltage_v: float | None,
    circuit_phases: int,
    gpu_power_source: str = "model_default",
    gpu_default_w: float | None = None,
    field: str = "gpucluster_facility",
    psu_count: int | None = None,
    psu_rating_w: float | None = None,
    psu_redundancy: str | None = None,
) -> tuple[PowerSection, PowerLimit]:
    """Power per node and rack at the APPLIED GPU limit, the limit's decision, and the breaker plan;
    with the decision itself (:class:`PowerLimit`), which the GPU clocks apply (compute/gpu.py).

    ``gpu_power_w`` is the limit the GPU policy asks for; ``gpu_power_source`` says whether it is the
    model default (the rack budget may lower it) or the site's own ``power_cap_w`` (it may not: a cap
    that does not fit is a PlanError). Every kW figure (node, rack, total, circuits) is at the applied
    limit; the ``*_uncapped`` keys hold the same figures at the requested limit. ``gpu_default_w``: the
    model's default limit (default: ``gpu_power_w`` when that is the model default). ``psu_*``: the node's
    PSUs (``gpucluster_node``); the limit is also lowered to what they carry after the redundant ones fail.
    """
    nodes = int(check_range(nodes, "groups.compute", 1, None, integer=True))
    racks = int(check_range(racks, f"{field}.racks", 1, nodes, integer=True))
    budget = check_range(rack_budget_kw, f"{field}.rack_power_budget_kw", 0.1, 2000, unit=" kW")
    pdu = check_range(pdu_rating_kw if pdu_rating_kw is not None else budget, f"{field}.pdu_rating_kw", 0.1, 2000)
    amps = check_range(breaker_amps, f"{field}.breaker_amps", 1, 1000, unit=" A")
    volts = check_range(circuit_voltage_v, f"{field}.circuit_voltage_v", 100, 1000, unit=" V")
    if circuit_phases not in (1, 3):
        raise PlanError(f"{field}.circuit_phases", circuit_phases, "1 or 3")
    per_rack = math.ceil(nodes / racks)
    psu = psu_budget(psu_count, psu_rating_w, psu_redundancy)
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
        psu=psu,
    )
    return _section(
        limit,
        psu,
        nodes=nodes,
        per_rack=per_rack,
        gpus_per_node=gpus_per_node,
        base_power_w=base_power_w,
        budget_kw=min(budget, pdu),
        circuit=circuit_kw(amps, volts, circuit_phases),
    ), limit


@dataclass(frozen=True)
class _Figures:
    """The kW of one node, one rack and the cluster at one per-GPU limit."""

    gpu_load_kw_per_node: float
    node_kw: float
    gpu_load_kw_total: float
    total_kw: float
    rack_kw: float


def _figures(gpu_w: float, gpus_per_node: int, base_power_w: float, nodes: int, per_rack: int) -> _Figures:
    gpu_kw_node = gpus_per_node * gpu_w / 1000.0
    one = node_kw(gpus_per_node, gpu_w, base_power_w)
    return _Figures(
        gpu_load_kw_per_node=round(gpu_kw_node, 4),
        node_kw=round(one, 4),
        gpu_load_kw_total=round(gpu_kw_node * nodes, 4),
        total_kw=round(one * nodes, 4),
        rack_kw=round(per_rack * one, 4),
    )


def _section(
    limit: PowerLimit,
    psu: PsuBudget | None,
    *,
    nodes: int,
    per_rack: int,
    gpus_per_node: int,
    base_power_w: float,
    budget_kw: float,
    circuit: float,
) -> PowerSection:
    """plan.power at the decided ``limit``: the kW figures at it and at the requested one, the notes, the
    breaker plan (``circuit``: one circuit's usable kW; ``budget_kw``: the rack's, the PDU's if lower)."""
    capped = limit.power_limit_source in CAPPED_SOURCES
    applied_w, uncapped_w = limit.power_limit_w, limit.power_limit_w_uncapped
    applied = _figures(
        applied_w, gpus_per_node=gpus_per_node, base_power_w=base_power_w, nodes=nodes, per_rack=per_rack
    )
    uncapped = _figures(
        uncapped_w, gpus_per_node=gpus_per_node, base_power_w=base_power_w, nodes=nodes, per_rack=per_rack
    )
    notes = []
    if limit.power_limit_source == "node_psu" and psu is not None:
        notes.append(
            f"one node at {uncapped.node_kw:.2f} kW exceeds the {psu.surviving_w / 1000:g} kW its PSUs "
            f"carry at {psu.level} ({psu.count - psu.redundant} of {psu.count} x {psu.rating_w:g} W): every GPU is "
            f"capped at {applied_w} W ({applied.node_kw:.2f} kW per node)"
        )
    elif capped:
        notes.append(
            f"{per_rack} nodes at {uncapped.node_kw:.2f} kW = {uncapped.rack_kw:.1f} kW "
            f"exceed the rack's {budget_kw:g} kW: every GPU is capped at {applied_w} W "
            f"({applied.rack_kw:.2f} kW per rack)"
        )
    one_node = applied.node_kw
    per_circuit = math.floor(circuit / one_node) if one_node > 0 else 0
    if not per_circuit:
        notes.append(f"one node ({one_node:.1f} kW) needs more than one {circuit:.1f} kW circuit")
    return {
        **limit.as_dict(),
        "gpu_load_kw_per_node": applied.gpu_load_kw_per_node,
        "node_kw": applied.node_kw,
        "gpu_load_kw_total": applied.gpu_load_kw_total,
        "total_kw": applied.total_kw,
        "rack_kw": applied.rack_kw,
        "gpu_load_kw_per_node_uncapped": uncapped.gpu_load_kw_per_node,
        "node_kw_uncapped": uncapped.node_kw,
        "gpu_load_kw_total_uncapped": uncapped.gpu_load_kw_total,
        "total_kw_uncapped": uncapped.total_kw,
        "rack_kw_uncapped": uncapped.rack_kw,
        "nodes_per_rack": per_rack,
        # the node's PSUs and what they carry after the redundant ones fail (None: not given)
        "psu": psu.as_dict() if psu else None,
        "rack_budget_kw": budget_kw,
        # fits: the rack holds the GPUs at the limit the policy asks for; capped: the budget lowered it
        "fits": not capped,
        "capped": capped,
        "per_gpu_cap_w_to_fit": applied_w if capped else None,
        # the applied figures under their former names (the diagram's "fitted" line)
        "node_kw_fitted": applied.node_kw,
        "rack_kw_fitted": applied.rack_kw,
        "circuit_kw": round(circuit, 3),
        "nodes_per_circuit": per_circuit,
        "circuits_per_rack": math.ceil(per_rack / per_circuit) if per_circuit else None,
        "notes": notes,
    }


def site_power_plan(site: Site, model: GpuModel, requested: tuple[int, str]) -> tuple[PowerSection, PowerLimit]:
    """Node/rack power at the applied GPU limit: the policy's limit (``requested``), lowered when the rack
    cannot hold it. This is where the GPU power limit is decided (the PowerLimit returned); the GPU's clocks
    (compute/gpu.py) apply it."""
    fac = site.facility_model
    p = "gpucluster_facility"
    return power_plan(
        nodes=len(site.compute_hosts),
        gpus_per_node=site.node.gpus_per_node,
        gpu_power_w=requested[0],
        gpu_power_source=requested[1],
        gpu_default_w=model.power_default_w,
        gpu_min_w=model.power_min_w,
        gpu_max_w=model.power_max_w,
        base_power_w=site.node.base_power_w,
        racks=int(check_range(fac.racks, f"{p}.racks", 1, 10000, integer=True)),
        rack_budget_kw=fac.rack_power_budget_kw,
        pdu_rating_kw=fac.pdu_rating_kw,
        breaker_amps=fac.breaker_amps,
        circuit_voltage_v=fac.circuit_voltage_v,
        circuit_phases=fac.circuit_phases,
        psu_count=site.node.psu_count,
        psu_rating_w=site.node.psu_rating_w,
        psu_redundancy=site.node.psu_redundancy,
    )


__all__ = [
    "CAPPED_SOURCES",
    "CAP_FIELD",
    "LIMIT_SOURCES",
    "NODE_FIELD",
    "PSU_REDUNDANCY_FIELD",
    "REQUESTED_SOURCES",
    "PowerLimit",
    "PsuBudget",
    "circuit_kw",
    "decide_power_limit",
    "largest_fitting_limit_w",
    "largest_psu_limit_w",
    "node_kw",
    "power_budget",
    "power_plan",
    "psu_budget",
    "psu_redundant",
    "site_power_plan",
]
