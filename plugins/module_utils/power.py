"""Node and rack power, the breaker plan, and the power cap a rack budget needs.

node kW = GPUs x per-GPU power + the node's base load (CPUs, memory, NICs, fans).
A circuit carries V x A (single phase) or sqrt(3) x V(line-to-line) x A (three phase),
of which 80 % is usable for a continuous load (NEC 210.19/210.20: breakers for
continuous loads sized at 125 %, i.e. loaded to 80 %).
"""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError, check_range

CONTINUOUS_LOAD_FACTOR = 0.8  # NEC 80 % rule for continuous loads


def circuit_kw(breaker_amps: float, voltage_v: float, phases: int) -> float:
    """Usable kW of one circuit after the continuous-load derating."""
    raw = voltage_v * breaker_amps * (math.sqrt(3) if phases == 3 else 1.0) / 1000.0
    return raw * CONTINUOUS_LOAD_FACTOR


def power_budget(
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
    field: str = "gpucluster_facility",
) -> dict[str, Any]:
    """Power per node and rack; the per-GPU cap to fit the rack; PlanError when nothing fits."""
    nodes = check_range(nodes, "groups.compute", 1, None, integer=True)
    racks = check_range(racks, f"{field}.racks", 1, nodes, integer=True)
    budget = check_range(rack_budget_kw, f"{field}.rack_power_budget_kw", 0.1, 2000, unit=" kW")
    pdu = check_range(pdu_rating_kw if pdu_rating_kw is not None else budget, f"{field}.pdu_rating_kw", 0.1, 2000)
    amps = check_range(breaker_amps, f"{field}.breaker_amps", 1, 1000, unit=" A")
    volts = check_range(circuit_voltage_v, f"{field}.circuit_voltage_v", 100, 1000, unit=" V")
    if circuit_phases not in (1, 3):
        raise PlanError(f"{field}.circuit_phases", circuit_phases, "1 or 3")
    limit_kw = min(budget, pdu)
    gpu_kw_node = gpus_per_node * gpu_power_w / 1000.0
    node_kw = gpu_kw_node + base_power_w / 1000.0
    per_rack = math.ceil(nodes / racks)
    rack_kw = per_rack * node_kw
    cap = None
    notes = []
    if rack_kw > limit_kw + 1e-9:
        # the largest whole-watt cap with per_rack * (gpus * cap + base) <= limit
        cap = math.floor((limit_kw * 1000.0 / per_rack - base_power_w) / gpus_per_node)
        if gpu_max_w is not None:
            cap = min(cap, int(gpu_max_w))
        if gpu_min_w is None or cap < gpu_min_w:
            floor_kw = per_rack * (gpus_per_node * (gpu_min_w or 0) + base_power_w) / 1000.0
            raise PlanError(
                f"{field}.rack_power_budget_kw",
                budget,
                f"at least {floor_kw:.1f} kW for {per_rack} nodes per rack even with every GPU at its minimum "
                f"power limit ({gpu_min_w} W); add racks (gpucluster_facility.racks) or power",
            )
        notes.append(
            f"{per_rack} nodes at {node_kw:.2f} kW = {rack_kw:.1f} kW exceed the rack's {limit_kw:g} kW: "
            f"cap every GPU at {cap} W"
        )
    fitted_node_kw = node_kw if cap is None else (gpus_per_node * cap + base_power_w) / 1000.0
    circuit = circuit_kw(amps, volts, circuit_phases)
    per_circuit = math.floor(circuit / fitted_node_kw) if fitted_node_kw > 0 else 0
    return {
        "gpu_load_kw_per_node": round(gpu_kw_node, 4),
        "node_kw": round(node_kw, 4),
        "gpu_load_kw_total": round(gpu_kw_node * nodes, 4),
        "total_kw": round(node_kw * nodes, 4),
        "nodes_per_rack": per_rack,
        "rack_kw": round(rack_kw, 4),
        "rack_budget_kw": limit_kw,
        "fits": cap is None,
        "per_gpu_cap_w_to_fit": cap,
        "node_kw_fitted": round(fitted_node_kw, 4),
        "rack_kw_fitted": round(per_rack * fitted_node_kw, 4),
        "circuit_kw": round(circuit, 3),
        "nodes_per_circuit": per_circuit,
        "circuits_per_rack": math.ceil(per_rack / per_circuit) if per_circuit else None,
        "notes": notes
        + ([] if per_circuit else [f"one node ({fitted_node_kw:.1f} kW) needs more than one {circuit:.1f} kW circuit"]),
    }
