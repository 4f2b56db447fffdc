"""plan.gpu: the site's GPU model, its clocks at the applied power limit, its temperatures, how the GPUs of a
node reach each other, its MIG partitioning and what the node needs to come up (compute/clocks.py,
cooling.py, interconnect.py, mig.py, bringup.py)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import bringup, clocks, cooling, mig
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import GpuModelSection, GpuSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import IntraNode
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import PowerLimit
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import FabricSection
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site


def model_section(m: catalog.GpuModel) -> GpuModelSection:
    """plan.gpu.model: every field of the catalog entry, in its order (what ``dataclasses.asdict`` gives)."""
    return {
        "key": m.key,
        "name": m.name,
        "form_factor": m.form_factor,
        "max_sm_mhz": m.max_sm_mhz,
        "max_mem_mhz": m.max_mem_mhz,
        "power_min_w": m.power_min_w,
        "power_default_w": m.power_default_w,
        "power_max_w": m.power_max_w,
        "memory_gb": m.memory_gb,
        "memory_bw_tbs": m.memory_bw_tbs,
        "nvlink_gen": m.nvlink_gen,
        "nvlink_gbs": m.nvlink_gbs,
        "temp_max_operating_c": m.temp_max_operating_c,
        "temp_slowdown_c": m.temp_slowdown_c,
        "temp_shutdown_c": m.temp_shutdown_c,
        "memory_clock_lock": m.memory_clock_lock,
        "mig": copy.deepcopy(m.mig),
        "nvswitch": m.nvswitch,
        "nvlink_links": m.nvlink_links,
        "nvlsm": m.nvlsm,
        "nvlink_domain_gpus": m.nvlink_domain_gpus,
        "sources": dict(m.sources),
    }


def gpu_plan(
    site: Site,
    model: catalog.GpuModel,
    requested: tuple[int, str],
    limit: PowerLimit,
    link: IntraNode,
    fab: FabricSection,
    nccl_enabled: bool,
) -> GpuSection:
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
        "model": model_section(model),
        "clocks": plan_clocks,
        "temperature": temps,
        "interconnect": link.as_dict(),
        # MIG partitioning (compute/mig.py): None unless the site sets gpucluster_gpu_policy.mig
        "mig": mig.mig_plan(policy.mig, model, site.compute_hosts, site.node.gpus_per_node),
        "bringup": bringup.bringup_plan(model, site.node.gpu_software, fab["type"], nccl_enabled),
    }
