"""The one entry point: the whole cluster plan from the inventory.

``cluster_plan(site_vars, groups)`` takes the inventory's ``gpucluster_*`` variables and
its groups, checks them (inventory/site.py), answers every question of the design
(tier, GPU clocks and power, rack power, cooling, storage sizing, Lustre, NCCL,
parallelism, addresses, fabric, validation floors, host settings) and returns one
JSON-serialisable dict. It does no I/O; filters, modules and the CLI call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist, ibfabric
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import (
    bringup,
    clocks,
    containers,
    cooling,
    dcgm,
    healing,
    health,
    interconnect,
    mig,
    nccl,
    parallelism,
    power,
    ups,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import fabric_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import tco as fabric_tco
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.cabling import site_cabling, slurm_topology
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import (
    catalog,
    gpu_limits,
    support,
    tenants,
    tiers,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site, load_site
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes import manifests as k8s_manifests
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import dashboards, slurm_queue
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.prometheus import monitoring_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import rollout, system
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.addresses import address_plan, etc_hosts_entries
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import NCCL_TOPO_FILE, files_manifest
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.firewall import firewall_plan, host_policy
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.settings import slurm_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import (
    beegfs,
    checkpoint,
    lustre,
    lustre_targets,
    nfs,
    nvmeof,
    raid,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.format_permission import host_devices
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import (
    DATA_SERVERS,
    local_ceiling,
    local_raid_plan,
    protected_capacity,
    server_links,
    storage_ceiling,
    storage_check,
    storage_sizing,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import acceptance
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.floors import validation_floors

SCHEMA_VERSION = 1


def _gpu(
    site: Site,
    model: catalog.GpuModel,
    requested: tuple[int, str],
    limit: power.PowerLimit,
    link: interconnect.IntraNode,
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


def _power(site: Site, model: catalog.GpuModel, requested: tuple[int, str]) -> tuple[dict[str, Any], power.PowerLimit]:
    """Node/rack power at the applied GPU limit: the policy's limit (``requested``), lowered when the rack
    cannot hold it. This is where the GPU power limit is decided (the PowerLimit returned); _gpu applies it."""
    fac = site.facility_model
    p = "gpucluster_facility"
    return power.power_plan(
        nodes=len(site.compute_hosts),
        gpus_per_node=site.node.gpus_per_node,
        gpu_power_w=requested[0],
        gpu_power_source=requested[1],
        gpu_default_w=model.power_default_w,
        gpu_min_w=model.power_min_w,
        gpu_max_w=model.power_max_w,
        base_power_w=site.node.base_power_w,
        racks=check_range(fac.racks, f"{p}.racks", 1, 10000, integer=True),
        rack_budget_kw=fac.rack_power_budget_kw,
        pdu_rating_kw=fac.pdu_rating_kw,
        breaker_amps=fac.breaker_amps,
        circuit_voltage_v=fac.circuit_voltage_v,
        circuit_phases=fac.circuit_phases,
        psu_count=site.node.psu_count,
        psu_rating_w=site.node.psu_rating_w,
        psu_redundancy=site.node.psu_redundancy,
    )


def _cooling(site: Site, pw: Mapping[str, Any]) -> dict[str, Any]:
    """The DLC loop of the fullest rack, sized for the heat it makes at the APPLIED GPU power limit."""
    fac = site.facility_model
    return cooling.dlc_thresholds(
        cooling=fac.cooling,
        heat_load_kw=pw["rack_kw"],
        delta_t_k=fac.coolant_delta_t_k,
        ashrae_class=fac.ashrae_class,
        liquid_fraction=fac.liquid_heat_fraction,
    )


def _storage(site: Site, tier: tiers.TierProfile, nodes: int, addresses: dict[str, Any]) -> dict[str, Any]:
    st, wl = site.storage_model, site.workload_model
    sizing = storage_sizing(
        model_params_b=wl.model_params_b,
        bytes_per_param=wl.checkpoint_bytes_per_param,
        interval_min=wl.checkpoint_interval_min,
        overlap_target=wl.checkpoint_overlap_target,
        write_floor_gbps=tier.storage_write_gbps[0],
        rated_write_gbps=st.rated_write_gbps,
        gpus=nodes * site.node.gpus_per_node,
        gpu_hour_cost_usd=wl.gpu_hour_cost_usd,
        io_wait_fraction=wl.io_wait_fraction,
    )
    out: dict[str, Any] = {
        "type": st.type,
        "paths": dict(st.paths),
        "local_scratch": st.local_scratch,
        "sizing": sizing,
        "check": storage_check(sizing, tier.storage_write_gbps[0], bool(wl.allow_storage_below_need)),
        "floors": {"read_gbps": list(tier.storage_read_gbps), "write_gbps": list(tier.storage_write_gbps)},
    }
    # what the data servers' planned storage interfaces carry (local NVMe: its drives, below): the floors' ceiling
    ceiling = None if st.type == "local_nvme" else _storage_ceiling(site, nodes, addresses)
    if st.type == "lustre":
        out["lustre"] = _lustre(site, addresses)
        out["protection"] = _lustre_protection(out["lustre"])
    elif st.type == "nfs":
        nfs_cfg = dict(st.nfs)
        out["nfs"] = nfs.nfs_plan(
            nfs=nfs_cfg,
            servers=site.hosts_in("nfs_server"),
            lab=site.lab,
            addresses=addresses,
            paths=out["paths"],
            links=nfs.nfs_links(
                nfs_cfg,
                fabric_type=site.fabric_model.type,
                lab=site.in_lab,
                ceiling=ceiling,
            ),
        )
        out["protection"] = _declared_protection("nfs", nfs_cfg, "NFS export")
    elif st.type == "nvmeof":  # tier2 alternative: per-node remote namespaces (storage/nvmeof.py)
        out["nvmeof"] = nvmeof.nvmeof_plan(
            nvmeof=dict(st.nvmeof),
            targets=site.hosts_in("nvmeof_target"),
            clients=site.compute_hosts,
            addresses=addresses,
            lab=site.lab,
            paths=out["paths"],
            domain=site.domain,
            cores=site.node.cores * site.node.threads_per_core,
            inventory_hosts=[h.name for h in site.hosts],
        )
    elif st.type == "beegfs":  # tier3 alternative to Lustre (storage/beegfs.py)
        storage_ifaces = [n.netdev for n in site.node.nics_for("storage")]
        out["beegfs"] = beegfs.beegfs_plan(
            beegfs=dict(st.beegfs),
            mgmtd=site.hosts_in("beegfs_mgmtd"),
            meta=site.hosts_in("beegfs_meta"),
            storage=site.hosts_in("beegfs_storage"),
            addresses=addresses,
            lab=site.lab,
            paths={k: v for k, v in out["paths"].items() if k in ("checkpoints", "datasets", "home")},
            client_interfaces=storage_ifaces or [n.netdev for n in site.node.compute_nics[:1]],
            server_interfaces=_server_interfaces(site),
            rdma=site.fabric_model.type in RDMA_FABRICS,
        )
        out["protection"] = _declared_protection("beegfs", dict(st.beegfs), "BeeGFS targets")
    else:
        out["local_nvme"] = local_raid_plan(
            dict(st.local_nvme),
            out["paths"],
            hosts=site.hosts_in("storage"),
            inventory_hosts=[h.name for h in site.hosts],
        )
        ceiling = local_ceiling(len(out["local_nvme"]["devices"]), site.node.pcie_gen)
    out["ceilings"] = {"read_gbps": ceiling, "write_gbps": ceiling}
    # async checkpoints: local staging and the drain to the shared path (storage/checkpoint.py)
    # the node: its GPUs' host link (PCIe x16 of pcie_gen), its RAM, its storage link (storage NICs, else the
    # first compute NIC that carries LNet/NFS traffic), for the stalls and the pinned buffers
    link_nics = site.node.nics_for("storage") or site.node.compute_nics[:1]
    link_rates = [n.rate_gbps for n in link_nics]
    out["checkpoint_drain"] = checkpoint.checkpoint_drain(
        wl.checkpoint_async,
        storage_type=st.type,
        local_scratch=st.local_scratch,
        sizing=sizing,
        nodes=nodes,
        remote_path=out["paths"].get("checkpoints"),
        shared_roots=st.mount_points,
        lab=site.in_lab,
        gpus_per_node=site.node.gpus_per_node,
        host_link_gbps=interconnect.PCIE_X16_GBS[site.node.pcie_gen],
        host_link=f"PCIe Gen{site.node.pcie_gen} x16, docs/sources.md [S18]",
        node_ram_bytes=site.node.memory_gib * 2**30,
        client_link_gbps=sum(r for r in link_rates if r) / 8 if link_rates and all(link_rates) else None,
    )
    if not wl.allow_storage_below_need:  # the override lets a drain that does not fit through too
        out["check"] += out["checkpoint_drain"]["check"]
    return out


def _lustre(site: Site, addresses: dict[str, Any]) -> dict[str, Any]:
    lu = site.lustre_model
    p = "gpucluster_storage.lustre"
    oss = site.hosts_in("lustre_oss")
    mds = site.hosts_in("lustre_mds")
    require(bool(mds), "groups.lustre_mds", mds, "one host in group lustre_mds when storage is lustre")
    require(bool(oss), "groups.lustre_oss", oss, "at least one host in group lustre_oss when storage is lustre")
    per_oss = check_range(lu.osts_per_oss, f"{p}.osts_per_oss", 1, 256, integer=True)
    ost_count = per_oss * len(oss)
    fsname = str(lu.fsname)
    require(
        fsname.isalnum() and 1 <= len(fsname) <= 8, f"{p}.fsname", fsname, "1 to 8 letters or digits (Lustre fsname)"
    )
    paths = {k: v for k, v in site.storage_model.paths.items() if k in ("checkpoints", "datasets", "home")}
    tunables = lustre.lustre_client_tunables(client_ram_gib=site.node.memory_gib)
    storage_ifaces = [n.netdev for n in site.node.nics_for("storage")]
    lnet_ifaces = storage_ifaces or [n.netdev for n in site.node.compute_nics[:1]]
    net = lu.lnet_net
    # the servers' LNet NICs: their own (lustre.server_interfaces, else gpucluster_storage.server_interfaces),
    # never the clients' names; each NID is the address of its own interface (system.check_addresses)
    server_ifaces = lu.server_interfaces or _server_interfaces(site)
    require(
        isinstance(server_ifaces, list) and bool(server_ifaces) and all(isinstance(i, str) for i in server_ifaces),
        "gpucluster_storage.server_interfaces",
        server_ifaces,
        "a list of the Lustre servers' own storage interface names (their LNet NICs)",
    )
    server_nids: dict[str, list[dict[str, str]]] = {}
    for host in [*mds, *oss]:
        entry = addresses["hosts"][host]
        per_nic = entry.get("storage_interfaces") or {}
        server_nids[host] = [
            {"interface": i, "address": a, "nid": lustre_targets.mgs_nid(a, net)}
            for i in server_ifaces
            if (a := per_nic.get(i) or (entry["management"] if "storage" not in entry else None))
        ]
        if len(server_nids[host]) < len(server_ifaces):  # an LNet NIC without an address: no NID
            missing = [i for i in server_ifaces if i not in {n["interface"] for n in server_nids[host]}]
            raise PlanError(
                f"{p}.server_interfaces",
                missing,
                f"interfaces that {host} has in gpucluster_storage.server_interfaces (they get its storage addresses)",
            )
    mgs_nid = server_nids[mds[0]][0]["nid"]
    allow = lu.allow_format
    require(isinstance(allow, bool), f"{p}.allow_format", allow, "true or false")
    mount_point = lu.mount_point
    protection_warnings: list[str] = []
    targets = lustre_targets.lustre_targets(
        fsname=fsname,
        mds=mds,
        oss=oss,
        mgs_nid=mgs_nid,
        mdt_device=lu.mdt_device,
        ost_devices=lu.ost_devices,
        osts_per_oss=per_oss,
        mdt_devices=lu.mdt_devices,
        protection=lu.protection,
        allow_unprotected=lu.allow_unprotected,
        field=p,
        warnings=protection_warnings,
    )
    # per host: the MDT's path is often OST 0's path on the OSSs (format_permission.py); an array's
    # members and the array itself (/dev/md/<target>) may be listed
    allowed = host_devices(
        lu.allow_format_devices,
        f"{p}.allow_format_devices",
        lustre_targets.planned_devices(targets),
        [h.name for h in site.hosts],
        what=f"Lustre target ({p}.mdt_devices on lustre_mds, {p}.ost_devices on lustre_oss, or their md arrays)",
    )
    return {
        "fsname": fsname,
        "mount_point": mount_point,
        "mgs": mds[0],
        "mds": mds,
        "oss": oss,
        "ost_count": ost_count,
        "osts_per_oss": per_oss,
        "layouts": lustre.lustre_layouts(ost_count=ost_count, paths=paths, overrides=lu.layouts),
        "client_tunables": tunables,
        "set_param_commands": lustre.lctl_set_param_commands(tunables, fsname),
        "lnet": lustre.lnet_config(interfaces=lnet_ifaces, net=net),
        "server_lnet": lustre.lnet_config(interfaces=list(server_ifaces), net=net, field=p),
        "mgs_nid": mgs_nid,
        "server_nids": server_nids,  # per server: one NID per LNet interface, each its own address
        # the mount and its units (storage/lustre.py client_mount: unit name, order, client tunables)
        "client_mount": lustre.client_mount(mgs_nid=mgs_nid, fsname=fsname, mount_point=mount_point, tunables=tunables),
        "targets": targets,
        "protection_warnings": protection_warnings,
        "allow_format": allow,
        "allow_format_devices": allowed,
    }


def _lustre_protection(lplan: dict[str, Any]) -> dict[str, Any]:
    """plan.storage.protection of a Lustre site: the MDT's and the OSTs' levels (storage/raid.py)."""
    parts, counts = {}, {}
    for kind in ("mdt", "ost"):
        mine = [t for ts in lplan["targets"].values() for t in ts if t["kind"] == kind]
        part = dict(mine[0]["protection"], members=len(mine[0]["members"]))
        if mine[0]["array"]:
            part.update({k: mine[0]["array"][k] for k in ("chunk_kib", "usable_devices", "mkfs_options")})
        parts[kind], counts[kind] = part, len(mine)
    out = raid.summary("lustre", parts, lplan["protection_warnings"])
    out["capacity"] = protected_capacity(parts, counts)
    return out


def _declared_protection(kind: str, section: dict[str, Any], what: str) -> dict[str, Any]:
    """plan.storage.protection of an NFS or BeeGFS site: the volume the inventory declares (storage/raid.py)."""
    part = raid.declared_protection(section, f"gpucluster_storage.{kind}", what)
    return raid.summary(kind, {kind: part}, part.pop("warnings"))


def _nccl(site: Site, fab: Mapping[str, Any], link: interconnect.IntraNode) -> dict[str, Any]:
    """/etc/nccl.conf, and NCCL_TOPO_FILE only when the site opts in (gpucluster_node.nccl_topology: file).

    On bare metal NCCL's detection from sysfs sees the real PCIe switches; a file replaces that PCI tree
    (nccl.py), so the reference tiers write none. Inside a node NCCL needs no file: ``intra_node`` says what
    it uses there (``link``: how the node's GPUs reach each other), and what the plan leaves to it.
    """
    intra = nccl.intra_node_transport(link.kind, site.node.gpu_model)
    ftype = fab["type"]
    choice = site.node.nccl_topology
    if ftype == "none":
        return {
            "enabled": False,
            "conf": {},
            "topology": choice,
            "topology_reason": "no multi-node fabric: no /etc/nccl.conf and no NCCL_TOPO_FILE",
            "topology_tree": None,
            "topo_file": None,
            "intra_node": intra,
        }
    topo_file = NCCL_TOPO_FILE if choice == "file" else None
    mgmt_if = site.management_interface
    conf = nccl.nccl_conf(
        fabric_type=ftype,
        topology=fab["topology"],
        compute_hcas=[n.name for n in site.node.compute_nics],
        socket_ifname=mgmt_if,
        nodes=len(site.compute_hosts),
        roce=fab["roce"],
        ib_service_level=(fab["infiniband"] or {}).get("service_level"),
        topo_file=topo_file,
    )
    if fab["roce"]:
        # the ToS the hosts' RoCE setup uses (fabric_host.roce_settings): one value, never two
        conf["NCCL_IB_TC"] = str(fab["roce"]["traffic_class"])
    tree = None
    if topo_file:
        require(
            ftype in RDMA_FABRICS,
            "gpucluster_node.nccl_topology",
            choice,
            "detect when gpucluster_fabric.type is tcp (the file places RDMA NICs)",
        )
        tree = nccl.nccl_topology(
            gpus=[vars(g) for g in site.node.gpus],
            nics=[vars(n) for n in site.node.nics],  # all of them: error fields index gpucluster_node.nics
            fabric_type=ftype,
            pcie_gen=site.node.pcie_gen,
        )
    reason = (
        f"{topo_file} from the inventory's PCIe switches (gpucluster_node.nccl_topology: file)"
        if topo_file
        else "NCCL detects the PCI tree from sysfs (gpucluster_node.nccl_topology: detect); no NCCL_TOPO_FILE"
    )
    return {
        "enabled": True,
        "conf": conf,
        "topology": choice,
        "topology_reason": reason,
        "topology_tree": tree,  # the file's PCI tree (filter nccl_topology_xml renders it)
        "topo_file": topo_file,  # None: no file (the compute role removes a stale one)
        "intra_node": intra,
    }


def _fabric(site: Site) -> dict[str, Any]:
    """The fabric: its type and topology, link rate, rails, subnet manager, RoCE settings and expected cabling."""
    f = site.fabric_model
    p = "gpucluster_fabric"
    ftype, topology = f.type, f.topology
    require(
        ftype != "none" or topology == "none", f"{p}.topology", topology, "none when gpucluster_fabric.type is none"
    )
    require(
        ftype == "none" or len(site.compute_hosts) > 1 or topology != "none",
        f"{p}.topology",
        topology,
        "a switched topology for a fabric",
    )
    nics = site.node.compute_nics
    if ftype != "none":
        require(bool(nics), "gpucluster_node.nics", [], "at least one NIC with purpose compute when there is a fabric")
    rate = f.link_rate_gbps
    cabling = site_cabling(
        site.fabric,  # the switches and spines: fabric/cabling.py checks them
        fabric_type=ftype,
        topology=topology if ftype in RDMA_FABRICS else "none",
        compute_hosts=site.compute_hosts,
        rail_hcas=[n.name for n in nics],
        link_rate_gbps=rate,
        link_width=nics[0].width if nics else "4x",
    )
    ib = None
    if ftype == "infiniband":
        ib = fabric_host.infiniband_settings(
            f.infiniband,
            subnet_manager=site.subnet_manager,
            topology=topology,
            subnets=len(ibfabric.subnets(cabling)),
            field=p,
        )
        if ib["subnet_manager"] == "head":  # the SM's ports are cabled like any host's (fabric_host.sm_cabling)
            cabling = fabric_host.sm_cabling(cabling, host=site.head, hcas=ib["sm_hcas"], field=p)
    return {
        "type": ftype,
        "topology": topology,
        "link_rate_gbps": rate,
        "rails": len(nics),
        "subnet_manager": ib["subnet_manager"] if ib else None,
        "infiniband": ib,
        "roce": fabric_host.roce_settings(f.roce, field=f"{p}.roce") if ftype == "roce" else None,
        "cabling": cabling,
        "slurm_topology": slurm_topology(cabling),
    }


def _storage_ceiling(site: Site, nodes: int, addresses: dict[str, Any]) -> dict[str, Any]:
    """What a networked storage type can deliver at most, GB/s (storage/sizing.py): its data servers' planned
    storage interfaces (Lustre: the LNet ones; each card at min(its ports, its PCIe slot)) and the clients' links
    on the storage network."""
    st = site.storage_model
    on_storage = "storage" in addresses["pools"]
    if not on_storage:  # served on the management network: the servers' management interface carries it
        interfaces, field = [site.management_interface], "gpucluster_network.management.interface"
    elif st.type == "lustre" and site.lustre_model.server_interfaces:
        interfaces, field = list(site.lustre_model.server_interfaces), "gpucluster_storage.lustre.server_interfaces"
    else:
        interfaces, field = _server_interfaces(site), site.storage_model.server_interfaces_field
    if on_storage:
        client_nics = site.node.nics_for("storage")
    else:
        client_nics = site.node.nics_for("management") if st.type == "nfs" else site.node.compute_nics[:1]
    rates = [n.rate_gbps for n in client_nics]
    group = DATA_SERVERS[st.type][0]
    return storage_ceiling(
        storage_type=st.type,
        servers=site.hosts_in(group),
        links=server_links(st.server_nics, interfaces),
        clients=nodes,
        client_link_gbps=sum(rates) if rates and all(rates) else None,  # type: ignore[arg-type]
        interfaces_field=field,
    )


def _server_interfaces(site: Site) -> list[str]:
    """The storage servers' storage-network interfaces (gpucluster_storage.server_interfaces; a Lustre
    site's lustre.server_interfaces when only that is set): each gets its own storage address."""
    given, p = site.storage_model.server_interfaces, site.storage_model.server_interfaces_field
    require(
        isinstance(given, list) and all(isinstance(i, str) and i for i in given) and len(set(given)) == len(given),
        p,
        given,
        "a list of the storage servers' storage-network interface names, each once",
    )
    return list(given)


def _storage_nics(site: Site, roles: list[str]) -> list[str]:
    """The interfaces that get a storage address on a host with these roles (plan/addresses.py address_plan)."""
    if "compute" in roles:
        return [n.netdev for n in site.node.nics_for("storage")]
    return _server_interfaces(site) if "storage" in roles else []


def _hosts(site: Site, addresses: Mapping[str, Any], fab: Mapping[str, Any]) -> dict[str, Any]:
    """Per host: its roles, addresses, sysctls, limits, interface units and firewall. On RoCE the rails'
    interface units carry the fabric's MTU too (common role, network.j2)."""
    memlock = site.memlock_kb
    pools = addresses["pools"]
    prefixes = {name: pool["prefixlen"] for name, pool in pools.items() if name != "fabric"}
    if addresses.get("rails"):
        prefixes["rail"] = int(str(addresses["rails"][0]["cidr"]).split("/")[1])
    mgmt_if = site.management_interface
    rail_mtu = fab["roce"]["mtu"] if fab["roce"] else None
    out = {}
    for h in site.hosts:
        if "compute" in h.roles:
            nics = [vars(n) for n in site.node.nics]
            if not any(n["purpose"] == "management" for n in nics):
                nics.append({"netdev": mgmt_if, "purpose": "management", "rail": None})
        else:
            nics = [{"netdev": mgmt_if, "purpose": "management", "rail": None}]
            if "storage" in h.roles:  # a storage server: its own storage interfaces, one address each
                nics += [{"netdev": n, "purpose": "storage", "rail": None} for n in _server_interfaces(site)]
        out[h.name] = {
            "roles": h.roles,
            "addresses": addresses["hosts"][h.name],
            "sysctl": system.sysctls(h.roles),
            "limits": system.limits(h.roles, memlock),
            "network_units": system.network_units(addresses["hosts"][h.name], nics, prefixes, rail_mtu=rail_mtu),
            # its limited ports (management network only) and the cluster networks it accepts
            "firewall": host_policy(h.roles, addresses["hosts"][h.name], addresses),
        }
    return out


def _needs(plan: Mapping[str, Any], *sections: str) -> Mapping[str, Any]:
    """The earlier sections a stage reads, read-only: a stage never writes into another's section, and a
    section it reads before its stage has run is a KeyError here (the order below is the dependency order)."""
    return MappingProxyType({name: plan[name] for name in sections})


def _cluster(site: Site) -> dict[str, Any]:
    nodes = len(site.compute_hosts)
    return {
        "name": site.name,
        "tier": site.tier,
        "domain": site.domain,
        "head": site.head,
        "compute_nodes": nodes,
        "compute_hostlist": hostlist.compress(site.compute_hosts),
        "gpus_per_node": site.node.gpus_per_node,
        "gpus_total": nodes * site.node.gpus_per_node,
        "gpu_model": site.node.gpu_model,
        "lab": site.in_lab,
        "scheduler": site.scheduler,
    }


def _time(site: Site, addresses: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "server": site.head,
        "server_address": addresses["hosts"][site.head]["management"],
        "upstream": list(site.ntp_servers),
        # lab only: containers lack CAP_SYS_TIME, chronyd serves time without setting the clock
        "no_clock_control": site.chrony_no_clock_control,
    }


def _validation(site: Site, tier: tiers.TierProfile, plan: Mapping[str, Any]) -> dict[str, Any]:
    """The acceptance floors, and the tests the validate play runs against them (validation/acceptance.py).

    ``plan``: the sections read (cluster, hosts, gpu, storage, fabric)."""
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
    floors["tests"] = acceptance.acceptance_tests({**plan, "validation": floors})
    return floors


def _monitoring(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The head's Prometheus and Alertmanager (monitoring/prometheus.py), its Slurm queue exporter and the
    Grafana dashboards, which read this section's own thresholds and the DCGM counters.

    ``plan``: the sections read (cluster, hosts, gpu, cooling, storage, fabric, dcgm)."""
    mon = monitoring_plan(plan)
    mon["slurm_queue"] = slurm_queue.slurm_queue_plan({**plan, "monitoring": mon})  # the head's Slurm exporter
    mon["grafana"] = dashboards.grafana_plan({**plan, "monitoring": mon})
    return mon


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
    policy = site.policy_model
    # the site's GPU: the catalog entry with the site's readings for limits the catalog has no source for
    model = gpu_limits.apply_gpu_limits(catalog.gpu_model(site.node.gpu_model), site.node.gpu_limits)
    # the per-GPU limit the policy asks for, before any rack budget (the power plan and the clocks read it)
    requested = clocks.requested_power_limit(model, policy.clock_policy, policy.power_cap_w)
    pw, limit = _power(site, model, requested)  # decides the GPU power limit (rack budget vs. policy)
    link = interconnect.intra_node(model, site.node.gpus_per_node, site.node.pcie_gen)  # how a node's GPUs meet
    fab = _fabric(site)
    addresses = address_plan(
        pools=site.network,
        hosts=[{"name": h.name, "roles": h.roles, "storage_nics": _storage_nics(site, h.roles)} for h in site.hosts],
        rails=fab["rails"] if fab["type"] != "none" else 0,
    )
    nccl_plan = _nccl(site, fab, link)
    gpu = _gpu(site, model, requested, limit, link, fab, nccl_plan["enabled"])  # applies the limit: -pl, DCGM, alert
    storage_plan = _storage(site, tier, len(site.compute_hosts), addresses)
    hosts = _hosts(site, addresses, fab)
    # every address on one interface; every address a client mounts or peers with on its server
    system.check_addresses(hosts, storage_plan)
    wl = site.workload_model
    plan: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "cluster": _cluster(site),
        "tier": tiers.tier_as_dict(tier),
        "hosts": hosts,
        "network": {k: v for k, v in addresses.items() if k != "hosts"},
        "firewall": firewall_plan(addresses, site.scheduler),
        "etc_hosts": etc_hosts_entries(addresses, site.domain),
        "time": _time(site, addresses),
        "gpu": gpu,
        "power": pw,
        "cooling": _cooling(site, pw),
        "storage": storage_plan,
        "fabric": fab,
        "nccl": nccl_plan,
        "parallelism": parallelism.parallelism(
            model_params_b=wl.model_params_b,
            gpus_per_node=site.node.gpus_per_node,
            nodes=len(site.compute_hosts),
            gpu_memory_gb=gpu["model"]["memory_gb"],
            tensor_parallel=wl.tensor_parallel,
            pipeline_parallel=wl.pipeline_parallel,
            nvlink_domain_gpus=gpu["interconnect"]["domain_gpus"],
        ),
    }
    # the stages that read earlier sections, in dependency order
    plan["validation"] = _validation(site, tier, _needs(plan, "cluster", "hosts", "gpu", "storage", "fabric"))
    plan["ups"] = ups.ups_plan(site.facility_model.ups, pw, plan["cluster"])  # runtime vs shutdown
    plan["tenants"] = tenants.tenants_plan(site.tenants, plan["cluster"]["gpus_total"])
    # the health check before Slurm: slurm.conf's Epilog=/Prolog= are its programs (plan["health"]["modes"])
    plan["health"] = health.health_config(
        _needs(plan, "cluster", "hosts", "gpu", "cooling", "fabric"),
        site.slurm_health,
    )
    plan["slurm"] = slurm_plan(site, _needs(plan, "cluster", "hosts", "gpu", "cooling", "fabric", "tenants", "health"))
    plan["dcgm"] = dcgm.dcgm_policy(_needs(plan, "gpu"))  # the exporter's counters: the dashboards read them
    plan["rollout"] = rollout.rollout_plan(site.rollout)
    plan["healing"] = healing.healing_plan(
        _needs(plan, "cluster", "validation", "health", "fabric", "rollout"), site.healing
    )
    plan["monitoring"] = _monitoring(
        _needs(plan, "cluster", "hosts", "gpu", "cooling", "storage", "fabric", "dcgm", "healing")
    )
    plan["fabric_host"] = fabric_host.host_plan(
        fab, head=site.head, compute_hosts=site.compute_hosts, compute_nics=[vars(n) for n in site.node.compute_nics]
    )
    # training jobs in containers: the runtime, and the mounts, environment and devices of every job container
    plan["containers"] = containers.containers_plan(
        site.containers,
        scheduler=plan["cluster"]["scheduler"],
        storage=storage_plan,
        nccl_conf=nccl_plan["conf"],
        gpus_per_node=site.node.gpus_per_node,
        fabric_type=fab["type"],
        lab=plan["cluster"]["lab"],
    )
    plan["files"] = files_manifest(
        _needs(
            plan, "cluster", "hosts", "time", "gpu", "storage", "fabric", "nccl", "slurm", "fabric_host", "containers"
        ),
        role_files,
    )
    plan["fabric_tco"] = fabric_tco.plan_fabric_tco(site, fab)  # InfiniBand vs RoCEv2 over N years
    # the systems the roles support, and the floors every host must meet: playbooks/preflight.yml checks
    # each host's facts against it before any change (inventory/support.py)
    plan["support"] = support.support_matrix()
    if plan["cluster"]["scheduler"] == "kubernetes":  # the Kubernetes path only: Slurm plans stay as they are
        plan["kubernetes"] = k8s_manifests.kubernetes_plan(
            _needs(
                plan,
                *("cluster", "hosts", "gpu", "power", "storage", "fabric", "nccl", "tenants", "slurm"),
                *("fabric_host", "containers"),
            ),
            cooling=site.facility_model.cooling,
            memory_mib=int(site.node.memory_gib * 1024),
        )
    return plan


__all__ = ["PlanError", "cluster_plan", "files_manifest"]
