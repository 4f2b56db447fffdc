"""The one entry point: the whole cluster plan from the inventory.

``cluster_plan(site_vars, groups)`` takes the inventory's ``gpucluster_*`` variables and
its groups, checks them (:mod:`inventory`), answers every question of the design
(tier, GPU clocks and power, rack power, cooling, storage sizing, Lustre, NCCL,
parallelism, addresses, fabric, validation floors, host settings) and returns one
JSON-serialisable dict. It does no I/O; filters, modules and the CLI call it.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import (
    catalog,
    clocks,
    cooling,
    fabric,
    hostlist,
    lustre,
    nccl,
    netplan,
    parallelism,
    power,
    report,
    slurm,
    storage,
    system,
    tiers,
    validation,
)
from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError, check_range, require
from ansible_collections.gpucluster.tiers.plugins.module_utils.inventory import Site, load_site

SCHEMA_VERSION = 1
NCCL_TOPO_FILE = "/etc/nccl/topo.xml"


def _gpu(site: Site) -> dict[str, Any]:
    model = catalog.gpu_model(site.node.gpu_model)
    policy = site.gpu_policy
    plan_clocks = clocks.gpu_clocks(
        model,
        policy["clock_policy"],
        sm_mhz=policy.get("sm_mhz"),
        mem_mhz=policy.get("mem_mhz"),
        power_cap_w=policy.get("power_cap_w"),
    )
    temps = cooling.gpu_temperature_thresholds(model, override=site.node.gpu_temp_limits)
    return {"model": catalog.gpu_model_as_dict(model), "clocks": plan_clocks, "temperature": temps}


def _power(site: Site, gpu: dict[str, Any]) -> dict[str, Any]:
    fac, model = site.facility, gpu["model"]
    p = "gpucluster_facility"
    return power.power_budget(
        nodes=len(site.compute_hosts),
        gpus_per_node=site.node.gpus_per_node,
        gpu_power_w=gpu["clocks"]["power_limit_w"],
        gpu_min_w=model["power_min_w"],
        gpu_max_w=model["power_max_w"],
        base_power_w=site.node.base_power_w,
        racks=check_range(fac.get("racks", 1), f"{p}.racks", 1, 10000, integer=True),
        rack_budget_kw=fac.get("rack_power_budget_kw"),
        pdu_rating_kw=fac.get("pdu_rating_kw", fac.get("rack_power_budget_kw")),
        breaker_amps=fac.get("breaker_amps"),
        circuit_voltage_v=fac.get("circuit_voltage_v"),
        circuit_phases=fac.get("circuit_phases", 3),
    )


def _cooling(site: Site, pw: dict[str, Any]) -> dict[str, Any]:
    fac = site.facility
    return cooling.dlc_thresholds(
        cooling=fac.get("cooling", "air"),
        heat_load_kw=pw["rack_kw"],
        delta_t_k=fac.get("coolant_delta_t_k", 10),
        ashrae_class=fac.get("ashrae_class", "W32"),
        liquid_fraction=fac.get("liquid_heat_fraction", 1.0),
    )


def _storage(site: Site, tier: tiers.TierProfile, nodes: int) -> dict[str, Any]:
    st, wl = site.storage, site.workload
    p = "gpucluster_workload"
    sizing = storage.storage_sizing(
        model_params_b=wl.get("model_params_b"),
        bytes_per_param=wl.get("checkpoint_bytes_per_param", 14),
        interval_min=wl.get("checkpoint_interval_min", 30),
        overlap_target=wl.get("checkpoint_overlap_target", 0.10),
        write_floor_gbps=tier.storage_write_gbps[0],
        rated_write_gbps=st.get("rated_write_gbps"),
        gpus=nodes * site.node.gpus_per_node,
        gpu_hour_cost_usd=wl.get("gpu_hour_cost_usd", 4.0),
        io_wait_fraction=wl.get("io_wait_fraction", 0.2),
    )
    out: dict[str, Any] = {
        "type": st["type"],
        "paths": dict(st.get("paths") or {}),
        "local_scratch": st.get("local_scratch"),
        "sizing": sizing,
        "check": storage.storage_check(
            sizing, tier.storage_write_gbps[0], bool(wl.get("allow_storage_below_need", False))
        ),
        "floors": {"read_gbps": list(tier.storage_read_gbps), "write_gbps": list(tier.storage_write_gbps)},
    }
    if st["type"] == "lustre":
        out["lustre"] = _lustre(site)
    elif st["type"] == "nfs":
        nfs = dict(st.get("nfs") or {})
        impl = site.lab.get("nfs_server_impl") or nfs.get("server_impl", "kernel")
        require(impl in ("kernel", "ganesha"), f"{p}.nfs.server_impl", impl, "kernel or ganesha")
        servers = site.hosts_in("nfs_server")
        require(bool(servers), "groups.nfs_server", servers, "one host in group nfs_server when storage is nfs")
        out["nfs"] = {"server": servers[0], "server_impl": impl, "exports": nfs.get("exports") or []}
    else:
        out["local_nvme"] = dict(st.get("local_nvme") or {})
    return out


def _lustre(site: Site) -> dict[str, Any]:
    lu = dict(site.storage.get("lustre") or {})
    p = "gpucluster_storage.lustre"
    oss = site.hosts_in("lustre_oss")
    mds = site.hosts_in("lustre_mds")
    require(bool(mds), "groups.lustre_mds", mds, "one host in group lustre_mds when storage is lustre")
    require(bool(oss), "groups.lustre_oss", oss, "at least one host in group lustre_oss when storage is lustre")
    per_oss = check_range(lu.get("osts_per_oss"), f"{p}.osts_per_oss", 1, 256, integer=True)
    ost_count = per_oss * len(oss)
    fsname = str(lu.get("fsname", "lustre"))
    require(
        fsname.isalnum() and 1 <= len(fsname) <= 8, f"{p}.fsname", fsname, "1 to 8 letters or digits (Lustre fsname)"
    )
    paths = {k: v for k, v in (site.storage.get("paths") or {}).items() if k in ("checkpoints", "datasets", "home")}
    tunables = lustre.lustre_client_tunables(client_ram_gib=site.node.memory_gib)
    storage_ifaces = [n.netdev for n in site.node.nics_for("storage")]
    lnet_ifaces = storage_ifaces or [n.netdev for n in site.node.compute_nics[:1]]
    return {
        "fsname": fsname,
        "mount_point": lu.get("mount_point", f"/lustre/{fsname}"),
        "mgs": mds[0],
        "mds": mds,
        "oss": oss,
        "ost_count": ost_count,
        "osts_per_oss": per_oss,
        "layouts": lustre.lustre_layouts(ost_count=ost_count, paths=paths, overrides=lu.get("layouts")),
        "client_tunables": tunables,
        "set_param_commands": lustre.lctl_set_param_commands(tunables, fsname),
        "lnet": lustre.lnet_config(interfaces=lnet_ifaces, net=lu.get("lnet_net", "o2ib0")),
    }


def _nccl(site: Site, fab: dict[str, Any]) -> dict[str, Any]:
    ftype = fab["type"]
    if ftype == "none":
        return {"enabled": False, "conf": {}, "conf_text": "", "topology_xml": "", "topo_file": None}
    mgmt_if = (site.network.get("management") or {}).get("interface", "eth0")
    conf = nccl.nccl_conf(
        fabric_type=ftype,
        topology=fab["topology"],
        compute_hcas=[n.name for n in site.node.compute_nics],
        socket_ifname=mgmt_if,
        nodes=len(site.compute_hosts),
        roce=site.fabric.get("roce"),
        ib_service_level=(site.fabric.get("infiniband") or {}).get("service_level"),
        topo_file=NCCL_TOPO_FILE,
    )
    gpus = [vars(g) for g in site.node.gpus]
    nics = [vars(n) for n in site.node.nics if n.pci_bus]
    return {
        "enabled": True,
        "conf": conf,
        "conf_text": nccl.nccl_conf_text(conf),
        "topology_xml": nccl.nccl_topology_xml(gpus=gpus, nics=nics, fabric_type=ftype) if gpus else "",
        "topo_file": NCCL_TOPO_FILE,
    }


def _fabric(site: Site, tier: tiers.TierProfile) -> dict[str, Any]:
    f = site.fabric
    p = "gpucluster_fabric"
    ftype = f["type"]
    topology = f.get("topology") or ("none" if ftype == "none" else tier.topology)
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
    rate = f.get("link_rate_gbps") or (nics[0].rate_gbps if nics else None) or 400
    cabling = fabric.expected_cabling(
        topology=topology if ftype in ("infiniband", "roce") else "none",
        compute_hosts=site.compute_hosts,
        rail_hcas=[n.name for n in nics],
        switch_radix=f.get("switch_radix", 64),
        spines=f.get("spines", 0),
        spine_scope=f.get("spine_scope", "shared"),
        link_rate_gbps=rate,
        link_width=nics[0].width if nics else "4x",
    )
    out = {
        "type": ftype,
        "topology": topology,
        "link_rate_gbps": rate,
        "rails": len(nics),
        "subnet_manager": f.get("subnet_manager", "head") if ftype == "infiniband" else None,
        "infiniband": dict(f.get("infiniband") or {}) if ftype == "infiniband" else None,
        "roce": None,
        "cabling": cabling,
        "topology_conf": fabric.slurm_topology_conf(cabling),
    }
    if ftype == "roce":
        roce = dict(f.get("roce") or {})
        dscp = roce.get("dscp", 26)
        roce.update(
            {
                "dscp": dscp,
                "traffic_class": nccl.roce_traffic_class(dscp),
                "priority": roce.get("priority", dscp // 8),
                "cnp_dscp": roce.get("cnp_dscp", 48),
                "cnp_priority": roce.get("cnp_priority", 6),
                "mtu": roce.get("mtu", 4200),
            }
        )
        out["roce"] = roce
    return out


def _hosts(site: Site, addresses: dict[str, Any]) -> dict[str, Any]:
    lab = site.lab if site.lab.get("enabled") else {}
    memlock = str(lab.get("memlock_kb", "unlimited"))
    pools = addresses["pools"]
    prefixes = {name: pool["prefixlen"] for name, pool in pools.items() if name != "fabric"}
    if addresses.get("rails"):
        prefixes["rail"] = int(str(addresses["rails"][0]["cidr"]).split("/")[1])
    mgmt_if = (site.network.get("management") or {}).get("interface", "eth0")
    out = {}
    for h in site.hosts:
        if "compute" in h.roles:
            nics = [vars(n) for n in site.node.nics]
            if not any(n["purpose"] == "management" for n in nics):
                nics.append({"netdev": mgmt_if, "purpose": "management", "rail": None})
        else:
            nics = [{"netdev": mgmt_if, "purpose": "management", "rail": None}]
        out[h.name] = {
            "roles": h.roles,
            "addresses": addresses["hosts"][h.name],
            "sysctl": system.sysctls(h.roles),
            "limits": system.limits(h.roles, memlock),
            "network_units": system.network_units(addresses["hosts"][h.name], nics, prefixes),
        }
    return out


def cluster_plan(site_vars: dict[str, Any], groups: dict[str, list[str]]) -> dict[str, Any]:
    """The whole plan. ``site_vars``: the ``gpucluster_*`` variables; ``groups``: inventory groups."""
    site = load_site(site_vars, groups)
    tier = tiers.tier_profile(site.tier)
    nodes = len(site.compute_hosts)
    gpu = _gpu(site)
    pw = _power(site, gpu)
    fab = _fabric(site, tier)
    addresses = netplan.address_plan(
        pools=site.network,
        hosts=[{"name": h.name, "roles": h.roles} for h in site.hosts],
        rails=fab["rails"] if fab["type"] != "none" else 0,
    )
    wl = site.workload
    plan: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "cluster": {
            "name": site.name,
            "tier": site.tier,
            "domain": site.domain,
            "head": site.head,
            "compute_nodes": nodes,
            "compute_hostlist": hostlist.compress(site.compute_hosts),
            "gpus_per_node": site.node.gpus_per_node,
            "gpus_total": nodes * site.node.gpus_per_node,
            "gpu_model": site.node.gpu_model,
            "lab": bool(site.lab.get("enabled", False)),
        },
        "tier": tiers.tier_as_dict(tier),
        "hosts": _hosts(site, addresses),
        "network": {k: v for k, v in addresses.items() if k != "hosts"},
        "etc_hosts": netplan.etc_hosts_entries(addresses, site.domain),
        "time": {
            "server": site.head,
            "server_address": addresses["hosts"][site.head]["management"],
            "upstream": list(site.network.get("ntp_servers") or []),
            # lab only: containers lack CAP_SYS_TIME, chronyd serves time without setting the clock
            "no_clock_control": bool(site.lab.get("enabled") and site.lab.get("chrony_no_clock_control", True)),
        },
        "gpu": gpu,
        "power": pw,
        "cooling": _cooling(site, pw),
        "storage": _storage(site, tier, nodes),
        "fabric": fab,
        "nccl": _nccl(site, fab),
        "parallelism": parallelism.parallelism(
            model_params_b=wl.get("model_params_b"),
            gpus_per_node=site.node.gpus_per_node,
            nodes=nodes,
            gpu_memory_gb=gpu["model"]["memory_gb"],
            tensor_parallel=wl.get("tensor_parallel"),
            pipeline_parallel=wl.get("pipeline_parallel"),
        ),
        "validation": validation.validation_floors(
            tier=tier,
            gpu_model=site.node.gpu_model,
            fabric_type=fab["type"],
            compute_nics_per_node=fab["rails"],
            link_rate_gbps=fab["link_rate_gbps"] if fab["type"] != "none" else None,
            nodes=nodes,
        ),
    }
    plan["slurm"] = slurm.slurm_plan(site, plan)
    plan["files"] = files_manifest(plan)
    plan["report"] = report.report_sections(plan)
    return plan


#: Which role template lands where, per host role. One list, read by the plan play
#: (build/plan/<name>/hosts/<host>/<dest>) and matched by the roles' own tasks.
FILES: list[dict[str, Any]] = [
    {"role": "common", "src": "hosts.j2", "dest": "/etc/hosts", "on": "all"},
    {"role": "common", "src": "chrony.conf.j2", "dest": "/etc/chrony/chrony.conf", "on": "all"},
    {"role": "common", "src": "sysctl.conf.j2", "dest": "/etc/sysctl.d/90-gpucluster.conf", "on": "all"},
    {"role": "common", "src": "limits.conf.j2", "dest": "/etc/security/limits.d/90-gpucluster.conf", "on": "all"},
    {
        "role": "common",
        "src": "chrony-lab.conf.j2",
        "dest": "/etc/systemd/system/chrony.service.d/gpucluster-lab.conf",
        "on": "all",
        "if": "lab_chrony",
    },
    {"role": "compute", "src": "nccl.conf.j2", "dest": "/etc/nccl.conf", "on": "compute", "if": "nccl"},
    {"role": "compute", "src": "nccl-topo.xml.j2", "dest": NCCL_TOPO_FILE, "on": "compute", "if": "nccl"},
    {
        "role": "compute",
        "src": "gpucluster-gpu-clocks.service.j2",
        "dest": "/etc/systemd/system/gpucluster-gpu-clocks.service",
        "on": "compute",
    },
    {"role": "slurm", "src": "slurm.conf.j2", "dest": "/etc/slurm/slurm.conf", "on": "slurm"},
    {"role": "slurm", "src": "cgroup.conf.j2", "dest": "/etc/slurm/cgroup.conf", "on": "slurm"},
    {"role": "slurm", "src": "gres.conf.j2", "dest": "/etc/slurm/gres.conf", "on": "compute"},
    {
        "role": "slurm",
        "src": "mariadb-slurm.cnf.j2",
        "dest": "/etc/mysql/mariadb.conf.d/90-gpucluster-slurm.cnf",
        "on": "head",
    },
    {"role": "slurm", "src": "topology.conf.j2", "dest": "/etc/slurm/topology.conf", "on": "slurm", "if": "topology"},
    {"role": "compute", "src": "lnet.conf.j2", "dest": "/etc/lnet.conf", "on": "compute", "if": "lustre"},
    {
        "role": "compute",
        "src": "lustre-client.conf.j2",
        "dest": "/etc/modprobe.d/lustre.conf",
        "on": "compute",
        "if": "lustre",
    },
]


def _on(target: str, roles: list[str]) -> bool:
    """Whether a file for ``target`` (all, a group, or slurm = head and compute) goes on a host."""
    if target == "all":
        return True
    if target == "slurm":
        return bool({"head", "compute"} & set(roles))
    return target in roles


def files_manifest(plan: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per host, the files the roles install: role, template and destination."""
    conditions = {
        "lab_chrony": plan["time"]["no_clock_control"],
        "nccl": plan["nccl"]["enabled"],
        "topology": bool(plan["fabric"]["topology_conf"]),
        "lustre": plan["storage"]["type"] == "lustre",
    }
    out: dict[str, list[dict[str, Any]]] = {}
    for name, host in plan["hosts"].items():
        out[name] = [
            {"role": f["role"], "src": f["src"], "dest": f["dest"]}
            for f in FILES
            if _on(f["on"], host["roles"]) and conditions.get(f.get("if", ""), True)
        ]
        out[name] += [
            {"role": "common", "src": "network.j2", "dest": f"/etc/gpucluster/network/{unit['name']}", "unit": unit}
            for unit in host["network_units"]
        ]
    return out


__all__ = ["PlanError", "cluster_plan", "files_manifest"]
