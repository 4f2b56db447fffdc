"""The report's sections on running jobs and keeping the cluster healthy: MPI, the Slurm controllers, the node
health check, job containers, self-healing and the acceptance floors (each a function of the plan;
report/sections.py lists them in report order)."""

from __future__ import annotations

from typing import Literal

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import healing
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import INTRO as HEALTH_INTRO
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import health_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import ContainersSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.model import Row, Section
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.text import pair
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.ha import INTRO as HA_INTRO
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.ha import ha_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.mpi import INTRO as MPI_INTRO
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.mpi import mpi_rows


def mpi_section(plan: Plan) -> Section | None:
    """MpiDefault and the UCX / Open MPI files (slurm/mpi.py)."""
    if "mpi" not in plan.get("slurm", {}):
        return None
    return Section("MPI", mpi_rows(plan["slurm"]["mpi"]), MPI_INTRO)


def slurm_ha_section(plan: Plan) -> Section | None:
    """Backup controllers only (slurm/ha.py)."""
    if not plan.get("slurm", {}).get("ha", {}).get("enabled"):
        return None
    return Section("Slurm controllers", ha_rows(plan["slurm"]["ha"]), HA_INTRO)


def health_section(plan: Plan) -> Section | None:
    """The health check's Slurm hooks (compute/health.py)."""
    if "modes" not in plan.get("health", {}):
        return None
    return Section("Node health check", health_rows(plan["health"]), HEALTH_INTRO)


CONTAINERS_INTRO = (
    "Every job container gets the same mounts, environment and devices, on Slurm (pyxis or oci) and in the "
    "Kubernetes path's Ray templates (docs/containers.md)."
)


def containers_section(plan: Plan) -> Section | None:
    """Training jobs in containers (compute/containers.py)."""
    if not plan["containers"]["enabled"]:
        return None
    return Section("Job containers", container_rows(plan["containers"]), CONTAINERS_INTRO)


def container_rows(c: ContainersSection) -> list[Row]:
    """The job containers' runtime, image cache, mounts, environment and devices (plan.containers)."""
    cache = c["cache"]
    how = "pyxis: plugstack.conf + enroot.conf" if c["runtime"] == "pyxis" else "oci: oci.conf + runc"
    rows: list[Row] = [["runtime", c["runtime"], f"gpucluster_containers.runtime ({how})"]]
    if cache is not None:  # an enabled runtime always has its cache (compute/containers.py)
        rows.append(
            [
                "image cache",
                f"{cache['path']}, {cache['size_gb']} GB per node",
                f"gpucluster_storage.local_scratch, not the shared FS (staging takes {cache['staging_gb']:g} GB)",
            ]
        )
    rows += [["mount", m["target"], m["why"]] for m in c["mounts"]]
    rows += [["env " + k, v, "/etc/nccl.conf"] for k, v in c["env"].items()]
    rows.append(["devices", ", ".join(c["devices"]), "the node's GPUs and the fabric's RDMA devices"])
    rows += [["registry " + r["host"], r["credential"] or "anonymous", "credential by name (site secret store)"]
             for r in c["registries"]]  # fmt: skip
    return rows


def healing_section(plan: Plan) -> Section | None:
    """Self-healing: the schedule, the checks with their floors and budgets, the class -> action table and
    the limits (compute/healing.py)."""
    if "healing" not in plan:
        return None
    return Section("Self-healing", healing.healing_rows(plan["healing"]), healing.HEALING_INTRO)


#: the floors a link's line rate can cap (validation/model.py FloorCeilings)
LinkFloor = Literal[
    "allreduce_intra_node_busbw_gbs",
    "allreduce_inter_node_busbw_gbs",
    "nic_write_bw_gbps",
    "storage_read_gbps",
    "storage_write_gbps",
]


def acceptance_section(plan: Plan) -> Section:
    val = plan["validation"]
    how, ceilings = val["how"], val["ceilings"]

    def reached(key: LinkFloor, default: str) -> str:
        text = how.get(key, default)
        ceiling = ceilings.get(key)
        return text if not ceiling or key in how else f"{text}; within {ceiling['gbs']:g}: {ceiling['link']}"

    rows: list[Row] = [
        [
            "all_reduce busbw in a node (GB/s)",
            val["allreduce_intra_node_busbw_gbs"],
            reached("allreduce_intra_node_busbw_gbs", "large messages"),
        ],
        [
            "all_reduce busbw across nodes (GB/s)",
            val["allreduce_inter_node_busbw_gbs"],
            reached("allreduce_inter_node_busbw_gbs", "85 % of NIC line rate"),
        ],
        ["per-NIC write (Gb/s)", val["nic_write_bw_gbps"], reached("nic_write_bw_gbps", "ib_write_bw")],
        [
            "storage (GB/s)",
            pair(("read", "write"), [val["storage_read_gbps"], val["storage_write_gbps"]], "GB/s"),
            "tier floors; their ceilings and the links that set them: section 'Storage floors and ceilings'"
            if plan["storage"].get("ceilings")
            else reached("storage_read_gbps", "read: tier floor")
            + "; "
            + reached("storage_write_gbps", "write: tier floor"),
        ],
    ]
    rows += [[f"no floor: {k}", "", why] for k, why in val["reasons"].items()]
    return Section("Acceptance floors", rows)
