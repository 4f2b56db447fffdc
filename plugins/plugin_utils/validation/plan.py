"""plan.validation: the acceptance floors of the site's tier (validation/floors.py), and the tests the
validate play runs against them (validation/acceptance.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import acceptance
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.floors import validation_floors
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.model import AcceptanceView, ValidationSection

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import TierProfile


def validation_plan(site: Site, tier: TierProfile, plan: Mapping[str, Any]) -> ValidationSection:
    """The acceptance floors, and the tests the validate play runs against them.

    ``plan``: the sections read (cluster, hosts, gpu, storage, fabric), as plan/assembly.py hands them over (read
    only); they are read here as the types their packages give them (AcceptanceView)."""
    fab, gpu = plan["fabric"], plan["gpu"]
    floors = validation_floors(
        tier=tier,
        gpu_model=site.node.gpu_model,
        fabric_type=fab["type"],
        compute_nics_per_node=fab["rails"],
        link_rate_gbps=fab["link_rate_gbps"] if fab["type"] != "none" else None,
        nodes=plan["cluster"]["compute_nodes"],
        intra_node=gpu["interconnect"],
        intra_floor_gbs=site.node.allreduce_intra_node_busbw_gbs,
        gpus_per_node=site.node.gpus_per_node,
        storage_ceilings=plan["storage"]["ceilings"],
    )
    view: AcceptanceView = {
        "cluster": plan["cluster"],
        "hosts": plan["hosts"],
        "gpu": gpu,
        "fabric": fab,
        "storage": plan["storage"],
        "validation": floors,
    }
    return {**floors, "tests": acceptance.acceptance_tests(view)}
