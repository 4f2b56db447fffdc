"""Inside one node: how its GPUs reach each other, and what follows from that.

Three kinds of node, read from the catalog (``nvlink_gen``, ``form_factor``):

- ``nvswitch``: SXM boards (HGX/DGX) join every GPU of the node through NVSwitch, at the NVLink speed of
  the model (docs/sources.md [S18]: "NVSwitch operates at the same speed as NVLink of that generation").
- ``nvlink_bridge``: PCIe cards with NVLink bridges join GPUs in pairs (dossier 1.1 [S12]: the H100 PCIe
  bridge is 2-way; A100 PCIe and H100 NVL bridge two GPUs), everything else crosses PCIe.
- ``pcie``: no NVLink at all (L40S, RTX PRO 6000: dossier 1.1 [S7], "none (PCIe Gen5 x16)"): every byte
  between two GPUs crosses PCIe, 63 GB/s per direction for Gen5 x16, an order of magnitude below NVLink
  (docs/sources.md [S18]: "PCIe is usually an order of magnitude behind"; NVLink5 is 14x PCIe Gen5).

The NVLink domain (the GPUs that share NVLink) is where tensor parallelism belongs: Megatron's TP
all-reduces sit on the critical path of every layer, and "TP is only efficient at NVLink speed"
(docs/sources.md [S18]; Narayanan et al. 2021, arXiv:2104.04473, takeaway 1: TP up to the GPUs of a
server with fast links, PP across). So the plan's automatic search keeps TP within the domain; on a
PCIe-only node that is TP=1, and memory is found with ZeRO/FSDP sharding and PP instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import InterconnectSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_range

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan

KINDS = ("nvswitch", "nvlink_bridge", "pcie")
#: GPUs one NVLink bridge joins (dossier 1.1 [S12]: H100 PCIe NVLink bridge "2-way")
BRIDGE_GPUS = 2
#: PCIe x16, GB/s per direction (docs/sources.md [S18], PCIe table). Gen3-5 are the same arithmetic:
#: GT/s x 16 lanes x 128/130 (encoding) / 8 bits: Gen3 8 GT/s = 15.75, Gen4 16 GT/s = 31.5, Gen5 32 GT/s = 63
#: (unit test checks each against the formula). Gen6 (64 GT/s PAM4, FLIT encoding) is the [S18] table's 121.
PCIE_X16_GBS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
#: PCIe lane rate, GT/s, per generation (PCI-SIG; docs/sources.md [S18])
PCIE_GTS = {3: 8, 4: 16, 5: 32, 6: 64}


@dataclass(frozen=True)
class IntraNode:
    """How the GPUs of one node talk, and the tensor-parallel domain that follows."""

    kind: str  # one of KINDS
    nvlink_gen: int | None
    domain_gpus: int  # GPUs that share NVLink: the largest TP the plan picks on its own
    link_gbs_per_direction: float  # per GPU: NVLink (nvswitch, nvlink_bridge) or PCIe x16 (pcie)
    pcie_gbs_per_direction: float  # per GPU, PCIe x16 of gpucluster_node.pcie_gen
    pcie_gen: int
    reason: str
    tp_rule: str

    def as_dict(self) -> InterconnectSection:
        return {
            "kind": self.kind,
            "nvlink_gen": self.nvlink_gen,
            "domain_gpus": self.domain_gpus,
            "link_gbs_per_direction": self.link_gbs_per_direction,
            "pcie_gbs_per_direction": self.pcie_gbs_per_direction,
            "pcie_gen": self.pcie_gen,
            "reason": self.reason,
            "tp_rule": self.tp_rule,
        }


def intra_node(gpu: GpuModel, gpus_per_node: int, pcie_gen: int = 5) -> IntraNode:
    """The node's GPU-to-GPU link: NVSwitch, NVLink bridge pairs or PCIe only (docs/sources.md [S18])."""
    gpn = int(check_range(gpus_per_node, "gpucluster_node.gpus_per_node", 1, None, integer=True))
    gen = int(check_range(pcie_gen, "gpucluster_node.pcie_gen", 3, 6, integer=True))
    pcie = PCIE_X16_GBS[gen]
    pcie_text = f"PCIe Gen{gen} x16, {pcie:g} GB/s per direction"
    if gpu.nvlink_gen is None or not gpu.nvlink_gbs:
        return IntraNode(
            kind="pcie",
            nvlink_gen=None,
            domain_gpus=1,
            link_gbs_per_direction=pcie,
            pcie_gbs_per_direction=pcie,
            pcie_gen=gen,
            reason=f"{gpu.key} has no NVLink: GPU-to-GPU traffic crosses {pcie_text}",
            tp_rule=(
                "TP=1 unless set: without NVLink every tensor-parallel all-reduce crosses PCIe, an order of "
                "magnitude below NVLink; memory comes from ZeRO/FSDP sharding and pipeline stages instead"
            ),
        )
    nvlink = gpu.nvlink_gbs / 2  # the catalog holds the bidirectional figure
    if gpu.form_factor == "sxm":
        return IntraNode(
            kind="nvswitch",
            nvlink_gen=gpu.nvlink_gen,
            domain_gpus=gpn,
            link_gbs_per_direction=nvlink,
            pcie_gbs_per_direction=pcie,
            pcie_gen=gen,
            reason=(
                f"{gpu.key}: NVLink{gpu.nvlink_gen} through NVSwitch, {nvlink:g} GB/s per direction per GPU, "
                f"all {gpn} GPUs of the node in one NVLink domain"
            ),
            tp_rule=f"TP up to {gpn}, inside the node's NVLink domain; PP and DP across nodes",
        )
    domain = min(BRIDGE_GPUS, gpn)
    return IntraNode(
        kind="nvlink_bridge",
        nvlink_gen=gpu.nvlink_gen,
        domain_gpus=domain,
        link_gbs_per_direction=nvlink,
        pcie_gbs_per_direction=pcie,
        pcie_gen=gen,
        reason=(
            f"{gpu.key}: NVLink{gpu.nvlink_gen} bridges join GPUs in pairs ({nvlink:g} GB/s per direction); "
            f"between pairs, {pcie_text}"
        ),
        tp_rule=f"TP up to {domain}, inside a bridged pair; beyond it tensor-parallel all-reduces cross PCIe",
    )


def _num(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def intra_node_rows(plan: Plan) -> list[list[str | int | float | None]]:
    """The report's "Inside the node" rows (setting, value, how it was reached) from the plan's
    ``gpu.interconnect``, ``parallelism``, ``nccl.intra_node``, ``validation`` and ``dcgm``."""
    link, par = plan["gpu"]["interconnect"], plan["parallelism"]
    model = plan["gpu"]["model"]
    val, dcgm = plan["validation"], plan["dcgm"]
    nccl = plan["nccl"].get("intra_node") or {}
    what = {
        "nvswitch": f"NVLink{link['nvlink_gen']} via NVSwitch",
        "nvlink_bridge": f"NVLink{link['nvlink_gen']} bridges (pairs), PCIe between pairs",
        "pcie": f"PCIe Gen{link['pcie_gen']} x16 only (no NVLink)",
    }[link["kind"]]
    floor = val.get("allreduce_intra_node_busbw_gbs")
    floor_how = val.get("reasons", {}).get("allreduce_intra_node_busbw_gbs") or val.get("allreduce_intra_node_source")
    nvlink = model.get("nvlink_gen") is not None
    rows: list[list[str | int | float | None]] = [
        ["GPU-to-GPU link", what, link["reason"]],
        [
            "link per GPU (GB/s per direction)",
            link["link_gbs_per_direction"],
            f"PCIe Gen{link['pcie_gen']} x16 is {link['pcie_gbs_per_direction']:g} GB/s per direction "
            "(docs/sources.md [S18])",
        ],
        ["tensor-parallel domain (GPUs)", link["domain_gpus"], f"{link['tp_rule']}; this plan: TP={par['tp']}"],
        ["NCCL inside the node", nccl.get("transport", "n/a"), nccl.get("reason", "")],
        ["NVLink SHARP (NVLS)", nccl.get("nvls", "n/a"), "NCCL_NVLS_ENABLE left at its default"],
        ["all_reduce floor in a node (GB/s)", _num(floor), floor_how],
        [
            "NVLink monitoring",
            "DCGM watch, policy, counters, alert, panels" if nvlink else "none",
            f"DCGM health -s {dcgm['health_systems']}"
            + ("" if nvlink else f"; {model['key']} has no NVLink: no NVLink watch, policy, counters, alert or panels"),
        ],
    ]
    rows += [["host check", check, "before the acceptance run (GPU P2P over PCIe)"] for check in nccl.get("checks", [])]
    site = model.get("sources", {}).get("site")
    if site:
        rows.append(["GPU limits from the site", site.split(" (")[1].split(")")[0], site])
    return rows
