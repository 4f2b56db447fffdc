"""The four reference tiers (../shared/reference/tiers.md, from article 000 and 003).

A tier profile supplies the defaults and floors a site inherits: fabric and topology,
storage type and its read/write floors (GB/s, GB = 1e9 B), scheduler. tier4 is the
template for larger sites.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import TierSection


@dataclass(frozen=True)
class TierProfile:
    name: str
    nodes: int
    gpus: int
    fabric: str
    topology: str
    storage_type: str
    storage_read_gbps: tuple[float, float]  # (floor, upper end of the reference range)
    storage_write_gbps: tuple[float, float]
    scheduler: str
    training_fit: str
    capex: str


# tiers.md "Tiers" table (article 000; article 003 for the 8-node build).
TIERS: dict[str, TierProfile] = {
    "tier1": TierProfile(
        "tier1", 1, 8, "none", "none", "local_nvme", (14, 28), (7, 14),
        "local scripts / simple queue", "~70B QLoRA, ~13B full fine-tune", "$200-300K",
    ),
    "tier2": TierProfile(
        "tier2", 2, 16, "infiniband", "single_switch", "nfs", (40, 40), (20, 20),
        "Slurm or KubeRay", "~70B full fine-tune, ~100B QLoRA", "$450-650K",
    ),
    "tier3": TierProfile(
        "tier3", 4, 32, "infiniband", "rail_optimized", "lustre", (80, 160), (40, 80),
        "Slurm or KubeRay", "~180B full fine-tune, 405B QLoRA", "$0.9-1.4M",
    ),
    "tier4": TierProfile(
        "tier4", 8, 64, "infiniband", "fat_tree", "lustre", (160, 500), (80, 250),
        "Slurm + MPI", "671B MoE full fine-tune, pre-training", "$2-4M",
    ),
}  # fmt: skip


def tier_profile(name: str, field: str = "gpucluster_cluster.tier") -> TierProfile:
    if name not in TIERS:
        raise PlanError(field, name, "one of " + ", ".join(TIERS))
    return TIERS[name]


def tier_as_dict(profile: TierProfile) -> TierSection:
    """``plan["tier"]``: the profile's fields, its ranges as lists."""
    return {
        "name": profile.name,
        "nodes": profile.nodes,
        "gpus": profile.gpus,
        "fabric": profile.fabric,
        "topology": profile.topology,
        "storage_type": profile.storage_type,
        "storage_read_gbps": list(profile.storage_read_gbps),
        "storage_write_gbps": list(profile.storage_write_gbps),
        "scheduler": profile.scheduler,
        "training_fit": profile.training_fit,
        "capex": profile.capex,
    }
