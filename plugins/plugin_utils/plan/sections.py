"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

TypedDicts: plain dicts at run time (plan.json is the same JSON), checked by mypy in the builders
(system.py, addresses.py, firewall.py, rollout.py, files.py, services.py) and in every reader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue


class ClusterSection(TypedDict):
    """plan.cluster: the site's name, tier, head, compute nodes and GPUs, scheduler (system.cluster_section)."""

    name: str
    tier: str
    domain: str
    head: str
    compute_nodes: int
    compute_hostlist: str
    gpus_per_node: int
    gpus_total: int
    gpu_model: str
    lab: bool
    scheduler: str


class HostAddresses(TypedDict):
    """One host's entry of the address plan (addresses.address_plan)."""

    management: str
    bmc: str
    management_cidr: str
    storage: NotRequired[str]  # storage and compute hosts, when the storage pool exists
    storage_interfaces: NotRequired[dict[str, str]]  # netdev -> address, when the host lists storage NICs
    rails: NotRequired[dict[str, str]]  # compute hosts: rail ("0", "1", ...) -> address


class Pool(TypedDict):
    cidr: str
    netmask: str
    prefixlen: int
    first_offset: int


class RailNet(TypedDict):
    rail: int
    cidr: str


class NetworkSection(TypedDict):
    """plan.network: the address pools and the rails' subnets."""

    pools: dict[str, Pool]
    rails: list[RailNet]


class AddressPlan(NetworkSection):
    """The address plan: plan.network, and each host's addresses (plan.hosts[*].addresses)."""

    hosts: dict[str, HostAddresses]


class Nic(TypedDict):
    """A NIC a host has, as the interface units read it."""

    netdev: str
    purpose: str
    rail: int | None


class Sysctl(TypedDict):
    key: str
    value: str
    netns: bool  # lives in a network namespace (settable inside a container)
    why: str


class Limit(TypedDict):
    """A pam_limits entry."""

    domain: str
    type: str
    item: str
    value: str


class NetworkUnit(TypedDict):
    """A systemd-networkd unit of one interface (system.network_units)."""

    name: str
    netdev: str
    purpose: str
    rail: int | None
    address: str  # address/prefix
    network: str  # fabric, storage or management
    mtu: NotRequired[int]  # the rails on RoCE


class FirewallService(TypedDict):
    port: int
    name: str


class HostFirewall(TypedDict):
    """A host's own part of the firewall policy (firewall.host_policy)."""

    tcp_ports: list[int]
    services: list[FirewallService]
    accept_ipv4: list[str]


class HostEntry(TypedDict):
    """One host of plan.hosts (system.hosts_plan)."""

    roles: list[str]
    addresses: HostAddresses
    sysctl: list[Sysctl]
    limits: list[Limit]
    network_units: list[NetworkUnit]
    firewall: HostFirewall


#: plan.hosts: host name -> its entry.
HostsSection = dict[str, HostEntry]


class FirewallSection(TypedDict):
    """plan.firewall: what every host's policy shares (firewall.firewall_plan)."""

    management_cidr: str
    input_policy: str
    forward_policy: str
    open_tcp_ports: list[int]
    icmp_types: list[str]
    icmpv6_types: list[str]
    icmpv6_nd_types: list[str]
    icmpv6_mld_types: list[str]
    table: str
    port_set: str
    cluster_set: str
    policy_file: str
    unit: str


#: plan.etc_hosts: [address, fqdn, short name] per host, sorted by address.
EtcHostsSection = list[list[str]]


class TimeSection(TypedDict):
    """plan.time: the head serves time from the site's upstream servers (system.time_plan)."""

    server: str
    server_address: str
    upstream: list[str]
    no_clock_control: bool


class RolloutSection(TypedDict):
    """plan.rollout: how site.yml rolls changes over the compute nodes (rollout.rollout_plan)."""

    batch_size: int | str  # a node count or "N%"
    max_fail_percentage: int
    drain_timeout_s: int
    drain_policy: str


class FileEntry(TypedDict):
    """One file of a host's manifest (files.RoleFile.entry; the keys after ``mode`` only when set)."""

    role: str
    src: str
    dest: str
    mode: str
    notify: NotRequired[list[str]]
    validate: NotRequired[str]
    mkdir: NotRequired[bool]
    unsafe_writes: NotRequired[bool]
    static: NotRequired[bool]
    task: NotRequired[str]
    unit: NotRequired[Mapping[str, object]]  # a per-unit file: the unit it renders


class FileRule(TypedDict):
    """One role file the plan installs (files.RoleFile.rule): which hosts get it, once or once per unit.
    A host's own list is files.host_files (its host view's ``files[<host>]``)."""

    hosts: str  # who gets it: a key of files.HOSTS (all, a host role, or a union of roles)
    each: NotRequired[str]  # a per-unit file: one per unit of this kind (files.EACH), at <file.dest>/<unit name>
    file: FileEntry


#: plan.files: the role files this plan installs, in the order a host's list has them (the interface units
#: last); the same for every size of cluster (a host's list is derived: files.host_files).
FilesSection = list[FileRule]

#: files.host_files for every host: host name -> the role files it gets (a host view's ``files``).
HostFiles = dict[str, list[FileEntry]]


class PlannedUnit(TypedDict):
    """One unit the roles enable and start on a host (services.services_plan)."""

    unit: str
    role: str
    switch: str | None  # a role variable that turns it off


#: plan.services: host name -> its units, in the order the audit reads them.
ServicesSection = dict[str, list[PlannedUnit]]


class SupportSection(TypedDict):
    """plan.support: the supported systems and the floors every host must meet (inventory/support.py)."""

    systems: list[dict[str, JsonValue]]
    kernel_min: str
    systemd_min: int
    service_manager: str
    python_min: str
    sources: dict[str, str]
    summary: str


__all__ = [
    "AddressPlan",
    "ClusterSection",
    "EtcHostsSection",
    "FileEntry",
    "FileRule",
    "FilesSection",
    "FirewallSection",
    "HostAddresses",
    "HostEntry",
    "HostFiles",
    "HostFirewall",
    "HostsSection",
    "JsonValue",
    "NetworkSection",
    "NetworkUnit",
    "Nic",
    "PlannedUnit",
    "RolloutSection",
    "ServicesSection",
    "SupportSection",
    "TimeSection",
]
