"""Acceptance floors per tier, GPU model and fabric (docs/sources.md §3).

nccl-tests bus bandwidth (busbw = algbw x 2(n-1)/n for all_reduce, docs/sources.md §3.2) is gated
on large-message rows (8 GiB), not on "# Avg bus bandwidth", which averages every size
(docs/sources.md §3.1).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import TierProfile

GATE_MESSAGE_BYTES = 8 * 2**30

# Single-node all_reduce busbw pass thresholds (GB/s), Azure NHC (docs/sources.md [A1][A2][A4]).
INTRA_NODE_ALLREDUCE_GBS = {"h100_sxm": 460.0, "h200_sxm": 431.0, "a100_sxm4": 228.0}
# Per-NIC GPUDirect RDMA write floors (Gb/s) at the NIC rate they were measured at (docs/sources.md §3.3).
NIC_FLOOR = {"h100_sxm": (375.0, 400), "h200_sxm": (360.0, 400), "a100_sxm4": (185.0, 200)}
# Multi-node all_reduce is network-bound: ~400 GB/s peak for 8x NDR 400G (docs/sources.md [I2][I3]),
# i.e. the NICs' line rate; the floor is 85 % of it.
INTER_NODE_EFFICIENCY = 0.85
# Without a model-specific number, a NIC must reach this share of its line rate
# (375 Gb/s of 400 for H100/NDR is 94 %; 185 of 200 for A100/HDR is 92.5 %).
NIC_GENERIC_EFFICIENCY = 0.9


def busbw_factor(op: str, ranks: int) -> float:
    """nccl-tests busbw/algbw factor (docs/sources.md §3.2)."""
    if op == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if op in ("reduce_scatter", "all_gather", "alltoall"):
        return (ranks - 1) / ranks
    if op in ("broadcast", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


def validation_floors(
    *,
    tier: TierProfile,
    gpu_model: str,
    fabric_type: str,
    compute_nics_per_node: int,
    link_rate_gbps: float | None,
    nodes: int,
) -> dict[str, Any]:
    reasons: dict[str, str] = {}
    intra = INTRA_NODE_ALLREDUCE_GBS.get(gpu_model)
    if intra is None:
        reasons["allreduce_intra_node_busbw_gbs"] = f"no sourced single-node all_reduce threshold for {gpu_model}"
    inter = None
    nic = None
    if nodes < 2:
        reasons["allreduce_inter_node_busbw_gbs"] = "single node: no inter-node all_reduce"
    if fabric_type == "none" or not link_rate_gbps or not compute_nics_per_node:
        reasons["nic_write_bw_gbps"] = "no compute fabric"
        if nodes >= 2:
            reasons["allreduce_inter_node_busbw_gbs"] = "no compute fabric"
    else:
        if nodes >= 2:
            inter = round(INTER_NODE_EFFICIENCY * compute_nics_per_node * link_rate_gbps / 8, 1)
        sourced = NIC_FLOOR.get(gpu_model)
        if sourced and sourced[1] == link_rate_gbps:
            nic = sourced[0]
        else:
            nic = round(NIC_GENERIC_EFFICIENCY * link_rate_gbps, 1)
    return {
        "gate_message_bytes": GATE_MESSAGE_BYTES,
        "allreduce_intra_node_busbw_gbs": intra,
        "allreduce_inter_node_busbw_gbs": inter,
        "nic_write_bw_gbps": nic,
        "storage_read_gbps": tier.storage_read_gbps[0],
        "storage_write_gbps": tier.storage_write_gbps[0],
        "reasons": reasons,
    }
