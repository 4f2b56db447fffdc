"""Host settings every node gets from the plan: sysctls, limits, time service; the cluster's summary and each
host's section (plan.cluster, plan.time, plan.hosts).

Sources: NVIDIA GPUDirect RDMA and ConnectX tuning guides recommend locking memory
without limit for RDMA (registered memory must be pinned; ``memlock unlimited``) and
large socket buffers for the bootstrap/TCP paths; NUMA balancing off on GPU nodes so the
kernel does not migrate pages under pinned DMA buffers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, NotRequired, TypedDict

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.firewall import host_policy
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import (
    AddressPlan,
    ClusterSection,
    HostAddresses,
    HostEntry,
    HostsSection,
    Limit,
    NetworkUnit,
    Nic,
    Sysctl,
    TimeSection,
)
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

#: the sysctls of GPU (compute) hosts alone
_GPU_ONLY = frozenset({"vm.zone_reclaim_mode", "kernel.numa_balancing"})


def sysctls(roles: list[str]) -> list[Sysctl]:
    """The sysctls a host with these roles gets (every host gets the network ones)."""
    gpu = "compute" in roles
    return [
        {"key": key, "value": value, "netns": netns, "why": why}
        for key, value, netns, why in _SYSCTLS
        if gpu or key not in _GPU_ONLY
    ]


def limits(roles: list[str], memlock: str = "unlimited") -> list[Limit]:
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


class UnitShape(NamedTuple):
    """One NIC's systemd-networkd unit but its address: the same for every host with the NIC
    (:func:`unit_shapes`); :func:`network_units` fills in a host's address."""

    source: Literal["purpose", "rail", "storage"]  # the host's address of the NIC's purpose, its rail's, its
    # storage interface's own (or, without storage_interfaces, its storage address)
    rail_key: str  # the rail's key in the host's addresses
    suffix: str  # "/<prefix length>"
    name: str
    netdev: str
    rail: int | None
    purpose: str
    network: str
    mtu: int | None


def unit_shapes(nics: list[Nic], prefixes: dict[str, int], *, rail_mtu: int | None = None) -> list[UnitShape]:
    """The shapes of a host's systemd-networkd units: all of a unit but its address.

    The same for every host with these NICs: :func:`network_units` fills in a host's addresses.

    ``nics``: the NICs the host has ({netdev, purpose, rail}); ``prefixes``: prefix length per pool
    ("management", "storage", "rail"); a NIC without one gets no unit. A storage interface gets its own
    address (``storage_interfaces``), so no address is on two interfaces. ``rail_mtu``: the MTU of every rail
    (compute) interface (RoCE's, fabric_host.roce_settings); None leaves the link's default.

    Each unit names its ``network``: ``fabric`` (a rail), ``storage`` or ``management``. The common role
    hands the storage and fabric units to systemd-networkd (``common_network_units_enabled``) and
    never the management one, through which Ansible reaches the host: a unit on an interface the host
    also has as its management NIC counts as ``management`` whatever its purpose.
    """
    management = {nic["netdev"] for nic in nics if nic["purpose"] == "management"}
    shapes: list[UnitShape] = []
    for nic in nics:
        purpose = nic["purpose"]
        source: Literal["purpose", "rail", "storage"] = (
            "rail" if purpose == "compute" else ("storage" if purpose == "storage" else "purpose")
        )
        prefix = prefixes.get("rail" if purpose == "compute" else purpose)
        if prefix is None:
            continue
        netdev, rail = nic["netdev"], nic.get("rail")
        shapes.append(
            UnitShape(
                source=source,
                rail_key=str(rail),
                suffix=f"/{prefix}",
                name=f"10-gpucluster-{netdev}.network",
                netdev=netdev,
                rail=rail,
                purpose=purpose,
                network="management" if netdev in management else NETWORKS.get(purpose, purpose),
                mtu=rail_mtu if purpose == "compute" else None,
            )
        )
    return shapes


def network_units(addresses: HostAddresses, shapes: list[UnitShape]) -> list[NetworkUnit]:
    """systemd-networkd units for a host's management, storage and rail interfaces.

    ``addresses`` (the host's entry of the address plan) in the shapes of its NICs (:func:`unit_shapes`); a
    NIC without an address gets no unit."""
    units: list[NetworkUnit] = []
    by_purpose: Mapping[str, object] = addresses
    rails = addresses.get("rails", {})
    own = addresses.get("storage_interfaces")
    for source, rail_key, suffix, name, netdev, rail, purpose, network, mtu in shapes:
        address: object
        if source == "rail":
            address = rails.get(rail_key)
        elif source == "storage" and own is not None:
            address = own.get(netdev)
        else:
            address = by_purpose.get(purpose)
        if not address:
            continue
        unit: NetworkUnit = {
            "name": name,
            "netdev": netdev,
            "purpose": purpose,
            "rail": rail,
            "address": f"{address}{suffix}",
            "network": network,
        }
        if mtu is not None:
            unit["mtu"] = mtu
        units.append(unit)
    return units


class ServedAddress(TypedDict):
    """An address a client mounts or peers with: its server, the interface it must be on (None: any), what
    the client does with it and the inventory field that places it; ``interface``: where it was found."""

    host: str
    address: str
    netdev: str | None
    use: str
    field: str
    interface: NotRequired[str]


def served_addresses(storage: Mapping[str, Any]) -> list[ServedAddress]:
    """Every address a client mounts or peers with, and the server that must hold it.

    ``storage``: the plan's storage section. Each entry: ``host`` (the server), ``address``,
    ``netdev`` (the server interface it must be on; None: any of the host's interfaces),
    ``use`` (what the client does with it, for the error) and ``field`` (the inventory field
    that places it). NFS: the export's address; Lustre: the MGS NID, and one NID per LNet
    interface of every server; BeeGFS: the management host; NVMe-oF: each target's port.
    """
    out: list[ServedAddress] = []
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


def check_addresses(hosts: HostsSection, storage: Mapping[str, Any]) -> dict[str, list[ServedAddress]]:
    """The plan's address rules (DESIGN.md, bring-up rules), before any host is touched.

    - every address is on exactly one interface (``hosts``: the plan's hosts with their
      ``network_units``);
    - every address a client mounts or peers with (:func:`served_addresses`) is on an interface
      of its server (the management address counts: the management interface carries it).

    Raises PlanError naming the field that places the address; returns the served addresses
    with the interface each was found on (the report lists them).
    """
    planned = [str(unit["address"]).split("/", maxsplit=1)[0] for e in hosts.values() for unit in e["network_units"]]
    if len(set(planned)) != len(planned):  # an address on two interfaces: name the first and where it is
        places: dict[str, list[str]] = {}
        for host, entry in hosts.items():
            for unit in entry["network_units"]:
                address = str(unit["address"]).split("/", maxsplit=1)[0]
                places.setdefault(address, []).append(f"{host} {unit['netdev']}")
        for address, where in places.items():
            require(
                len(where) == 1,
                "gpucluster_network",
                address,
                f"every address on one interface ({address} is planned on {', '.join(where)})",
            )
    served: list[ServedAddress] = []
    for item in served_addresses(storage):
        server = hosts.get(item["host"])
        units = {
            u["address"].split("/", maxsplit=1)[0]: u["netdev"]
            for u in (server["network_units"] if server else [])
            if item["netdev"] is None or u["netdev"] == item["netdev"]
        }
        mgmt = server["addresses"]["management"] if server else None
        on = units.get(item["address"])
        if on is None and item["address"] == mgmt and item["netdev"] is None:
            on = "management"
        host = item["host"]
        place = f"interface {item['netdev']} of {host}" if item["netdev"] else f"any interface of {host}"
        if on is None:
            raise PlanError(
                item["field"],
                item["address"],
                f"an address configured on {place}: {item['address']} is {item['use']}, but the plan puts it on no"
                f" interface there (list {item['host']}'s storage interfaces in {item['field']})",
            )
        found = item.copy()
        found["interface"] = on
        served.append(found)
    return {"served": served}


def cluster_section(site: Site) -> ClusterSection:
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


def time_plan(site: Site, addresses: AddressPlan) -> TimeSection:
    """plan.time: the head serves time to the cluster from the site's upstream servers."""
    return {
        "server": site.head,
        "server_address": addresses["hosts"][site.head]["management"],
        "upstream": list(site.ntp_servers),
        # lab only: containers lack CAP_SYS_TIME, chronyd serves time without setting the clock
        "no_clock_control": site.chrony_no_clock_control,
    }


def hosts_plan(site: Site, addresses: AddressPlan, fab: Mapping[str, Any]) -> HostsSection:
    """Per host: its roles, addresses, sysctls, limits, interface units and firewall. On RoCE the rails'
    interface units carry the fabric's MTU too (common role, network.j2)."""
    memlock = site.memlock_kb
    pools = addresses["pools"]
    prefixes = {name: pool["prefixlen"] for name, pool in pools.items() if name != "fabric"}
    if addresses["rails"]:
        prefixes["rail"] = int(addresses["rails"][0]["cidr"].split("/")[1])
    mgmt_if = site.management_interface
    rail_mtu = fab["roce"]["mtu"] if fab["roce"] else None
    shapes: dict[str, list[UnitShape]] = {}  # the units' shapes by kind of host: its NICs are the kind's
    out: HostsSection = {}
    for h in site.hosts:
        kind = "compute" if "compute" in h.roles else ("storage" if "storage" in h.roles else "other")
        if kind not in shapes:
            nics: list[Nic]
            if kind == "compute":
                nics = [{"netdev": n.netdev, "purpose": n.purpose, "rail": n.rail} for n in site.node.nics]
                if not any(n["purpose"] == "management" for n in nics):
                    nics.append({"netdev": mgmt_if, "purpose": "management", "rail": None})
            else:
                nics = [{"netdev": mgmt_if, "purpose": "management", "rail": None}]
                if kind == "storage":  # a storage server: its own storage interfaces, one address each
                    nics += [{"netdev": n, "purpose": "storage", "rail": None} for n in server_interfaces(site)]
            shapes[kind] = unit_shapes(nics, prefixes, rail_mtu=rail_mtu)
        entry: HostEntry = {
            "roles": h.roles,
            "addresses": addresses["hosts"][h.name],
            "sysctl": sysctls(h.roles),
            "limits": limits(h.roles, memlock),
            "network_units": network_units(addresses["hosts"][h.name], shapes[kind]),
            # its limited ports (management network only) and the cluster networks it accepts
            "firewall": host_policy(h.roles, addresses["hosts"][h.name], addresses),
        }
        out[h.name] = entry
    return out
