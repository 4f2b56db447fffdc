"""The one entry point: the whole cluster plan from the inventory.

``cluster_plan(site_vars, groups)`` takes the inventory's ``gpucluster_*`` variables and
its groups, checks them (inventory/site.py), answers every question of the design
(tier, GPU clocks and power, rack power, cooling, storage sizing, Lustre, NCCL,
parallelism, addresses, fabric, validation floors, host settings) and returns one
JSON-serialisable dict. It does no I/O; filters, modules and the CLI call it.

Wiring only: each stage is a function of its domain package, which owns its rules and their checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import clocks, containers, dcgm, health, ups
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.cooling import site_cooling
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.gpu import gpu_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.healing import healing_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import intra_node
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import nccl_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.node import node_resources
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.parallelism import site_parallelism
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import site_power_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import fabric_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import tco as fabric_tco
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.plan import fabric_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import (
    catalog,
    gpu_limits,
    support,
    tenants,
    tiers,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import load_site
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes import manifests as k8s_manifests
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.plan import monitoring_section
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import rollout, services, system
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.addresses import address_plan, etc_hosts_entries
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_manifest
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.firewall import firewall_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.settings import slurm_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.interfaces import storage_nics
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.plan import storage_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.plan import validation_plan

SCHEMA_VERSION = 1
#: the sections the later stages read (``_needs``)
HEALTH_READS = ("cluster", "hosts", "gpu", "cooling", "fabric")
FILES_READS = ("cluster", "hosts", "time", "gpu", "storage", "fabric", "nccl", "slurm", "fabric_host", "containers")
K8S_READS = ("cluster", "hosts", "gpu", "power", "storage", "fabric", "nccl", "tenants", "fabric_host", "containers")
HEALING_READS = ("cluster", "validation", "health", "fabric", "rollout")
MONITORING_READS = ("cluster", "hosts", "gpu", "cooling", "storage", "fabric", "dcgm", "healing")


def _needs(plan: Mapping[str, Any], *sections: str) -> Mapping[str, Any]:
    """The earlier sections a stage reads, read-only: a stage never writes into another's section, and a
    section it reads before its stage has run is a KeyError here (the order below is the dependency order)."""
    return MappingProxyType({name: plan[name] for name in sections})


def cluster_plan(
    site_vars: dict[str, Any], groups: dict[str, list[str]], role_files: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The whole plan. ``site_vars``: the ``gpucluster_*`` variables; ``groups``: inventory groups;
    ``role_files``: each role's file list (roles/<role>/vars/files.yml, read by the cluster_plan
    filter), for the per-host ``files`` (without them every host's list is empty).

    A pipeline in dependency order: each stage gets the site model and the earlier results it reads
    (``_needs``: those sections, read-only) and returns its own section; no stage patches another's."""
    site = load_site(site_vars, groups)  # every field checked, optional fields defaulted (inventory/site.py)
    tier = tiers.tier_profile(site.tier)
    nodes = len(site.compute_hosts)
    # the site's GPU: the catalog entry with the site's readings for limits the catalog has no source for
    model = gpu_limits.apply_gpu_limits(catalog.gpu_model(site.node.gpu_model), site.node.gpu_limits)
    # the per-GPU limit the policy asks for, before any rack budget (the power plan and the clocks read it)
    requested = clocks.requested_power_limit(model, site.policy_model.clock_policy, site.policy_model.power_cap_w)
    pw, limit = site_power_plan(site, model, requested)  # decides the GPU power limit (rack budget vs. policy)
    link = intra_node(model, site.node.gpus_per_node, site.node.pcie_gen)  # how a node's GPUs meet
    fab = fabric_plan(site)
    addresses = address_plan(
        pools=site.network,
        hosts=[{"name": h.name, "roles": h.roles, "storage_nics": storage_nics(site, h.roles)} for h in site.hosts],
        rails=fab["rails"] if fab["type"] != "none" else 0,
    )
    nccl = nccl_plan(site, fab, link)
    gpu = gpu_plan(site, model, requested, limit, link, fab, nccl["enabled"])  # applies the limit: -pl, DCGM, alert
    storage = storage_plan(site, tier, nodes, addresses)
    hosts = system.hosts_plan(site, addresses, fab)
    # every address on one interface; every address a client mounts or peers with on its server
    system.check_addresses(hosts, storage)
    plan: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "cluster": system.cluster_section(site),
        "tier": tiers.tier_as_dict(tier),
        "hosts": hosts,
        "network": {k: v for k, v in addresses.items() if k != "hosts"},
        "firewall": firewall_plan(addresses, site.scheduler),
        "etc_hosts": etc_hosts_entries(addresses, site.domain),
        "time": system.time_plan(site, addresses),
        "gpu": gpu,
        "power": pw,
        "cooling": site_cooling(site, pw),
        "storage": storage,
        "fabric": fab,
        "nccl": nccl,
        "parallelism": site_parallelism(site, gpu),
    }
    # the stages that read earlier sections, in dependency order, one a line
    plan["validation"] = validation_plan(site, tier, _needs(plan, "cluster", "hosts", "gpu", "storage", "fabric"))
    plan["ups"] = ups.ups_plan(site.facility_model.ups, pw, plan["cluster"])  # runtime vs shutdown
    plan["tenants"] = tenants.tenants_plan(site.tenants, plan["cluster"]["gpus_total"])
    # the health check before Slurm: slurm.conf's Epilog=/Prolog= are its programs (plan["health"]["modes"])
    plan["health"] = health.health_config(_needs(plan, *HEALTH_READS), site.slurm_health)
    plan["slurm"] = slurm_plan(site, _needs(plan, "cluster", "hosts", "gpu", "cooling", "fabric", "tenants", "health"))
    plan["dcgm"] = dcgm.dcgm_policy(_needs(plan, "gpu"))  # the exporter's counters: the dashboards read them
    plan["rollout"] = rollout.rollout_plan(site.rollout)
    plan["healing"] = healing_plan(_needs(plan, *HEALING_READS), site.healing)
    plan["monitoring"] = monitoring_section(_needs(plan, *MONITORING_READS))
    plan["fabric_host"] = fabric_host.host_plan(
        fab, head=site.head, compute_hosts=site.compute_hosts, compute_nics=[vars(n) for n in site.node.compute_nics]
    )
    # training jobs in containers: the runtime, and the mounts, environment and devices of every job container
    plan["containers"] = containers.containers_plan(
        site.containers,
        scheduler=plan["cluster"]["scheduler"],
        storage=storage,
        nccl_conf=nccl["conf"],
        gpus_per_node=site.node.gpus_per_node,
        fabric_type=fab["type"],
        lab=plan["cluster"]["lab"],
    )
    plan["files"] = files_manifest(_needs(plan, *FILES_READS), role_files)
    plan["fabric_tco"] = fabric_tco.plan_fabric_tco(site, fab)  # InfiniBand vs RoCEv2 over N years
    plan["services"] = services.services_plan(_needs(plan, "cluster", "hosts", "gpu", "slurm"))  # units per host
    # the systems the roles support, and the floors every host must meet: playbooks/preflight.yml checks
    # each host's facts against it before any change (inventory/support.py)
    plan["support"] = support.support_matrix()
    if plan["cluster"]["scheduler"] == "kubernetes":  # the Kubernetes path only: Slurm plans stay as they are
        plan["kubernetes"] = k8s_manifests.kubernetes_plan(
            _needs(plan, *K8S_READS), node_resources(site.node), site.facility_model.cooling
        )
    return plan


__all__ = ["PlanError", "cluster_plan", "files_manifest"]
