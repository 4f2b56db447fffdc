"""Address plan (Python's ipaddress): management, BMC, storage and one subnet per rail.

Hosts arrive in plan order (head, storage, compute; each by name). Every host gets a
management and a BMC address; storage and compute hosts storage-network addresses when
that pool exists, one per storage interface (``storage_nics``: a compute node's two storage
NICs get two addresses, so each is one LNet NID; a storage server gets one per interface of
``gpucluster_storage.server_interfaces``), taken in plan order; compute hosts one address per
rail, in the rail's own subnet (a rail-optimized fabric keeps each rail a separate network).
Address = pool base + first_offset + the host's index (storage: + the index of the host's
interface among all planned storage interfaces). Overlapping pools and exhausted pools are
errors.
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Mapping
from typing import NotRequired, TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import (
    AddressPlan,
    EtcHostsSection,
    HostAddresses,
)

POOLS = ("management", "bmc", "storage", "fabric")
REQUIRED = ("management", "bmc")


Net = ipaddress.IPv4Network


class HostRequest(TypedDict):
    """A host to address: its name, roles and storage NICs (netdevs; empty: one storage address)."""

    name: str
    roles: list[str]
    storage_nics: NotRequired[list[str]]


def _spec(pools: Mapping[str, object], name: str, field: str) -> Mapping[str, object]:
    spec = pools.get(name)
    if not isinstance(spec, dict) or "cidr" not in spec:
        raise PlanError(f"{field}.{name}", spec, "a mapping with cidr (and first_offset)")
    return spec


def _network(spec: Mapping[str, object], name: str, field: str) -> Net:
    try:
        iface = ipaddress.ip_interface(str(spec["cidr"]))
    except ValueError:
        raise PlanError(f"{field}.{name}.cidr", spec["cidr"], "an IPv4 network such as 10.30.0.0/24") from None
    if iface.version != 4 or iface.ip != iface.network.network_address:
        raise PlanError(f"{field}.{name}.cidr", spec["cidr"], "an IPv4 network address (host bits zero)")
    return ipaddress.IPv4Network(iface.network)


def _offset(spec: Mapping[str, object], field: str, size: int) -> int:
    return int(check_range(spec.get("first_offset", 10), f"{field}.first_offset", 1, max(1, size - 2), integer=True))


def _take(net: Net, offset: int, index: int, field: str, count: int) -> str:
    position = offset + index
    size = net.num_addresses
    if position >= size - 1:  # the last address is the broadcast address
        raise PlanError(
            f"{field}.cidr",
            str(net),
            f"a network with room for {count} hosts from offset {offset} (it holds {max(0, size - 1 - offset)})",
        )
    return _dotted(int(net.network_address) + position)


def _dotted(value: int) -> str:
    """An IPv4 address as dotted quad (what ``str(IPv4Address(value))`` gives, without the object)."""
    return f"{value >> 24}.{(value >> 16) & 255}.{(value >> 8) & 255}.{value & 255}"


_OCTETS = [str(i) for i in range(256)]


def _run(net: Net, offset: int, count: int) -> list[str] | None:
    """The ``count`` addresses :func:`_take` gives for the indexes 0 to count - 1, or None when they do not all
    fit (:func:`_take_all` then raises _take's error). Dotted quads built a /24 block at a time."""
    if offset + count - 1 >= net.num_addresses - 1:
        return None if count else []
    out: list[str] = []
    value = int(net.network_address) + offset
    end = value + count
    while value < end:
        block_end = min(end, (value | 255) + 1)
        prefix = f"{value >> 24}.{(value >> 16) & 255}.{(value >> 8) & 255}."
        out += [prefix + octet for octet in _OCTETS[value & 255 : (value & 255) + block_end - value]]
        value = block_end
    return out


def _take_all(net: Net, offset: int, count: int, field: str) -> list[str]:
    """:func:`_take`'s addresses for the indexes 0 to count - 1 (:func:`_run`); a pool too small raises _take's
    error (the pool, how many it must hold from its offset)."""
    run = _run(net, offset, count)
    return run if run is not None else [_take(net, offset, i, field, count) for i in range(count)]


def address_plan(
    *, pools: Mapping[str, object], hosts: list[HostRequest], rails: int, field: str = "gpucluster_network"
) -> AddressPlan:
    specs: dict[str, Mapping[str, object]] = {}
    nets: dict[str, Net] = {}
    for name in POOLS:
        if name in REQUIRED or pools.get(name):
            specs[name] = _spec(pools, name, field)
            nets[name] = _network(specs[name], name, field)
    names = list(nets)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if nets[a].overlaps(nets[b]):
                raise PlanError(
                    f"{field}.{b}.cidr", str(nets[b]), f"a network that does not overlap {field}.{a} ({nets[a]})"
                )
    offsets = {n: _offset(specs[n], f"{field}.{n}", nets[n].num_addresses) for n in nets}
    rail_nets: list[Net] = []
    if rails:
        if "fabric" not in nets:
            raise PlanError(f"{field}.fabric", None, "a fabric pool {cidr, rail_prefix} when the fabric has rails")
        prefix = int(
            check_range(
                specs["fabric"].get("rail_prefix", 24),
                f"{field}.fabric.rail_prefix",
                nets["fabric"].prefixlen,
                30,
                integer=True,
            )
        )
        subnets = list(itertools.islice(nets["fabric"].subnets(new_prefix=prefix), rails))
        if len(subnets) < rails:
            raise PlanError(f"{field}.fabric.cidr", str(nets["fabric"]), f"room for {rails} rail subnets of /{prefix}")
        rail_nets = subnets[:rails]
    storage_hosts = [h for h in hosts if {"storage", "compute"} & set(h["roles"])]
    compute_hosts = [h for h in hosts if "compute" in h["roles"]]
    out_hosts: dict[str, HostAddresses] = {}
    managements = _take_all(nets["management"], offsets["management"], len(hosts), f"{field}.management")
    bmcs = _take_all(nets["bmc"], offsets["bmc"], len(hosts), f"{field}.bmc")
    mask = f"/{nets['management'].prefixlen}"
    for h, management, bmc in zip(hosts, managements, bmcs, strict=True):
        out_hosts[h["name"]] = {"management": management, "bmc": bmc, "management_cidr": management + mask}
    if "storage" in nets:
        # one address per storage interface; a host without listed interfaces keeps one address
        none: list[str | None] = [None]
        wanted = [(h["name"], list(h.get("storage_nics") or none)) for h in storage_hosts]
        total = sum(len(nics) for _name, nics in wanted)
        addresses = iter(_take_all(nets["storage"], offsets["storage"], total, f"{field}.storage"))
        for name, nics in wanted:
            per_nic: dict[str, str] = {}
            for netdev in nics:
                address = next(addresses)
                out_hosts[name].setdefault("storage", address)  # the host's first: what clients name it by
                if netdev is not None:
                    per_nic[netdev] = address
            if per_nic:
                out_hosts[name]["storage_interfaces"] = per_nic
    columns = [_take_all(net, offsets["fabric"], len(compute_hosts), f"{field}.fabric") for net in rail_nets]
    keyed = [(str(r), column) for r, column in enumerate(columns)]
    for i, h in enumerate(compute_hosts):
        out_hosts[h["name"]]["rails"] = {key: column[i] for key, column in keyed}
    return {
        "pools": {
            n: {"cidr": str(net), "netmask": str(net.netmask), "prefixlen": net.prefixlen, "first_offset": offsets[n]}
            for n, net in nets.items()
        },
        "rails": [{"rail": r, "cidr": str(net)} for r, net in enumerate(rail_nets)],
        "hosts": out_hosts,
    }


def etc_hosts_entries(plan: AddressPlan, domain: str) -> EtcHostsSection:
    """[address, fqdn, short name] per host, sorted by address."""
    rows = [[h["management"], f"{name}.{domain}", name] for name, h in plan["hosts"].items()]
    # the plan's dotted quads (_dotted) in numeric order: their octets compared as numbers
    return sorted(rows, key=lambda r: tuple(map(int, r[0].split("."))))
