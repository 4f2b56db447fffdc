"""The plan as readable sections: each setting with its value and how it was reached.

report.md renders these rows as they are; keeping the wording here (pure data) keeps the
template free of arithmetic and lets tests read the report without Ansible. Two rules keep
the report readable for a newcomer:

- every pair of numbers carries its labels and unit ("min 1980 / max 1980 MHz"), never "1980, 1980";
- every formula row shows its inputs with their values ("64 GPUs x 24 h x $4.00/GPU-h x 0.20 I/O wait").

:func:`report_summary` is the report's opening: the warnings a reader must see first, then
the next steps.
"""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import Sizing
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.tco import tco_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report import compute, operations, storage
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.model import (
    Report,
    Row,
    Section,
    SectionView,
    render,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.summary import report_summary

__all__ = ["SECTIONS", "plan_report", "report_sections", "report_summary"]


def fabric_section(plan: Plan) -> Section | None:
    """The fabric's type, rails, switches and links, its sizing, the subnet manager and /etc/nccl.conf."""
    fab, nccl = plan["fabric"], plan["nccl"]
    if fab["type"] == "none":
        return None
    rows: list[Row] = [
        ["type / topology", f"{fab['type']} / {fab['topology']}", "gpucluster_fabric"],
        ["rails", fab["rails"], "compute NICs per node"],
        [
            "switches",
            len(fab["cabling"]["switches"]),
            ", ".join(s["name"] for s in fab["cabling"]["switches"][:12]),
        ],
        ["links", fabric_links.link_count(fab["cabling"]), "host and uplink cables"],
    ]
    rows += _fabric_sizing_rows(fab["cabling"].get("sizing") or {})
    ib = fab.get("infiniband")
    if ib:  # who runs the subnet manager, and its ports (one per subnet) when the head does
        sm_ports = fab["cabling"].get("sm_links") or []
        where = ", ".join(
            f"{x['a']['node']} {x['a']['hca']} on {x['b']['node']} port {x['b']['port']}" for x in sm_ports
        )
        rows.append(["subnet manager", ib["subnet_manager"], f"{ib['sm_where']}{': ' + where if where else ''}"])
    if nccl.get("topology"):
        rows.append(["NCCL topology", nccl["topology"], nccl.get("topology_reason", "")])
    rows += [[k, v, "/etc/nccl.conf"] for k, v in nccl["conf"].items()]
    return Section("Fabric and NCCL", rows)


def _fabric_sizing_rows(sz: Sizing) -> list[Row]:
    """How the fat tree was sized (cabling.py, docs/fabric.md "Sizing"): tiers, oversubscription, spines."""
    if (sz.get("tiers") or 0) < 2:
        return []
    over = sz["oversubscription"]
    ratio = "1:1, non-blocking" if over == 1 else f"{over:g}:1 host ports to uplinks"
    rows: list[Row] = [
        [
            "fat tree",
            f"{sz['tiers']} tiers",
            f"{sz['switch_radix']}-port switches, {sz['hosts_per_leaf']} hosts per leaf",
        ],
        ["oversubscription", ratio, "gpucluster_fabric.oversubscription (default 1)"],
        [
            "spines",
            f"{sz['spine_groups']} x {sz['spines_per_group']}",
            "spine groups x spines (per pod)"
            if sz["tiers"] == 3
            else "spine groups x spines: the fewest that carry the uplinks, at least gpucluster_fabric.min_spines",
        ],
        [
            "cables",
            f"{sz['host_links']} / {sz['uplinks']} / {sz['core_links']}",
            "host / leaf-spine / spine-core",
        ],
    ]
    if sz["tiers"] == 3:
        rows.insert(
            3,
            [
                "pods, core switches",
                f"{sz['pods']} pods, {sz['cores']} core",
                f"{sz['sus_per_pod']} SUs per pod; {sz['cores_per_group']} core switches per spine index and group",
            ],
        )
    return rows


def tco_section(plan: Plan) -> Section | None:
    """InfiniBand vs RoCEv2 side by side (fabric/tco.py)."""
    if "fabric_tco" not in plan:
        return None
    tco = plan["fabric_tco"]
    rows = [[r[0], f"InfiniBand {r[1]} / RoCEv2 {r[2]} (IB - RoCE {r[3]})", r[4]] for r in tco_rows(tco)]
    intro = f"{tco['reason']}. {tco['caveat']}" if tco["applies"] else f"{tco['reason']}."
    return Section("What the fabric costs", rows, intro)


#: every section of report.md, in report order: a function of the plan that returns the section, or None where
#: the plan has none of it (no fabric, no MIG, no UPS, ...)
SECTIONS: tuple[Callable[[Plan], Section | None], ...] = (
    compute.tier_section,
    compute.gpu_section,
    compute.inside_node_section,
    compute.bringup_section,
    compute.mig_section,
    compute.power_section,
    compute.ups_section,
    compute.cooling_section,
    storage.storage_section,
    storage.storage_ceiling_section,
    storage.lustre_section,
    storage.protection_section,
    storage.nfs_section,
    storage.nvmeof_section,
    storage.beegfs_section,
    storage.drain_section,
    fabric_section,
    tco_section,
    operations.mpi_section,
    operations.slurm_ha_section,
    operations.health_section,
    operations.containers_section,
    operations.healing_section,
    compute.parallelism_section,
    operations.acceptance_section,
)


def report_sections(plan: Plan) -> list[SectionView]:
    """report.md's sections (title, intro, rows of setting, value, how), each rendered as text, in order."""
    return [render(s) for s in (build(plan) for build in SECTIONS) if s is not None]


def plan_report(plan: Plan) -> Report:
    """What report.md.j2 reads beside the plan (filter plan_report): the sections, the summary (warnings,
    next steps) and each host's role files (plan/files.py files_by_host: the plan holds the rules)."""
    return {"sections": report_sections(plan), "summary": report_summary(plan), "files": files_by_host(plan)}
