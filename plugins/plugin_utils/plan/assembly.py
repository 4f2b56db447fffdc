"""The one entry point: the whole cluster plan from the inventory.

``cluster_plan(site_vars, groups)`` takes the inventory's ``gpucluster_*`` variables and
its groups, checks them (inventory/site.py), answers every question of the design
(tier, GPU clocks and power, rack power, cooling, storage sizing, Lustre, NCCL,
parallelism, addresses, fabric, validation floors, host settings) and returns the
``Plan`` (plan/model.py: JSON data). It does no I/O; filters, modules and the CLI call it.

Wiring only: each stage is a function of its domain package, which owns its rules and their checks.
"""

from __future__ import annotations

from typing import Any, Unpack

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import clocks
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.containers import containers_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.cooling import site_cooling
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.dcgm import dcgm_policy
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.gpu import gpu_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.healing import healing_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import health_config
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import intra_node
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import nccl_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.node import node_resources
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.parallelism import site_parallelism
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import site_power_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.ups import ups_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import tco as fabric_tco
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.fabric_host import host_plan as fabric_host_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.plan import fabric_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog, gpu_limits, tiers
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import load_site
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.support import support_matrix
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tenants import tenants_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.manifests import kubernetes_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.plan import monitoring_section
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import system
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.addresses import address_plan, etc_hosts_entries
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_manifest
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.firewall import firewall_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan, PlanView
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.rollout import rollout_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.services import services_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.settings import slurm_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.interfaces import storage_nics
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.plan import storage_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.plan import validation_plan

SCHEMA_VERSION = 2  # 2: plan.files holds the rules, not each host's list (plan/files.py)


def _needs(**sections: Unpack[PlanView]) -> PlanView:
    """The earlier sections a stage reads, by name (mypy checks each against ``Plan``): the stage gets those
    alone, in a dict of its own (writing into it changes no section of the plan)."""
    return sections


def cluster_plan(
    site_vars: dict[str, Any], groups: dict[str, list[str]], role_files: dict[str, Any] | None = None
) -> Plan:
    """The whole plan. ``site_vars``: the ``gpucluster_*`` variables; ``groups``: inventory groups;
    ``role_files``: each role's file list (roles/<role>/vars/files.yml, read by the cluster_plan
    filter), for the per-host ``files`` (without them every host's list is empty).

    A pipeline in dependency order: each stage gets the site model and the earlier sections it reads
    (``_needs``) and returns its own section; no stage patches another's. One ``Plan`` at the end."""
    site = load_site(site_vars, groups)  # every field checked, optional fields defaulted (inventory/site.py)
    profile = tiers.tier_profile(site.tier)
    # the site's GPU: the catalog entry with the site's readings for limits the catalog has no source for
    model = gpu_limits.apply_gpu_limits(catalog.gpu_model(site.node.gpu_model), site.node.gpu_limits)
    # the per-GPU limit the policy asks for, before any rack budget (the power plan and the clocks read it)
    requested = clocks.requested_power_limit(model, site.policy_model.clock_policy, site.policy_model.power_cap_w)
    power, limit = site_power_plan(site, model, requested)  # decides the GPU power limit (rack budget vs. policy)
    link = intra_node(model, site.node.gpus_per_node, site.node.pcie_gen)  # how a node's GPUs meet
    fabric = fabric_plan(site)
    addresses = address_plan(
        pools=site.network,
        hosts=[{"name": h.name, "roles": h.roles, "storage_nics": storage_nics(site, h.roles)} for h in site.hosts],
        rails=fabric["rails"] if fabric["type"] != "none" else 0,
    )
    nccl = nccl_plan(site, fabric, link)
    gpu = gpu_plan(site, model, requested, limit, link, fabric, nccl["enabled"])  # applies the limit: -pl, DCGM
    storage = storage_plan(site, profile, len(site.compute_hosts), addresses)
    hosts = system.hosts_plan(site, addresses, fabric)
    # every address on one interface; every address a client mounts or peers with on its server
    system.check_addresses(hosts, storage)
    # the sections in the plan's order, each from the site and the earlier sections it reads (``_needs``)
    cluster = system.cluster_section(site)
    firewall = firewall_plan(addresses, site.scheduler)
    etc_hosts = etc_hosts_entries(addresses, site.domain)
    time = system.time_plan(site, addresses)
    cooling = site_cooling(site, power)
    parallelism = site_parallelism(site, gpu)
    validation = validation_plan(site, profile, _needs(cluster=cluster, hosts=hosts, gpu=gpu, storage=storage,
                                                       fabric=fabric))  # fmt: skip
    ups = ups_plan(site.facility_model.ups, power, cluster)  # runtime vs shutdown
    tenants = tenants_plan(site.tenants, cluster["gpus_total"])
    # the health check before Slurm: slurm.conf's Epilog=/Prolog= are its programs (health["modes"])
    health = health_config(
        _needs(cluster=cluster, hosts=hosts, gpu=gpu, cooling=cooling, fabric=fabric), site.slurm_health
    )
    slurm = slurm_plan(site, _needs(cluster=cluster, hosts=hosts, gpu=gpu, cooling=cooling, fabric=fabric,
                                    tenants=tenants, health=health))  # fmt: skip
    dcgm = dcgm_policy(_needs(gpu=gpu))  # the exporter's counters: the dashboards read them
    rollout = rollout_plan(site.rollout)
    healing = healing_plan(_needs(cluster=cluster, validation=validation, health=health, fabric=fabric,
                                  rollout=rollout), site.healing)  # fmt: skip
    monitoring = monitoring_section(_needs(cluster=cluster, hosts=hosts, gpu=gpu, cooling=cooling, storage=storage,
                                           fabric=fabric, dcgm=dcgm, healing=healing))  # fmt: skip
    fabric_host = fabric_host_plan(
        fabric, head=site.head, compute_hosts=site.compute_hosts, compute_nics=[vars(n) for n in site.node.compute_nics]
    )
    # training jobs in containers: the runtime, and the mounts, environment and devices of every job container
    containers = containers_plan(site.containers, scheduler=cluster["scheduler"], storage=storage,
                                 nccl_conf=nccl["conf"], gpus_per_node=site.node.gpus_per_node,
                                 fabric_type=fabric["type"], lab=cluster["lab"])  # fmt: skip
    files = files_manifest(_needs(cluster=cluster, hosts=hosts, time=time, gpu=gpu, storage=storage, fabric=fabric,
                                  nccl=nccl, slurm=slurm, fabric_host=fabric_host, containers=containers),
                           role_files)  # fmt: skip
    costs = fabric_tco.plan_fabric_tco(site, fabric)  # InfiniBand vs RoCEv2 over N years
    services = services_plan(_needs(cluster=cluster, hosts=hosts, gpu=gpu, monitoring=monitoring, slurm=slurm))
    # the systems the roles support, and the floors every host must meet: playbooks/preflight.yml checks
    # each host's facts against it before any change (inventory/support.py)
    support = support_matrix()
    plan = Plan(
        schema=SCHEMA_VERSION, cluster=cluster, tier=tiers.tier_as_dict(profile), hosts=hosts,
        network={"pools": addresses["pools"], "rails": addresses["rails"]}, firewall=firewall, etc_hosts=etc_hosts,
        time=time, gpu=gpu, power=power, cooling=cooling, storage=storage, fabric=fabric, nccl=nccl,
        parallelism=parallelism, validation=validation, ups=ups, tenants=tenants, health=health, slurm=slurm,
        dcgm=dcgm, rollout=rollout, healing=healing, monitoring=monitoring, fabric_host=fabric_host,
        containers=containers, files=files, fabric_tco=costs, services=services, support=support,
    )  # fmt: skip
    if cluster["scheduler"] == "kubernetes":  # the Kubernetes path only: Slurm plans stay as they are
        plan["kubernetes"] = kubernetes_plan(
            _needs(cluster=cluster, hosts=hosts, gpu=gpu, power=power, storage=storage, fabric=fabric, nccl=nccl,
                   tenants=tenants, fabric_host=fabric_host, containers=containers),
            node_resources(site.node), site.facility_model.cooling,
        )  # fmt: skip
    return plan


__all__ = ["PlanError", "cluster_plan", "files_manifest"]
