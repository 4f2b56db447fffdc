"""Acceptance floors per tier, GPU model and fabric (docs/sources.md §3).

nccl-tests bus bandwidth (busbw = algbw x 2(n-1)/n for all_reduce, docs/sources.md §3.2) is gated
on large-message rows (8 GiB), not on "# Avg bus bandwidth", which averages every size
(docs/sources.md §3.1).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_range
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import TierProfile

GATE_MESSAGE_BYTES = 8 * 2**30

# Single-node all_reduce busbw pass thresholds (GB/s), Azure NHC (docs/sources.md [A1][A2][A4]).
# B200: the only published pass threshold for NVLink5 Blackwell GPUs is Azure's GB200 one, 432 GB/s
# (docs/sources.md [A3]); a GB200's GPUs have the B200's NVLink5, 900 GB/s per direction per GPU
# (docs/sources.md [S18]), and busbw does not depend on the rank count (docs/sources.md §3.2). A floor, not
# the B200's peak: a site calibrates a higher one with gpucluster_node.allreduce_intra_node_busbw_gbs.
INTRA_NODE_ALLREDUCE_GBS = {"h100_sxm": 460.0, "h200_sxm": 431.0, "a100_sxm4": 228.0, "b200": 432.0}
INTRA_NODE_SOURCE = {
    "h100_sxm": "Azure NHC, ND H100 v5 pass threshold (docs/sources.md [A1])",
    "h200_sxm": "Azure NHC, ND H200 v5 pass threshold (docs/sources.md [A2])",
    "a100_sxm4": "Azure NHC, ND A100 v4 pass threshold (docs/sources.md [A4])",
    "b200": "Azure NHC, ND GB200 v6 pass threshold (docs/sources.md [A3]): the same NVLink5 per GPU, 900 GB/s "
    "per direction (docs/sources.md [S18]); a floor, below the B200's peak",
}
INTRA_NODE_FLOOR_FIELD = "gpucluster_node.allreduce_intra_node_busbw_gbs"
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
    intra_node: dict[str, Any] | None = None,
    intra_floor_gbs: float | None = None,
) -> dict[str, Any]:
    """The floors; ``intra_node`` (compute/interconnect.py) says what an unsourced in-node floor would cross,
    ``intra_floor_gbs`` is the site's own (gpucluster_node.allreduce_intra_node_busbw_gbs)."""
    reasons: dict[str, str] = {}
    intra = INTRA_NODE_ALLREDUCE_GBS.get(gpu_model)
    intra_source = INTRA_NODE_SOURCE.get(gpu_model)
    if intra_floor_gbs is not None:
        intra = check_range(intra_floor_gbs, INTRA_NODE_FLOOR_FIELD, 1, 100000, unit=" GB/s")
        intra_source = f"{INTRA_NODE_FLOOR_FIELD}: the site's calibration on a healthy node"
    elif intra is None:
        reasons["allreduce_intra_node_busbw_gbs"] = f"no sourced single-node all_reduce threshold for {gpu_model}"
        if intra_node and intra_node.get("kind") == "pcie":
            reasons["allreduce_intra_node_busbw_gbs"] += (
                f" over PCIe (no NVLink; the link caps it at {intra_node['pcie_gbs_per_direction']:g} GB/s per "
                f"direction, PCIe Gen{intra_node['pcie_gen']} x16, docs/sources.md [S18]): measure a healthy node "
                f"and set {INTRA_NODE_FLOOR_FIELD}"
            )
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
        "allreduce_intra_node_source": intra_source,
        "allreduce_inter_node_busbw_gbs": inter,
        "nic_write_bw_gbps": nic,
        "storage_read_gbps": tier.storage_read_gbps[0],
        "storage_write_gbps": tier.storage_write_gbps[0],
        "reasons": reasons,
    }
