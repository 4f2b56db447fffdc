"""Host settings every node gets from the plan: sysctls, limits, time service; the cluster's summary and each
host's section (plan.cluster, plan.time, plan.hosts).

Sources: NVIDIA GPUDirect RDMA and ConnectX tuning guides recommend locking memory
without limit for RDMA (registered memory must be pinned; ``memlock unlimited``) and
large socket buffers for the bootstrap/TCP paths; NUMA balancing off on GPU nodes so the
kernel does not migrate pages under pinned DMA buffers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.firewall import host_policy
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.interfaces import server_interfaces

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site

#: sysctls for GPU/RDMA hosts. ``netns`` marks keys that live in a network namespace
#: (settable inside a container); the others are host-wide kernel settings.
_SYSCTLS: list[tuple[str, str, bool, str]] = [
    ("net.core.rmem_max", "268435456", False, "256 MiB socket receive buffers (NCCL socket/bootstrap, NFS)"),
    ("net.core.wmem_max", "268435456", False, "256 MiB socket send buffers"),
    ("net.ipv4.tcp_rmem", "4096 87380 134217728", True, "TCP autotuning up to 128 MiB"),
    ("net.ipv4.tcp_wmem", "4096 65536 134217728", True, "TCP autotuning up to 128 MiB"),
    ("net.ipv4.tcp_mtu_probing", "1", True, "find the path MTU across jumbo/non-jumbo segments"),
    ("vm.zone_reclaim_mode", "0", False, "no node-local reclaim stalls on big-memory NUMA hosts"),
    ("kernel.numa_balancing", "0", False, "no page migration under pinned GPU/RDMA buffers"),
]


def sysctls(roles: list[str]) -> list[dict[str, Any]]:
    """The sysctls a host with these roles gets (every host gets the network ones)."""
    gpu_only = {"vm.zone_reclaim_mode", "kernel.numa_balancing"}
    out = []
    for key, value, netns, why in _SYSCTLS:
        if key in gpu_only and "compute" not in roles:
            continue
        out.append({"key": key, "value": value, "netns": netns, "why": why})
    return out


def limits(roles: list[str], memlock: str = "unlimited") -> list[dict[str, str]]:
    """pam_limits entries: RDMA needs unlimited locked memory on compute and storage hosts.

    ``memlock`` is "unlimited" on real hosts; the lab passes the container's hard limit,
    because pam_limits cannot raise a limit above it there (no CAP_SYS_RESOURCE).
    """
    if not {"compute", "storage"} & set(roles):
        return []
    return [
        {"domain": "*", "type": "soft", "item": "memlock", "value": memlock},
        {"domain": "*", "type": "hard", "item": "memlock", "value": memlock},
        {"domain": "root", "type": "soft", "item": "memlock", "value": memlock},
        {"domain": "root", "type": "hard", "item": "memlock", "value": memlock},
    ]


#: The network of an interface unit by its NIC's purpose (gpucluster_node.nics[].purpose): the rails
#: (purpose compute) are the fabric; the names the common role's common_network_units_enabled takes.
NETWORKS: dict[str, str] = {"compute": "fabric", "storage": "storage", "management": "management"}


def network_units(
    addresses: Mapping[str, Any],
    nics: list[dict[str, Any]],
    prefixes: dict[str, int],
    *,
    rail_mtu: int | None = None,
) -> list[dict[str, Any]]:
    """systemd-networkd units for a host's management, storage and rail interfaces.

    ``addresses``: the host's entry of the address plan; ``nics``: the NICs the host has
    ({netdev, purpose, rail}); ``prefixes``: prefix length per pool ("management",
    "storage", "rail"). A storage interface gets its own address (``storage_interfaces``), so
    no address is on two interfaces. ``rail_mtu``: the MTU of every rail (compute) interface (RoCE's,
    fabric_host.roce_settings); None leaves the link's default.

    Each unit names its ``network``: ``fabric`` (a rail), ``storage`` or ``management``. The common role
    hands the storage and fabric units to systemd-networkd (``common_network_units_enabled``) and
    never the management one, through which Ansible reaches the host: a unit on an interface the host
    also has as its management NIC counts as ``management`` whatever its purpose.
    """
    management = {nic["netdev"] for nic in nics if nic["purpose"] == "management"}
    units = []
    for nic in nics:
        purpose = nic["purpose"]
        if purpose == "compute":
            rail = str(nic.get("rail"))
            address = (addresses.get("rails") or {}).get(rail)
            prefix = prefixes.get("rail")
        elif purpose == "storage" and "storage_interfaces" in addresses:
            address = addresses["storage_interfaces"].get(nic["netdev"])
            prefix = prefixes.get("storage")
        else:
            address = addresses.get(purpose)
            prefix = prefixes.get(purpose)
        if not address or prefix is None:
            continue
        unit = {
            "name": f"10-gpucluster-{nic['netdev']}.network",
            "netdev": nic["netdev"],
            "purpose": purpose,
            "rail": nic.get("rail"),
            "address": f"{address}/{prefix}",
            "network": "management" if nic["netdev"] in management else NETWORKS.get(purpose, purpose),
        }
        if purpose == "compute" and rail_mtu is not None:
            unit["mtu"] = rail_mtu
        units.append(unit)
    return units


def served_addresses(storage: dict[str, Any]) -> list[dict[str, Any]]:
    """Every address a client mounts or peers with, and the server that must hold it.

    ``storage``: the plan's storage section. Each entry: ``host`` (the server), ``address``,
    ``netdev`` (the server interface it must be on; None: any of the host's interfaces),
    ``use`` (what the client does with it, for the error) and ``field`` (the inventory field
    that places it). NFS: the export's address; Lustre: the MGS NID, and one NID per LNet
    interface of every server; BeeGFS: the management host; NVMe-oF: each target's port.
    """
    out: list[dict[str, Any]] = []
    st_field = "gpucluster_storage.server_interfaces"
    nfs = storage.get("nfs")
    if nfs:
        for mount in nfs["client_mounts"]:
            out.append(
                {"host": nfs["server"], "address": nfs["server_address"], "netdev": None,
                 "use": f"mounted as {mount['what']}", "field": st_field}
            )  # fmt: skip
    lu = storage.get("lustre")
    if lu:
        out.append(
            {"host": lu["mgs"], "address": lu["mgs_nid"].split("@")[0], "netdev": None,
             "use": f"the MGS NID of {lu['client_mount']['what']}", "field": st_field}
        )  # fmt: skip
        for host, nids in (lu.get("server_nids") or {}).items():
            for nid in nids:
                out.append(
                    {"host": host, "address": nid["address"], "netdev": nid["interface"],
                     "use": f"its LNet NID {nid['nid']}", "field": "gpucluster_storage.lustre.server_interfaces"}
                )  # fmt: skip
    bg = storage.get("beegfs")
    if bg:
        out.append(
            {"host": bg["mgmtd"], "address": bg["mgmtd_address"], "netdev": None,
             "use": "sysMgmtdHost of every BeeGFS service and client", "field": st_field}
        )  # fmt: skip
    nv = storage.get("nvmeof")
    if nv:
        for host, target in nv["targets"].items():
            out.append(
                {"host": host, "address": target["address"], "netdev": None,
                 "use": f"its NVMe-oF port (traddr {target['address']})", "field": st_field}
            )  # fmt: skip
    return out


def check_addresses(hosts: dict[str, dict[str, Any]], storage: dict[str, Any]) -> dict[str, Any]:
    """The plan's address rules (DESIGN.md, bring-up rules), before any host is touched.

    - every address is on exactly one interface (``hosts``: the plan's hosts with their
      ``network_units``);
    - every address a client mounts or peers with (:func:`served_addresses`) is on an interface
      of its server (the management address counts: the management interface carries it).

    Raises PlanError naming the field that places the address; returns the served addresses
    with the interface each was found on (the report lists them).
    """
    places: dict[str, list[str]] = {}
    for host, entry in hosts.items():
        for unit in entry.get("network_units") or []:
            places.setdefault(str(unit["address"]).split("/", maxsplit=1)[0], []).append(f"{host} {unit['netdev']}")
    for address, where in places.items():
        require(
            len(where) == 1,
            "gpucluster_network",
            address,
            f"every address on one interface ({address} is planned on {', '.join(where)})",
        )
    served = []
    for item in served_addresses(storage):
        entry = hosts.get(item["host"]) or {}
        units = {
            str(u["address"]).split("/", maxsplit=1)[0]: u["netdev"]
            for u in entry.get("network_units") or []
            if item["netdev"] is None or u["netdev"] == item["netdev"]
        }
        mgmt = (entry.get("addresses") or {}).get("management")
        on = units.get(item["address"])
        if on is None and item["address"] == mgmt and item["netdev"] is None:
            on = "management"
        host = item["host"]
        where = f"interface {item['netdev']} of {host}" if item["netdev"] else f"any interface of {host}"
        require(
            on is not None,
            item["field"],
            item["address"],
            f"an address configured on {where}: {item['address']} is {item['use']}, but the plan puts it on no"
            f" interface there (list {item['host']}'s storage interfaces in {item['field']})",
        )
        served.append({**item, "interface": on})
    return {"served": served}


def cluster_section(site: Site) -> dict[str, Any]:
    """plan.cluster: the site's name, tier, head, compute nodes and GPUs, scheduler."""
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


def time_plan(site: Site, addresses: Mapping[str, Any]) -> dict[str, Any]:
    """plan.time: the head serves time to the cluster from the site's upstream servers."""
    return {
        "server": site.head,
        "server_address": addresses["hosts"][site.head]["management"],
        "upstream": list(site.ntp_servers),
        # lab only: containers lack CAP_SYS_TIME, chronyd serves time without setting the clock
        "no_clock_control": site.chrony_no_clock_control,
    }


def hosts_plan(site: Site, addresses: Mapping[str, Any], fab: Mapping[str, Any]) -> dict[str, Any]:
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
                nics += [{"netdev": n, "purpose": "storage", "rail": None} for n in server_interfaces(site)]
        out[h.name] = {
            "roles": h.roles,
            "addresses": addresses["hosts"][h.name],
            "sysctl": sysctls(h.roles),
            "limits": limits(h.roles, memlock),
            "network_units": network_units(addresses["hosts"][h.name], nics, prefixes, rail_mtu=rail_mtu),
            # its limited ports (management network only) and the cluster networks it accepts
            "firewall": host_policy(h.roles, addresses["hosts"][h.name], addresses),
        }
    return out
