"""Acceptance floors per tier, GPU model and fabric (docs/sources.md §3).

nccl-tests bus bandwidth (busbw = algbw x 2(n-1)/n for all_reduce, docs/sources.md §3.2) is gated
on large-message rows (8 GiB), not on "# Avg bus bandwidth", which averages every size
(docs/sources.md §3.1).

Every floor lies within the links that carry it (DESIGN.md, bring-up rules); ``link_ceilings`` gives
each link's line rate:
- in a node: NVLink per direction per GPU (a ring's busbw reaches the line rate at most, ~370 of
  450 GB/s on H100, docs/sources.md [I1]); NVSwitch boards of NVLink4 and later reduce in the switch
  (NVLS), so each GPU's link carries its data once each way and busbw reaches link x 2(n-1)/n
  (~480 GB/s on H100, docs/sources.md [I1][I4]); without NVLink (or between bridged pairs) every
  byte crosses the GPU's own PCIe x16 link (compute/interconnect.py, docs/sources.md [S18]);
- across nodes: the NICs of a node, each at min(its line rate, its PCIe x16 slot), and, on a node
  whose GPUs have no NVSwitch, the GPU's PCIe x16 link (each rank of the ring sends its busbw over it);
- storage: the sum over the data servers (OSS, BeeGFS storage servers, NFS server, NVMe-oF targets) of
  min(their planned storage interfaces' line rates, the PCIe slots of the cards they sit on)
  (``gpucluster_storage.server_nics``, storage/sizing.py), and at most the clients' links, whatever the
  protocol (TCP, RDMA and NVMe-oF carry no more than the line rate); local NVMe: the drives' PCIe links.
A floor the site set above its ceiling is a PlanError naming the field; so is a storage floor above its
ceiling (``storage_floor_within``: the tier's floor is the reference design's, the servers must carry it);
any other floor the engine computed (or took from a tier or a published threshold) above
``LINK_EFFICIENCY`` x its ceiling is lowered to that, and ``reasons`` says why.
"""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import TierProfile
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import Ceiling, StorageCeilings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.model import (
    FloorCeilings,
    Floors,
    IntraNode,
    LinkCeiling,
)

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
#: A computed floor never asks more than this share of the links that carry it: the inter-node
#: floor's 85 % of line rate (docs/sources.md [I3]: ~400 GB/s peak for 8x 400G) applied to any link.
LINK_EFFICIENCY = INTER_NODE_EFFICIENCY
#: NVLink SHARP (in-switch reduction) from NVLink4 NVSwitch on (docs/sources.md [I1][I4], NCCL nvls.cc [N2])
NVLS_MIN_NVLINK_GEN = 4


def _gbs(value: float) -> float:
    return round(value, 1)


def link_ceilings(
    *,
    intra_node: IntraNode | None,
    gpus_per_node: int,
    fabric_type: str,
    compute_nics_per_node: int,
    link_rate_gbps: float | None,
) -> FloorCeilings:
    """Line-rate ceilings (GB/s; ib_write_bw in Gb/s) of the all_reduce and NIC floors, each with the link
    that sets it. Keys as the floors'; a floor with no known link has no entry."""
    out: FloorCeilings = {}
    if not intra_node:
        return out
    kind, pcie = intra_node["kind"], float(intra_node["pcie_gbs_per_direction"])
    pcie_text = f"PCIe Gen{intra_node['pcie_gen']} x16, {pcie:g} GB/s per direction (docs/sources.md [S18])"
    gpn = max(1, int(gpus_per_node))
    if kind == "nvswitch":
        link = float(intra_node["link_gbs_per_direction"])
        if (intra_node.get("nvlink_gen") or 0) >= NVLS_MIN_NVLINK_GEN and gpn > 1:
            factor = busbw_factor("all_reduce", gpn)
            intra: LinkCeiling = {
                "gbs": _gbs(link * factor),
                "link": f"NVLink{intra_node['nvlink_gen']} {link:g} GB/s per direction x {factor:g} (2(n-1)/n, "
                f"n={gpn}): NVLS reduces in the switch, each GPU's link carries its data once each way "
                "(docs/sources.md [I1][I4])",
            }
        else:
            intra = {"gbs": _gbs(link), "link": f"NVLink{intra_node['nvlink_gen']} {link:g} GB/s per direction"}
        gpu_link: LinkCeiling | None = None
    elif kind == "nvlink_bridge" and gpn <= int(intra_node["domain_gpus"]):
        link = float(intra_node["link_gbs_per_direction"])
        intra = {"gbs": _gbs(link), "link": f"NVLink bridge {link:g} GB/s per direction"}
        gpu_link = None
    else:  # pcie only, or bridged pairs whose ring crosses PCIe between pairs
        intra = {"gbs": _gbs(pcie), "link": f"each GPU's {pcie_text}: no NVLink between all GPUs of the node"}
        gpu_link = intra
    if gpn > 1:
        out["allreduce_intra_node_busbw_gbs"] = intra
    if fabric_type != "none" and link_rate_gbps and compute_nics_per_node:
        per_nic = min(float(link_rate_gbps), pcie * 8)
        nics = compute_nics_per_node * per_nic / 8
        nic_text = (
            f"{compute_nics_per_node} x {link_rate_gbps:g} Gb/s NICs"
            + (f", each capped by its {pcie_text}" if per_nic < link_rate_gbps else "")
            + f" = {nics:g} GB/s"
        )
        inter: LinkCeiling = {"gbs": _gbs(nics), "link": nic_text}
        if gpu_link is not None and gpu_link["gbs"] < nics:
            inter = {"gbs": gpu_link["gbs"], "link": f"{gpu_link['link']} (below the node's {nic_text})"}
        out["allreduce_inter_node_busbw_gbs"] = inter
        out["nic_write_bw_gbps"] = {
            "gbs": _gbs(per_nic),
            "link": f"{link_rate_gbps:g} Gb/s NIC line rate"
            + (f", capped by its {pcie_text}" if per_nic < link_rate_gbps else ""),
        }
    return out


def _capped(
    key: str, floor: float | None, ceiling: LinkCeiling | None, how: dict[str, str], unit: str = "GB/s"
) -> float | None:
    """A computed floor within its ``ceiling``: above it, LINK_EFFICIENCY x the ceiling, and ``how[key]`` says
    why."""
    if floor is None or ceiling is None or floor <= ceiling["gbs"]:
        return floor
    top = _gbs(LINK_EFFICIENCY * ceiling["gbs"])
    how[key] = (
        f"lowered from {floor:g} to {top:g} {unit}: {floor:g} is above the {ceiling['gbs']:g} {unit} of "
        f"{ceiling['link']}; the floor is {LINK_EFFICIENCY:g} x that ceiling"
    )
    return top


def storage_floor_within(tier: TierProfile, rw: str, ceiling: Ceiling | None) -> float:
    """The tier's storage floor (``rw``: read or write), refused above what the storage carries.

    One design for every storage type: a storage floor is never lowered to fit, it is a PlanError naming the
    inventory field that sets the ceiling (the servers' ports, ``gpucluster_storage.server_nics``; the clients'
    storage NICs; the local drives), its value, the floor with where it comes from and the ceiling with its
    links: a floor above the links fails every healthy cluster, and a floor lowered in silence hides storage
    that cannot deliver the tier (``ceiling``: storage/sizing.py storage_ceiling or local_ceiling)."""
    floor: float = getattr(tier, f"storage_{rw}_gbps")[0]
    if ceiling and floor > ceiling["gbs"]:
        raise PlanError(
            ceiling.get("field", "gpucluster_storage"),
            ceiling.get("value"),
            f"links that carry the {tier.name} storage {rw} floor, {floor:g} GB/s (gpucluster_cluster.tier: "
            f"{tier.name}, docs/tiers.md); they carry {ceiling['gbs']:g} GB/s: {ceiling['link']}. "
            + (f"Fix: {ceiling['fix']}" if ceiling.get("fix") else ""),
        )
    return floor


def busbw_factor(op: str, ranks: int) -> float:
    """nccl-tests busbw/algbw factor (docs/sources.md §3.2)."""
    if op == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if op in ("reduce_scatter", "all_gather", "alltoall"):
        return (ranks - 1) / ranks
    if op in ("broadcast", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


def _intra_floor(
    gpu_model: str,
    intra_floor_gbs: float | None,
    intra_node: IntraNode | None,
    ceilings: FloorCeilings,
    reasons: dict[str, str],
    how: dict[str, str],
) -> tuple[float | None, str | None]:
    """The single-node all_reduce floor and its source: the site's own (refused above its ceiling), else the
    GPU's sourced threshold within its ceiling; none (``reasons`` says why) where neither exists."""
    intra: float | None = INTRA_NODE_ALLREDUCE_GBS.get(gpu_model)
    intra_source = INTRA_NODE_SOURCE.get(gpu_model)
    if intra_floor_gbs is not None:
        intra = check_range(intra_floor_gbs, INTRA_NODE_FLOOR_FIELD, 1, 100000, unit=" GB/s")
        intra_source = f"{INTRA_NODE_FLOOR_FIELD}: the site's calibration on a healthy node"
        ceiling = ceilings.get("allreduce_intra_node_busbw_gbs")
        if ceiling and intra > ceiling["gbs"]:
            raise PlanError(
                INTRA_NODE_FLOOR_FIELD,
                intra_floor_gbs,
                f"at most {ceiling['gbs']:g} GB/s, the ceiling of {ceiling['link']}: a floor above the links that "
                "carry it fails every healthy node",
            )
    elif intra is None:
        reasons["allreduce_intra_node_busbw_gbs"] = f"no sourced single-node all_reduce threshold for {gpu_model}"
        if intra_node and intra_node.get("kind") == "pcie":
            reasons["allreduce_intra_node_busbw_gbs"] += (
                f" over PCIe (no NVLink; the link caps it at {intra_node['pcie_gbs_per_direction']:g} GB/s per "
                f"direction, PCIe Gen{intra_node['pcie_gen']} x16, docs/sources.md [S18]): measure a healthy node "
                f"and set {INTRA_NODE_FLOOR_FIELD}"
            )
    else:
        intra = _capped("allreduce_intra_node_busbw_gbs", intra, ceilings.get("allreduce_intra_node_busbw_gbs"), how)
    return intra, intra_source


def validation_floors(
    *,
    tier: TierProfile,
    gpu_model: str,
    fabric_type: str,
    compute_nics_per_node: int,
    link_rate_gbps: float | None,
    nodes: int,
    intra_node: IntraNode | None = None,
    intra_floor_gbs: float | None = None,
    gpus_per_node: int = 8,
    storage_ceilings: StorageCeilings | None = None,
) -> Floors:
    """The floors; ``intra_node`` (compute/interconnect.py) says what the in-node links are,
    ``intra_floor_gbs`` is the site's own (gpucluster_node.allreduce_intra_node_busbw_gbs),
    ``storage_ceilings`` the storage links' {read_gbps, write_gbps: {gbs, link, field, value}} (storage/sizing.py).
    ``ceilings``: each floor's link ceiling; a floor the site set above it is a PlanError."""
    reasons: dict[str, str] = {}  # why a floor is missing
    how: dict[str, str] = {}  # how a floor was reached, where the link ceiling shaped it
    ceilings = link_ceilings(
        intra_node=intra_node,
        gpus_per_node=gpus_per_node,
        fabric_type=fabric_type,
        compute_nics_per_node=compute_nics_per_node,
        link_rate_gbps=link_rate_gbps,
    )
    read_ceiling = storage_ceilings.get("read_gbps") if storage_ceilings else None
    write_ceiling = storage_ceilings.get("write_gbps") if storage_ceilings else None
    if read_ceiling:
        ceilings["storage_read_gbps"] = read_ceiling
    if write_ceiling:
        ceilings["storage_write_gbps"] = write_ceiling
    intra, intra_source = _intra_floor(gpu_model, intra_floor_gbs, intra_node, ceilings, reasons, how)
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
            ceiling = ceilings.get("allreduce_inter_node_busbw_gbs")
            if ceiling:
                inter = _gbs(INTER_NODE_EFFICIENCY * ceiling["gbs"])
                how["allreduce_inter_node_busbw_gbs"] = (
                    f"{INTER_NODE_EFFICIENCY:g} x {ceiling['gbs']:g} GB/s, the ceiling of {ceiling['link']} "
                    "(docs/sources.md [I3]: ~400 GB/s peak for 8x 400G)"
                )
            else:
                inter = _gbs(INTER_NODE_EFFICIENCY * compute_nics_per_node * link_rate_gbps / 8)
        sourced = NIC_FLOOR.get(gpu_model)
        nic_ceiling = ceilings.get("nic_write_bw_gbps")
        nic_rate = float(nic_ceiling["gbs"] if nic_ceiling is not None else link_rate_gbps)
        if sourced and sourced[1] == link_rate_gbps:
            nic = _capped("nic_write_bw_gbps", sourced[0], nic_ceiling, how, "Gb/s")
        else:
            nic = _gbs(NIC_GENERIC_EFFICIENCY * nic_rate)
    storage_read = storage_floor_within(tier, "read", read_ceiling or None)
    storage_write = storage_floor_within(tier, "write", write_ceiling or None)
    return {
        "gate_message_bytes": GATE_MESSAGE_BYTES,
        "allreduce_intra_node_busbw_gbs": intra,
        "allreduce_intra_node_source": intra_source,
        "allreduce_inter_node_busbw_gbs": inter,
        "nic_write_bw_gbps": nic,
        "storage_read_gbps": storage_read,
        "storage_write_gbps": storage_write,
        "ceilings": ceilings,
        "how": how,
        "reasons": reasons,
    }
