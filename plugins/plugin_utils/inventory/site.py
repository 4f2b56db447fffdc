"""Read and check what a site HAS: the inventory's ``gpucluster_*`` variables and groups.

This is the engine's only entry for raw inventory data, and its one boundary from raw to typed: it checks
every field the plan needs (presence, type, range) and returns a :class:`Site` of plain dataclasses
(inventory/site_model.py); every error is a :class:`PlanError` naming the inventory field, so a bad
inventory stops the plan play before any host is contacted. The defaults of optional fields are set here,
once, by the model's classes: the engine (plan/assembly.py) reads those, and never writes a
``.get(key, default)`` of its own; tier-dependent numbers come from the tier profile (tiers.py). The
sections a domain module checks itself (Slurm's, the tenants', the containers', the rollout's, the costs')
are Site fields of free JSON as written; a Site keeps no other raw inventory (no engine module can read
past the model).

The readers: :func:`load_site` section by section here, the node in node.py, the host variables (a check
of every host's own, not of the site) in host_variables.py. Their names stay importable from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import (
    CLOCK_POLICIES,
    COMPUTE,
    FABRIC_TYPES,
    HEAD,
    ROLE_GROUPS,
    SLURM_BACKUP,
    STORAGE,
    STORAGE_GROUPS,
    STORAGE_TYPES,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_choice, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.fields import (
    get,
    given,
    json_value,
    opt_flag,
    opt_integer,
    opt_mapping,
    opt_mappings,
    opt_number,
    opt_text,
    opt_texts,
    section,
    text,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.host_variables import (
    COMMAND_LINE_ONLY,
    PREFIX,
    RUN_PREFIXES,
    check_host_variables,
    variables_to_check,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.node import (
    PCI_BUS,
    check_gpu_nic_pairing,
    read_node,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.rules import check_rules
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import check_inventory
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site_model import (
    Fabric,
    Facility,
    Gpu,
    GpuPolicy,
    Host,
    Lustre,
    Nic,
    Node,
    Site,
    Storage,
    Workload,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tenants import scheduler as cluster_scheduler
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import tier_profile
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.values import check_secrets, check_values

HOSTNAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
#: The fields of ``gpucluster_fabric`` that describe its switch tree: fabric/cabling.py checks them as written.
FABRIC_TREE = ("switch_radix", "switch_model", "spines", "spine_scope", "oversubscription", "min_spines")


def hosts_from_groups(groups: Mapping[str, list[str]]) -> list[Host]:
    """Hosts in plan order (head, storage, compute; each by name); roles from the groups.

    A host in several groups (tier1's single server) appears once with all its roles.
    Hosts of :data:`STORAGE_GROUPS` (nfs_server, lustre_*, nvmeof_target, beegfs_*) are storage hosts too.
    """
    roles: dict[str, list[str]] = {}
    known = {name for group in ROLE_GROUPS for name in groups.get(group) or []}
    everyone = groups.get("all") or sorted({name for hosts in groups.values() for name in hosts or []})
    lost = sorted(str(name) for name in everyone if name not in known)
    require(
        not lost,
        "groups",
        lost,
        f"every host in at least one of the groups {', '.join(ROLE_GROUPS)} (a host in no known group would be"
        " contacted by site.yml without a role or plan)",
    )
    for group in ROLE_GROUPS:
        for name in sorted(groups.get(group) or []):
            require(
                bool(HOSTNAME.match(str(name))),
                f"groups.{group}",
                name,
                "a host name of lowercase letters, digits and '-' (it becomes a Slurm node and DNS name)",
            )
            entry = roles.setdefault(name, [])
            if group not in entry:
                entry.append(group)
            if group in STORAGE_GROUPS and STORAGE not in entry:
                entry.append(STORAGE)
    require(bool(groups.get(HEAD)), "groups.head", groups.get(HEAD), "exactly one host in group 'head'")
    require(len(groups.get(HEAD) or []) == 1, "groups.head", groups.get(HEAD), "exactly one host in group 'head'")
    require(bool(groups.get(COMPUTE)), "groups.compute", groups.get(COMPUTE), "at least one compute host")
    for name in groups.get(SLURM_BACKUP) or []:
        require(
            name not in (groups.get(HEAD) or []) and name not in (groups.get(COMPUTE) or []),
            "groups.slurm_backup",
            name,
            "a host of its own, in neither group head nor compute (the head is the primary controller)",
        )
    # a backup controller is planned last (after compute): adding one to a running site moves no address
    rank = {g: i for i, g in enumerate((HEAD, STORAGE, COMPUTE, SLURM_BACKUP))}

    def order(item: tuple[str, list[str]]) -> tuple[int, str]:
        name, host_roles = item
        return (min(rank.get(r, 1) for r in host_roles), name)

    return [Host(name, sorted(r)) for name, r in sorted(roles.items(), key=order)]


def load_site(raw: Mapping[str, object], groups: dict[str, list[str]]) -> Site:
    """Check the inventory and return a :class:`Site`; raise PlanError on the first bad field."""
    require(isinstance(raw, dict), "gpucluster_*", type(raw).__name__, "a mapping of the gpucluster_* variables")
    _check_inventory(raw, groups)
    cluster = section(raw, "gpucluster_cluster")
    name = text(cluster, "gpucluster_cluster", "name")
    require(
        bool(re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z", name)),
        "gpucluster_cluster.name",
        name,
        "letters, digits, '.', '_' and '-' (it names build/plan/<name>)",
    )
    node = read_node(raw)
    fabric = section(raw, "gpucluster_fabric")
    fabric_type = check_choice(get(fabric, "gpucluster_fabric", "type"), "gpucluster_fabric.type", FABRIC_TYPES)
    tier = text(cluster, "gpucluster_cluster", "tier")
    check_gpu_nic_pairing(node, tier, fabric_type)
    storage = section(raw, "gpucluster_storage")
    storage_type = check_choice(get(storage, "gpucluster_storage", "type"), "gpucluster_storage.type", STORAGE_TYPES)
    policy = section(raw, "gpucluster_gpu_policy", required=False)
    clock_policy = check_choice(
        policy.get("clock_policy", GpuPolicy.clock_policy), "gpucluster_gpu_policy.clock_policy", CLOCK_POLICIES
    )
    domain = text(cluster, "gpucluster_cluster", "domain", "cluster.internal")
    hosts = hosts_from_groups(groups)
    facility = section(raw, "gpucluster_facility")
    network = section(raw, "gpucluster_network")
    workload = section(raw, "gpucluster_workload")
    lab = section(raw, "gpucluster_lab", required=False)
    slurm = json_value(raw.get("gpucluster_slurm"), "gpucluster_slurm")
    ntp = network.get("ntp_servers") or []
    return Site(
        name=name,
        tier=tier,
        domain=domain,
        hosts=hosts,
        node=node,
        network=network,
        lab=lab,
        # the optional fields' defaults, once, here (the engine reads these, never a section with its own default)
        facility_model=_facility(facility),
        workload_model=_workload(workload),
        lustre_model=_lustre(storage),
        # the tier's profile first (an unknown tier names gpucluster_cluster.tier before any later field)
        fabric_model=_fabric_model(fabric, fabric_type, tier, node),
        storage_model=_storage_model(storage, storage_type),
        policy_model=_policy(policy, clock_policy),
        scheduler=cluster_scheduler(cluster),
        ntp_servers=[str(server) for server in ntp] if isinstance(ntp, list) else [],
        tenants=json_value(raw.get("gpucluster_tenants"), "gpucluster_tenants"),
        slurm=slurm,
        slurm_health=slurm.get("health") if isinstance(slurm, dict) else None,
        containers=json_value(raw.get("gpucluster_containers"), "gpucluster_containers"),
        rollout=json_value(raw.get("gpucluster_rollout"), "gpucluster_rollout"),
        healing=json_value(raw.get("gpucluster_healing"), "gpucluster_healing"),
        costs=json_value(raw.get("gpucluster_costs"), "gpucluster_costs"),
    )


def _check_inventory(raw: Mapping[str, object], groups: dict[str, list[str]]) -> None:
    """The checks of the whole inventory, in their order, before any section is read."""
    # a secret (a token, a key) anywhere in the site variables first, before any check echoes a value
    check_secrets(raw)
    # types, closed sections and string forms first (schema_v1.json); ranges and cross-field rules below
    check_inventory(raw)
    # values that have their form but cannot be meant (reserved names, system folders, special networks,
    # impossible nodes), before any rule derives a value from them: the error names the field written
    known = {str(h) for g in ROLE_GROUPS for h in groups.get(g) or []}
    storage = {str(h) for g in (STORAGE, *STORAGE_GROUPS, COMPUTE) for h in groups.get(g) or []}
    check_values(raw, groups, hosts=sorted(known), storage_hosts=len(storage))
    # values valid alone and wrong together or in scale (issue 40): before any rule derives a value from them
    check_rules(raw, groups)


def _facility(sec: Mapping[str, JsonValue]) -> Facility:
    """``gpucluster_facility`` with its defaults (the PDU's rating: the rack's power budget)."""
    p = "gpucluster_facility"
    budget = opt_number(sec, p, "rack_power_budget_kw")
    return Facility(
        rack_power_budget_kw=budget,
        breaker_amps=opt_number(sec, p, "breaker_amps"),
        circuit_voltage_v=opt_number(sec, p, "circuit_voltage_v"),
        racks=given(opt_integer(sec, p, "racks"), Facility.racks),
        pdu_rating_kw=opt_number(sec, p, "pdu_rating_kw") if "pdu_rating_kw" in sec else budget,
        circuit_phases=given(opt_integer(sec, p, "circuit_phases"), Facility.circuit_phases),
        cooling=given(opt_text(sec, p, "cooling"), Facility.cooling),
        coolant_delta_t_k=given(opt_number(sec, p, "coolant_delta_t_k"), Facility.coolant_delta_t_k),
        ashrae_class=given(opt_text(sec, p, "ashrae_class"), Facility.ashrae_class),
        liquid_heat_fraction=given(opt_number(sec, p, "liquid_heat_fraction"), Facility.liquid_heat_fraction),
        ups=opt_mapping(sec, p, "ups"),
    )


def _workload(sec: Mapping[str, JsonValue]) -> Workload:
    """``gpucluster_workload`` with its defaults."""
    p, w = "gpucluster_workload", Workload
    return Workload(
        model_params_b=opt_number(sec, p, "model_params_b"),
        checkpoint_bytes_per_param=given(
            opt_number(sec, p, "checkpoint_bytes_per_param"), w.checkpoint_bytes_per_param
        ),
        checkpoint_interval_min=given(opt_number(sec, p, "checkpoint_interval_min"), w.checkpoint_interval_min),
        checkpoint_overlap_target=given(opt_number(sec, p, "checkpoint_overlap_target"), w.checkpoint_overlap_target),
        gpu_hour_cost_usd=given(opt_number(sec, p, "gpu_hour_cost_usd"), w.gpu_hour_cost_usd),
        io_wait_fraction=given(opt_number(sec, p, "io_wait_fraction"), w.io_wait_fraction),
        allow_storage_below_need=given(opt_flag(sec, p, "allow_storage_below_need"), w.allow_storage_below_need),
        checkpoint_async=opt_mapping(sec, p, "checkpoint_async"),
        tensor_parallel=opt_integer(sec, p, "tensor_parallel"),
        pipeline_parallel=opt_integer(sec, p, "pipeline_parallel"),
    )


def _lustre(storage: Mapping[str, JsonValue]) -> Lustre:
    """``gpucluster_storage.lustre`` with its defaults (the mount point: /lustre/<fsname>); unset: the defaults."""
    sec = storage.get("lustre")
    if not isinstance(sec, dict):
        sec = {}
    p = "gpucluster_storage.lustre"
    fsname = given(opt_text(sec, p, "fsname"), Lustre.fsname)
    return Lustre(
        fsname=fsname,
        lnet_net=given(opt_text(sec, p, "lnet_net"), Lustre.lnet_net),
        allow_format=given(opt_flag(sec, p, "allow_format"), Lustre.allow_format),
        mount_point=opt_text(sec, p, "mount_point") if "mount_point" in sec else f"/lustre/{fsname}",
        osts_per_oss=opt_integer(sec, p, "osts_per_oss"),
        server_interfaces=opt_texts(sec, p, "server_interfaces"),
        mdt_device=opt_text(sec, p, "mdt_device"),
        mdt_devices=opt_texts(sec, p, "mdt_devices"),
        ost_devices=opt_texts(sec, p, "ost_devices"),
        protection=opt_mapping(sec, p, "protection"),
        allow_unprotected=given(opt_flag(sec, p, "allow_unprotected"), Lustre.allow_unprotected),
        allow_format_devices=opt_texts(sec, p, "allow_format_devices"),
        layouts=opt_mapping(sec, p, "layouts"),
    )


def _policy(sec: Mapping[str, JsonValue], clock_policy: str) -> GpuPolicy:
    """``gpucluster_gpu_policy`` (its clock policy checked) with its defaults."""
    p = "gpucluster_gpu_policy"
    return GpuPolicy(
        clock_policy=clock_policy,
        sm_mhz=opt_integer(sec, p, "sm_mhz"),
        mem_mhz=opt_integer(sec, p, "mem_mhz"),
        power_cap_w=opt_number(sec, p, "power_cap_w"),
        mig=opt_mappings(sec, p, "mig"),
    )


def _storage_model(storage: Mapping[str, JsonValue], storage_type: str) -> Storage:
    """``gpucluster_storage`` (type checked) with its defaults."""
    p = "gpucluster_storage"
    servers, servers_field = opt_texts(storage, p, "server_interfaces"), f"{p}.server_interfaces"
    if servers is None:  # a Lustre site may name them in its lustre section only
        lustre = storage.get("lustre")
        servers = (opt_texts(lustre, f"{p}.lustre", "server_interfaces") if isinstance(lustre, dict) else None) or []
        servers_field = f"{p}.lustre.server_interfaces"
    own = storage.get(storage_type)
    kind = own if isinstance(own, dict) else {}
    exports = kind.get("exports") or []
    mounts = [e.get("mount_point") for e in exports if isinstance(e, dict)] if isinstance(exports, list) else []
    mounts.append(kind.get("mount_point"))
    paths = opt_mapping(storage, p, "paths") or {}
    return Storage(
        type=storage_type,
        rated_write_gbps=opt_number(storage, p, "rated_write_gbps"),
        paths={key: str(value) for key, value in paths.items()},
        local_scratch=opt_text(storage, p, "local_scratch"),
        server_interfaces=servers,
        server_interfaces_field=servers_field,
        server_nics=opt_mapping(storage, p, "server_nics"),
        mount_points=tuple(m for m in mounts if isinstance(m, str)),
        local_nvme=dict(opt_mapping(storage, p, "local_nvme") or {}),
        nfs=dict(opt_mapping(storage, p, "nfs") or {}),
        nvmeof=dict(opt_mapping(storage, p, "nvmeof") or {}),
        beegfs=dict(opt_mapping(storage, p, "beegfs") or {}),
    )


def _fabric_model(fabric: Mapping[str, JsonValue], fabric_type: str, tier: str, node: Node) -> Fabric:
    """``gpucluster_fabric`` (type checked) with its defaults: the topology of the tier (an unknown tier is
    an error naming gpucluster_cluster.tier), the link rate of the first compute NIC."""
    profile = tier_profile(tier)
    nics = node.compute_nics
    p = "gpucluster_fabric"
    return Fabric(
        type=fabric_type,
        topology=opt_text(fabric, p, "topology") or ("none" if fabric_type == "none" else profile.topology),
        # the class default (4x NDR, docs/sources.md [IV6]) when neither the fabric nor the NICs give a rate
        link_rate_gbps=opt_number(fabric, p, "link_rate_gbps")
        or (nics[0].rate_gbps if nics else None)
        or Fabric.link_rate_gbps,
        subnet_manager=given(opt_text(fabric, p, "subnet_manager"), Fabric.subnet_manager),
        infiniband=opt_mapping(fabric, p, "infiniband"),
        roce=opt_mapping(fabric, p, "roce"),
        tree={key: fabric[key] for key in FABRIC_TREE if key in fabric},
    )


__all__ = [
    "COMMAND_LINE_ONLY",
    "FABRIC_TREE",
    "HOSTNAME",
    "PCI_BUS",
    "PREFIX",
    "RUN_PREFIXES",
    "Fabric",
    "Facility",
    "Gpu",
    "GpuPolicy",
    "Host",
    "Lustre",
    "Nic",
    "Node",
    "Site",
    "Storage",
    "Workload",
    "check_host_variables",
    "hosts_from_groups",
    "load_site",
    "variables_to_check",
]
