"""plan.gpu: the site's GPU model, its clocks at the applied power limit, its temperatures, how the GPUs of a
node reach each other, its MIG partitioning and what the node needs to come up (compute/clocks.py,
cooling.py, interconnect.py, mig.py, bringup.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import bringup, clocks, cooling, mig
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import IntraNode
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import PowerLimit
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site


def gpu_plan(
    site: Site,
    model: catalog.GpuModel,
    requested: tuple[int, str],
    limit: PowerLimit,
    link: IntraNode,
    fab: Mapping[str, Any],
    nccl_enabled: bool,
) -> dict[str, Any]:
    """The GPU model, its clocks at the power limit the power plan decided (``limit``), its temperatures, how
    the GPUs of a node reach each other (``link``: NVSwitch, NVLink bridges or PCIe only, compute/interconnect.py)
    and what the node needs to come up: Fabric Manager (NVSwitch boards), GPUDirect RDMA (compute/bringup.py)."""
    policy = site.policy_model
    plan_clocks = clocks.gpu_clocks(
        model,
        policy.clock_policy,
        sm_mhz=policy.sm_mhz,
        mem_mhz=policy.mem_mhz,
        power_cap_w=policy.power_cap_w,
        power_limit=limit,
        requested=requested,
    )
    temps = cooling.gpu_temperature_thresholds(model, override=site.node.gpu_temp_limits)
    return {
        "model": catalog.gpu_model_as_dict(model),
        "clocks": plan_clocks,
        "temperature": temps,
        "interconnect": link.as_dict(),
        # MIG partitioning (compute/mig.py): None unless the site sets gpucluster_gpu_policy.mig
        "mig": mig.mig_plan(policy.mig, model, site.compute_hosts, site.node.gpus_per_node),
        "bringup": bringup.bringup_plan(model, site.node.gpu_software, fab["type"], nccl_enabled),
    }
