"""Read and check what a site HAS: the inventory's ``gpucluster_*`` variables and groups.

This is the engine's only entry for raw inventory data. It checks every field the plan
needs (presence, type, range) and returns a :class:`Site` of plain dataclasses; every
error is a :class:`PlanError` naming the inventory field, so a bad inventory stops the
plan play before any host is contacted. The defaults of optional fields are set here, once
(:class:`Facility`, :class:`Workload`, :class:`Lustre`, :class:`Storage`, :class:`Fabric`,
:class:`GpuPolicy`, the :class:`Node` fields, and the :class:`Site` fields and properties): the
engine (plan/assembly.py) reads those, and never writes a ``.get(key, default)``
of its own; tier-dependent numbers come from the tier profile (tiers.py). The sections a domain
module checks itself (Slurm's, the tenants', the containers', the rollout's, the costs') are Site fields
as written; a Site keeps no raw inventory (no engine module can read past the model).
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import (
    CLOCK_POLICIES,
    COMPUTE,
    FABRIC_TYPES,
    HEAD,
    NCCL_TOPOLOGIES,
    NIC_PURPOSES,
    ROLE_GROUPS,
    SLURM_BACKUP,
    STORAGE,
    STORAGE_GROUPS,
    STORAGE_TYPES,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.rules import check_rules
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import check_inventory
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tenants import DEFAULT_SCHEDULER
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tenants import scheduler as cluster_scheduler
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import tier_profile
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.values import (
    PACKAGE_SOURCE_VARIABLES,
    check_package_sources,
    check_secrets,
    check_values,
    secret_shape,
    value_strings,
)

PCI_BUS = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\Z")
HOSTNAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")


@dataclass
class Host:
    name: str
    roles: list[str]


@dataclass
class Nic:
    name: str
    netdev: str
    purpose: str
    rail: int | None = None
    rate_gbps: float | None = None
    width: str = "4x"
    pci_bus: str | None = None
    numa_node: int | None = None
    pcie_switch: str | None = None  # PCI address of the PCIe switch (upstream bridge) it sits under


@dataclass
class Gpu:
    index: int
    pci_bus: str
    numa_node: int
    nic: str | None
    pcie_switch: str | None = None  # as Nic.pcie_switch; GPU i and its NIC share one on a DGX-class node


@dataclass
class Node:
    gpu_model: str
    gpus_per_node: int
    cpu_sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_gib: float
    base_power_w: float
    gpus: list[Gpu]
    nics: list[Nic]
    psu_count: int | None = None
    psu_rating_w: float | None = None
    psu_redundancy: str | None = None  # N, N+<k> or N+N; None: N+1 with more than one PSU (compute/power.py)
    gpu_temp_limits: dict[str, Any] | None = None
    nccl_topology: str = "detect"  # detect | file: whether the plan writes an NCCL_TOPO_FILE
    one_compute_nic_per_gpu: bool = True  # false: the site opts out of the 1:1 GPU:compute-NIC rule (tier2+)
    pcie_gen: int = 5  # PCIe generation of the GPU/NIC links, for a topology file's link_speed
    gpu_software: dict[str, Any] | None = None  # as written; compute/bringup.py checks it and sets its defaults
    gpu_limits: dict[str, Any] | None = None  # the site's nvidia-smi readings, as written (inventory/gpu_limits.py)
    allreduce_intra_node_busbw_gbs: float | None = None  # unset: the floor from the GPU interconnect (floors.py)

    def nics_for(self, purpose: str) -> list[Nic]:
        return [n for n in self.nics if n.purpose == purpose]

    @property
    def compute_nics(self) -> list[Nic]:
        """Compute NICs in rail order."""
        return sorted(self.nics_for("compute"), key=lambda n: n.rail if n.rail is not None else -1)

    @property
    def cores(self) -> int:
        return self.cpu_sockets * self.cores_per_socket


@dataclass(frozen=True)
class Facility:
    """``gpucluster_facility`` with the defaults of its optional fields (the engine reads these, never the
    section with a default of its own). Ranges are checked where each value is used (power.py, cooling.py)."""

    rack_power_budget_kw: float | None = None
    breaker_amps: float | None = None
    circuit_voltage_v: float | None = None
    racks: int = 1
    pdu_rating_kw: float | None = None  # unset: the rack's power budget (load_site)
    circuit_phases: int = 3
    cooling: str = "air"  # air | dlc
    coolant_delta_t_k: float = 10  # the DLC loop's design rise (cooling.py dlc_thresholds)
    ashrae_class: str = "W32"  # docs/sources.md §6.1, ASHRAE TC 9.9 liquid-cooling classes
    liquid_heat_fraction: float = 1.0  # the share of the rack's heat the liquid loop carries
    ups: Any = None  # as written: compute/ups.py checks it (None: no UPS)


@dataclass(frozen=True)
class Workload:
    """``gpucluster_workload`` with the defaults of its optional fields (storage sizing, parallelism)."""

    model_params_b: float | None = None
    # bf16 weights and grads with fp32 master weights and Adam moments, ~12-14 B/param (storage/sizing.py)
    checkpoint_bytes_per_param: float = 14
    checkpoint_interval_min: float = 30
    checkpoint_overlap_target: float = 0.10
    gpu_hour_cost_usd: float = 4.0
    io_wait_fraction: float = 0.2
    allow_storage_below_need: bool = False
    checkpoint_async: Any = None  # storage/checkpoint.py reads and checks it
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None


@dataclass(frozen=True)
class Lustre:
    """``gpucluster_storage.lustre`` with the defaults of its optional fields (plan/assembly.py _lustre checks them)."""

    fsname: Any = "lustre"
    lnet_net: Any = "o2ib0"  # LNet's o2ib network 0: InfiniBand/RoCE verbs
    allow_format: Any = False  # the storage role formats no target unless the site says so
    mount_point: Any = None  # unset: /lustre/<fsname> (load_site)
    # as written (None: unset); plan/assembly.py _lustre and storage/lustre_targets.py check them
    osts_per_oss: Any = None
    server_interfaces: Any = None  # unset or empty: the storage servers' (Storage.server_interfaces)
    mdt_device: Any = None
    mdt_devices: Any = None  # the MDT's md mirror members (storage/raid.py); or mdt_device alone
    ost_devices: Any = None
    protection: Any = None  # {kind, level, mdt_level}; unset: md arrays (storage/raid.py)
    allow_unprotected: Any = False  # a raw single-device target plans only with true (a plan warning)
    allow_format_devices: Any = None
    layouts: Any = None  # per path; unset: storage/lustre.py's layouts


@dataclass(frozen=True)
class GpuPolicy:
    """``gpucluster_gpu_policy`` with the defaults of its optional fields (compute/clocks.py, mig.py check them)."""

    clock_policy: str = "max_performance"
    sm_mhz: Any = None
    mem_mhz: Any = None
    power_cap_w: Any = None  # unset: the policy's own limit (clocks.requested_power_limit)
    mig: Any = None  # unset: no MIG (compute/mig.py)


@dataclass(frozen=True)
class Storage:
    """``gpucluster_storage`` with the defaults of its optional fields. The sections of the storage kinds are
    the mappings their modules check (storage/nfs.py, nvmeof.py, beegfs.py, sizing.py); unset: empty."""

    type: str = "local_nvme"
    rated_write_gbps: float | None = None  # unset: sized from the tier's floor (storage/sizing.py)
    paths: dict[str, str] = field(default_factory=dict)  # {checkpoints, datasets, home}; unset: none
    local_scratch: str | None = None
    # the storage servers' storage-network interfaces: gpucluster_storage.server_interfaces, else (a Lustre
    # site) lustre.server_interfaces, else none; unchecked here, plan/assembly.py checks it naming ``..._field``
    server_interfaces: Any = field(default_factory=list)
    server_interfaces_field: str = "gpucluster_storage.server_interfaces"
    # their line rates and PCIe cards, {interface: {...}}; unset: none described (storage/sizing.py server_links)
    server_nics: Any = None
    local_nvme: dict[str, Any] = field(default_factory=dict)
    nfs: dict[str, Any] = field(default_factory=dict)
    nvmeof: dict[str, Any] = field(default_factory=dict)
    beegfs: dict[str, Any] = field(default_factory=dict)
    # the shared mount points the section of the storage's type names (its exports' and its own)
    mount_points: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fabric:
    """``gpucluster_fabric`` with the defaults of its optional fields; the whole section (switches, spines)
    stays :attr:`Site.fabric` for the cabling (fabric/cabling.py), which checks those itself."""

    type: str = "none"
    topology: str = "none"  # unset: none without a fabric, else the tier's (inventory/tiers.py)
    # unset: the first compute NIC's rate, else 4x NDR, 400 Gb/s (docs/sources.md [IV6])
    link_rate_gbps: float = 400
    infiniband: Any = None  # as written: fabric/fabric_host.py infiniband_settings checks it
    roce: Any = None  # as written: fabric/fabric_host.py roce_settings checks it


def _with_defaults(cls: Any, section: dict[str, Any]) -> Any:
    """``cls`` from the section's fields it names; a field the section leaves out keeps its default (a field
    written as null stays None, as the engine read it before)."""
    return cls(**{name: section[name] for name in cls.__dataclass_fields__ if name in section})


@dataclass
class Site:
    name: str
    tier: str
    domain: str
    hosts: list[Host]
    node: Node
    fabric: dict[str, Any]
    storage: dict[str, Any]
    facility: dict[str, Any]
    network: dict[str, Any]
    workload: dict[str, Any]
    gpu_policy: dict[str, Any]  # clock_policy set and checked (load_site); the other fields as written
    lab: dict[str, Any] = field(default_factory=dict)
    facility_model: Facility = field(default_factory=Facility)  # facility with its defaults
    workload_model: Workload = field(default_factory=Workload)  # workload with its defaults
    lustre_model: Lustre = field(default_factory=Lustre)  # storage.lustre with its defaults
    storage_model: Storage = field(default_factory=Storage)  # storage with its defaults
    fabric_model: Fabric = field(default_factory=Fabric)  # fabric with its defaults
    policy_model: GpuPolicy = field(default_factory=GpuPolicy)  # gpu_policy with its defaults
    scheduler: str = DEFAULT_SCHEDULER  # gpucluster_cluster.scheduler, checked (inventory/tenants.py)
    ntp_servers: list[str] = field(default_factory=list)  # gpucluster_network.ntp_servers; unset: none
    # the sections their modules check themselves, as written (None: unset)
    tenants: Any = None  # gpucluster_tenants (inventory/tenants.py)
    slurm: Any = None  # gpucluster_slurm (slurm/settings.py; not a mapping: accounting.py names it)
    slurm_health: Any = None  # gpucluster_slurm.health (compute/health.py); None unless slurm is a mapping
    containers: Any = None  # gpucluster_containers (compute/containers.py)
    rollout: Any = None  # gpucluster_rollout (plan/rollout.py)
    healing: Any = None  # gpucluster_healing (compute/healing.py)
    costs: Any = None  # gpucluster_costs (fabric/tco.py)

    @property
    def subnet_manager(self) -> str:
        """Where the InfiniBand subnet manager runs (``gpucluster_fabric.subnet_manager``, default the head)."""
        return str(self.fabric.get("subnet_manager", "head"))

    @property
    def in_lab(self) -> bool:
        """The site is the container lab (``gpucluster_lab.enabled``, default false)."""
        return bool(self.lab.get("enabled", False))

    @property
    def lab_overrides(self) -> dict[str, Any]:
        """``gpucluster_lab`` when the lab is enabled, else nothing: its overrides apply in the lab only."""
        return self.lab if self.in_lab else {}

    @property
    def memlock_kb(self) -> str:
        """The memlock limit of every host: unlimited, or the lab's ``memlock_kb`` (containers)."""
        return str(self.lab_overrides.get("memlock_kb", "unlimited"))

    @property
    def chrony_no_clock_control(self) -> bool:
        """The lab's chronyd serves time without setting the clock (containers lack CAP_SYS_TIME), by default."""
        return bool(self.in_lab and self.lab.get("chrony_no_clock_control", True))

    @property
    def management_interface(self) -> str:
        """The hosts' management interface (``gpucluster_network.management.interface``, default eth0)."""
        return str((self.network.get("management") or {}).get("interface", "eth0"))

    def hosts_in(self, role: str) -> list[str]:
        return [h.name for h in self.hosts if role in h.roles]

    @property
    def compute_hosts(self) -> list[str]:
        return self.hosts_in(COMPUTE)

    @property
    def head(self) -> str:
        return self.hosts_in(HEAD)[0]

    @property
    def slurm_backups(self) -> list[str]:
        """Backup Slurm controllers, by name (group slurm_backup); the head is the primary."""
        return self.hosts_in(SLURM_BACKUP)


def _section(raw: dict[str, Any], name: str, required: bool = True) -> dict[str, Any]:
    value = raw.get(name)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise PlanError(name, value, "a mapping (see inventories/tier3/group_vars/all/ for an example)")
    return dict(value)


def _get(section: dict[str, Any], prefix: str, key: str, default: Any = ...) -> Any:
    if key in section and section[key] is not None:
        return section[key]
    if default is ...:
        raise PlanError(f"{prefix}.{key}", None, "a value is required here")
    return default


def _str(section: dict[str, Any], prefix: str, key: str, default: Any = ...) -> str:
    value = _get(section, prefix, key, default)
    if value is not None and not isinstance(value, str):
        raise PlanError(f"{prefix}.{key}", value, "a string")
    return value


def hosts_from_groups(groups: dict[str, list[str]]) -> list[Host]:
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


def _pcie_switch(item: dict[str, Any], field: str) -> str | None:
    """The optional ``pcie_switch`` of a GPU or NIC: a PCI address, stored lower-case as NCCL writes bus ids."""
    switch = item.get("pcie_switch")
    if switch is None:
        return None
    require(
        isinstance(switch, str) and bool(PCI_BUS.match(switch)),
        f"{field}.pcie_switch",
        switch,
        "the PCI address DDDD:BB:DD.F of the PCIe switch's upstream bridge (lspci -t / nvidia-smi topo -m)",
    )
    return switch.lower()


def _node(raw: dict[str, Any]) -> Node:
    p = "gpucluster_node"
    sec = _section(raw, p)
    gpus_per_node = check_range(_get(sec, p, "gpus_per_node"), f"{p}.gpus_per_node", 1, 16, integer=True)
    nics: list[Nic] = []
    seen: set[str] = set()
    for i, item in enumerate(_get(sec, p, "nics", [])):
        f = f"{p}.nics[{i}]"
        require(isinstance(item, dict), f, item, "a mapping with name, purpose, ...")
        name = _str(item, f, "name")
        require(name not in seen, f"{f}.name", name, "a NIC name not used before")
        seen.add(name)
        purpose = check_choice(_get(item, f, "purpose"), f"{f}.purpose", NIC_PURPOSES)
        rail = item.get("rail")
        if purpose == "compute":
            rail = check_range(rail, f"{f}.rail", 0, gpus_per_node - 1, integer=True)
        rate = item.get("rate_gbps")
        if rate is not None:
            rate = check_range(rate, f"{f}.rate_gbps", 1, 3200)
        bus = item.get("pci_bus")
        if bus is not None:
            require(bool(PCI_BUS.match(str(bus))), f"{f}.pci_bus", bus, "a PCI address DDDD:BB:DD.F")
        numa = item.get("numa_node")
        if numa is not None:
            numa = check_range(numa, f"{f}.numa_node", 0, 63, integer=True)
        nics.append(
            Nic(
                name,
                str(item.get("netdev", name)),
                purpose,
                rail,
                rate,
                str(item.get("width", "4x")),
                bus,
                numa,
                _pcie_switch(item, f),
            )
        )
    rails = [n.rail for n in nics if n.purpose == "compute"]
    require(len(rails) == len(set(rails)), f"{p}.nics", rails, "one compute NIC per rail (rails must not repeat)")
    gpus: list[Gpu] = []
    for i, item in enumerate(_get(sec, p, "gpus", [])):
        f = f"{p}.gpus[{i}]"
        require(isinstance(item, dict), f, item, "a mapping with index, pci_bus, numa_node, nic")
        idx = check_range(_get(item, f, "index"), f"{f}.index", 0, gpus_per_node - 1, integer=True)
        bus = _str(item, f, "pci_bus")
        require(bool(PCI_BUS.match(bus)), f"{f}.pci_bus", bus, "a PCI address DDDD:BB:DD.F")
        numa = check_range(_get(item, f, "numa_node"), f"{f}.numa_node", 0, 63, integer=True)
        nic = item.get("nic")
        require(nic is None or nic in seen, f"{f}.nic", nic, "the name of a NIC listed in gpucluster_node.nics")
        gpus.append(Gpu(idx, bus, numa, nic, _pcie_switch(item, f)))
    if gpus:
        require(
            sorted(g.index for g in gpus) == list(range(gpus_per_node)),
            f"{p}.gpus",
            [g.index for g in gpus],
            f"one entry per GPU, indexes 0..{gpus_per_node - 1}",
        )
    _check_unique_pci_bus(gpus, nics)
    limits = sec.get("gpu_temp_limits")
    return Node(
        gpu_model=_str(sec, p, "gpu_model"),
        gpus_per_node=gpus_per_node,
        cpu_sockets=check_range(_get(sec, p, "cpu_sockets"), f"{p}.cpu_sockets", 1, 8, integer=True),
        cores_per_socket=check_range(_get(sec, p, "cores_per_socket"), f"{p}.cores_per_socket", 1, 512, integer=True),
        threads_per_core=check_range(_get(sec, p, "threads_per_core", 1), f"{p}.threads_per_core", 1, 8, integer=True),
        memory_gib=check_range(_get(sec, p, "memory_gib"), f"{p}.memory_gib", 1, 65536),
        base_power_w=check_range(_get(sec, p, "base_power_w"), f"{p}.base_power_w", 0, 50000),
        gpus=sorted(gpus, key=lambda g: g.index),
        nics=nics,
        psu_count=sec.get("psu_count"),
        psu_rating_w=sec.get("psu_rating_w"),
        psu_redundancy=sec.get("psu_redundancy"),
        gpu_temp_limits=limits if isinstance(limits, dict) else None,
        nccl_topology=check_choice(_get(sec, p, "nccl_topology", "detect"), f"{p}.nccl_topology", NCCL_TOPOLOGIES),
        # PCIe Gen5 x16: H100 SXM and ConnectX-7 (Azure's H100 topo file, azhpc-images topology/ndv5-topo.xml)
        pcie_gen=check_range(_get(sec, p, "pcie_gen", 5), f"{p}.pcie_gen", 3, 6, integer=True),
        one_compute_nic_per_gpu=_get(sec, p, "one_compute_nic_per_gpu", True),
        gpu_software=sec.get("gpu_software"),
        gpu_limits=sec.get("gpu_limits"),
        allreduce_intra_node_busbw_gbs=sec.get("allreduce_intra_node_busbw_gbs"),
    )


def _check_unique_pci_bus(gpus: list[Gpu], nics: list[Nic]) -> None:
    """No two devices of a node (GPUs and NICs) at one PCI address: NCCL's topology would list it twice."""
    seen: dict[str, str] = {}
    devices = [(f"gpus[{g.index}]", g.pci_bus) for g in gpus] + [
        (f"nics[{i}]", n.pci_bus) for i, n in enumerate(nics) if n.pci_bus
    ]
    for where, bus in devices:
        bus = bus.lower()
        require(
            bus not in seen,
            f"gpucluster_node.{where}.pci_bus",
            bus,
            f"a PCI address no other device of the node has (gpucluster_node.{seen.get(bus)} is at {bus})",
        )
        seen[bus] = where


def _check_gpu_nic_pairing(node: Node, tier: str, fabric_type: str) -> None:
    """Tier2 and up with a fabric: exactly one compute NIC per GPU, each GPU on its own (the 1:1 rail design,
    docs/fabric.md), unless ``gpucluster_node.one_compute_nic_per_gpu: false`` opts out."""
    p = "gpucluster_node"
    if tier == "tier1" or fabric_type == "none" or node.one_compute_nic_per_gpu is False:
        return
    opt_out = f"(or set {p}.one_compute_nic_per_gpu: false to opt out of the 1:1 design)"
    compute = node.compute_nics
    require(
        len(compute) == node.gpus_per_node,
        f"{p}.nics",
        [n.name for n in compute],
        f"exactly one compute NIC per GPU on {tier}: {node.gpus_per_node} for {p}.gpus_per_node "
        f"{node.gpus_per_node}, not {len(compute)} {opt_out}",
    )
    names = {n.name for n in compute}
    owner: dict[str, int] = {}
    for gpu in node.gpus:
        f = f"{p}.gpus[{gpu.index}].nic"
        require(
            gpu.nic in names, f, gpu.nic, f"the name of a compute NIC (one of {', '.join(sorted(names))}) {opt_out}"
        )
        require(
            gpu.nic not in owner,
            f,
            gpu.nic,
            f"a compute NIC no other GPU uses (GPU {owner.get(gpu.nic)} is on {gpu.nic}) {opt_out}",
        )
        owner[str(gpu.nic)] = gpu.index


def load_site(raw: dict[str, Any], groups: dict[str, list[str]]) -> Site:
    """Check the inventory and return a :class:`Site`; raise PlanError on the first bad field."""
    require(isinstance(raw, dict), "gpucluster_*", type(raw).__name__, "a mapping of the gpucluster_* variables")
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
    cluster = _section(raw, "gpucluster_cluster")
    name = _str(cluster, "gpucluster_cluster", "name")
    require(
        bool(re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z", name)),
        "gpucluster_cluster.name",
        name,
        "letters, digits, '.', '_' and '-' (it names build/plan/<name>)",
    )
    node = _node(raw)
    fabric = _section(raw, "gpucluster_fabric")
    fabric_type = check_choice(_get(fabric, "gpucluster_fabric", "type"), "gpucluster_fabric.type", FABRIC_TYPES)
    tier = _str(cluster, "gpucluster_cluster", "tier")
    _check_gpu_nic_pairing(node, tier, fabric_type)
    storage = _section(raw, "gpucluster_storage")
    check_choice(_get(storage, "gpucluster_storage", "type"), "gpucluster_storage.type", STORAGE_TYPES)
    policy = _section(raw, "gpucluster_gpu_policy", required=False)
    policy.setdefault("clock_policy", GpuPolicy.clock_policy)
    check_choice(policy["clock_policy"], "gpucluster_gpu_policy.clock_policy", CLOCK_POLICIES)
    site = Site(
        name=name,
        tier=tier,
        domain=_str(cluster, "gpucluster_cluster", "domain", "cluster.internal"),
        hosts=hosts_from_groups(groups),
        node=node,
        fabric=fabric,
        storage=storage,
        facility=_section(raw, "gpucluster_facility"),
        network=_section(raw, "gpucluster_network"),
        workload=_section(raw, "gpucluster_workload"),
        gpu_policy=policy,
        lab=_section(raw, "gpucluster_lab", required=False),
    )
    # the optional fields' defaults, once, here (the engine reads these, never a section with its own default)
    site.facility_model = _with_defaults(
        Facility, {"pdu_rating_kw": site.facility.get("rack_power_budget_kw"), **site.facility}
    )
    site.workload_model = _with_defaults(Workload, site.workload)
    lustre = site.storage.get("lustre") if isinstance(site.storage.get("lustre"), dict) else {}
    fsname = lustre.get("fsname", Lustre.fsname)
    site.lustre_model = _with_defaults(Lustre, {"mount_point": f"/lustre/{fsname}", **lustre})
    # the tier's profile first (an unknown tier names gpucluster_cluster.tier before any later field)
    site.fabric_model = _fabric_model(site.fabric, fabric_type, tier, node)
    site.storage_model = _storage_model(site.storage)
    site.policy_model = _with_defaults(GpuPolicy, site.gpu_policy)
    site.scheduler = cluster_scheduler(cluster)
    site.ntp_servers = list(site.network.get("ntp_servers") or [])
    site.tenants = raw.get("gpucluster_tenants")
    site.slurm = raw.get("gpucluster_slurm")
    site.slurm_health = site.slurm.get("health") if isinstance(site.slurm, dict) else None
    site.containers = raw.get("gpucluster_containers")
    site.rollout = raw.get("gpucluster_rollout")
    site.healing = raw.get("gpucluster_healing")
    site.costs = raw.get("gpucluster_costs")
    return site


def _storage_model(storage: dict[str, Any]) -> Storage:
    """``gpucluster_storage`` (type checked) with its defaults."""
    kinds = {k: dict(storage.get(k) or {}) for k in ("local_nvme", "nfs", "nvmeof", "beegfs")}
    servers, servers_field = storage.get("server_interfaces"), "gpucluster_storage.server_interfaces"
    if servers is None:  # a Lustre site may name them in its lustre section only
        servers = (storage.get("lustre") or {}).get("server_interfaces") or []
        servers_field = "gpucluster_storage.lustre.server_interfaces"
    own = storage.get(storage["type"])
    kind = own if isinstance(own, dict) else {}
    mounts = [e.get("mount_point") for e in kind.get("exports") or [] if isinstance(e, dict)]
    mounts.append(kind.get("mount_point"))
    return Storage(
        type=storage["type"],
        rated_write_gbps=storage.get("rated_write_gbps"),
        paths=dict(storage.get("paths") or {}),
        local_scratch=storage.get("local_scratch"),
        server_interfaces=servers,
        server_interfaces_field=servers_field,
        server_nics=storage.get("server_nics"),
        mount_points=tuple(m for m in mounts if isinstance(m, str)),
        **kinds,
    )


def _fabric_model(fabric: dict[str, Any], fabric_type: str, tier: str, node: Node) -> Fabric:
    """``gpucluster_fabric`` (type checked) with its defaults: the topology of the tier (an unknown tier is
    an error naming gpucluster_cluster.tier), the link rate of the first compute NIC."""
    profile = tier_profile(tier)
    nics = node.compute_nics
    return Fabric(
        type=fabric_type,
        topology=fabric.get("topology") or ("none" if fabric_type == "none" else profile.topology),
        # the class default (4x NDR, docs/sources.md [IV6]) when neither the fabric nor the NICs give a rate
        link_rate_gbps=fabric.get("link_rate_gbps") or (nics[0].rate_gbps if nics else None) or Fabric.link_rate_gbps,
        infiniband=fabric.get("infiniband"),
        roce=fabric.get("roce"),
    )


#: Where the plan is written: a command-line choice (-e) only, never an inventory variable, so that an
#: inventory cannot write the plan (and every host's files) outside build/ (playbooks/plan.yml).
COMMAND_LINE_ONLY = ("gpucluster_plan_root", "gpucluster_plan_dir")
#: gpucluster_* names that are a run's switches or results, not site data (tasks/plan.yml does not read
#: them as the site): the plan and its files (localhost's whole plan ``gpucluster_plan``, a host play's
#: slice of it ``gpucluster_host_plan``), the converge lock, the shutdown. tasks/plan.yml's varnames
#: pattern and the cluster_plan filter leave out the same names.
RUN_PREFIXES = ("gpucluster_plan", "gpucluster_host_plan", "gpucluster_lock", "gpucluster_shutdown_")
#: The prefix of every site variable; a variable whose first word is this close to it is a typo.
PREFIX = "gpucluster"


def _near_miss(name: str, known: list[str]) -> str | None:
    """The site variable ``name`` was probably meant as (``gpucluser_gpu_policy`` -> gpucluster_gpu_policy)."""
    return _near_miss_of(name, tuple(known))


@functools.lru_cache(maxsize=4096)
def _near_miss_of(name: str, known: tuple[str, ...]) -> str | None:
    """:func:`_near_miss`, once per name: every host of a site has the same few dozen variable names
    (difflib per host and name was most of the plan stage's inventory check at 16,384 nodes)."""
    if name.startswith(PREFIX + "_"):
        return None
    first, _sep, rest = name.partition("_")
    if first != PREFIX and difflib.SequenceMatcher(None, first.lower(), PREFIX).ratio() >= 0.85:
        guess = difflib.get_close_matches(f"{PREFIX}_{rest}", known, n=1, cutoff=0.6)
        return guess[0] if guess else f"{PREFIX}_{rest}"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
    return close[0] if close else None


def check_host_variables(
    host_vars: dict[str, dict[str, Any]],
    *,
    controller: str = "localhost",
    extra_vars: frozenset[str] | set[str] = frozenset(),
    known: list[str] | None = None,
    per_host: frozenset[str] = frozenset(),
) -> None:
    """Refuse inventory variables the plan would ignore or that would move it (issue 30, item 3 and 5).

    ``host_vars``: each host's inventory variables (the controller's too), only the names this check
    reads: ``gpucluster_*`` names, names close to them and ``ansible_host``. The plan reads the
    ``gpucluster_*`` variables as the controller sees them: those of group ``all``. So:

    - a variable named like a site variable but misspelt (``gpucluser_gpu_policy``) is an error with
      "did you mean";
    - a ``gpucluster_*`` variable whose value on a host differs from group all's (set in host_vars, on
      another group, or in hosts.yml) is an error, unless ``per_host`` declares it;
    - ``gpucluster_plan_root`` and ``gpucluster_plan_dir`` come from the command line (``extra_vars``) only;
    - two hosts with one ``ansible_host`` are an error (two inventory hosts, one machine);
    - a package repository the roles would add (``values.PACKAGE_SOURCES``, role variables: each host's own)
      without a signing key and its pinned fingerprint, or reached over http, is an error (issue 37).
    """
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import RUNTIME_NAMES, SCHEMA

    known = sorted(SCHEMA["properties"]) if known is None else known
    order = [controller, *sorted(h for h in host_vars if h != controller)]
    for host in order:
        for name in sorted(host_vars.get(host) or {}):
            guess = _near_miss(name, known)
            where = "group all" if host == controller else f"host {host}"
            require(
                guess is None,
                name,
                name,
                f"a site variable's name, gpucluster_<section> (known: {', '.join(known)}); set on {where}; "
                f"did you mean '{guess}'?",
            )
            require(
                name not in COMMAND_LINE_ONLY or name in extra_vars,
                name,
                _shown_value((host_vars.get(host) or {}).get(name)),
                f"a command-line choice only (-e {name}=PATH): an inventory (here on {where}) cannot move where the"
                " plan and every host's files are written (build/plan/<name>/ under the current directory by default)",
            )
        check_package_sources(host_vars.get(host) or {}, "group all" if host == controller else f"host {host}")
    reference = host_vars.get(controller) or {}

    def site_names(values: dict[str, Any]) -> list[str]:
        return sorted(
            n
            for n in values
            if n.startswith(PREFIX + "_")
            and n not in RUNTIME_NAMES
            and not n.startswith(RUN_PREFIXES)
            and n not in per_host
            and n not in extra_vars
        )

    for host in order[1:]:
        values = host_vars.get(host) or {}
        for name in site_names(values):
            require(
                name in reference and values[name] == reference[name],
                name,
                _shown_value(values[name]),
                f"a value set on group all only (group_vars/all/ or all: vars:): host {host} has "
                + ("its own value" if name in reference else "it while group all has none")
                + f" (host_vars/{host}, another group's group_vars, or hosts.yml), which the plan would ignore",
            )
    if "ansible_host" in extra_vars:  # -e ansible_host=... gives every host one address on purpose
        return
    seen: dict[str, str] = {}
    for host in order[1:]:
        address = str((host_vars.get(host) or {}).get("ansible_host") or host)
        require(
            address not in seen,
            f"hostvars.{host}.ansible_host",
            address,
            f"an address no other host has ({seen.get(address)} has {address} too: two inventory hosts would be one"
            " machine, configured twice with two roles)",
        )
        seen[address] = host


def _shown_value(value: Any) -> Any:
    # a value holding something shaped like a token is not shown (the error lands in logs and artifacts)
    if any(secret_shape(text) for _path, text in value_strings(value, [])):
        return "<hidden: it holds a value that looks like a secret>"
    text = repr(value)
    return value if len(text) <= 80 else f"{text[:80]}... ({len(text)} characters)"


def variables_to_check(values: dict[str, Any], known: list[str] | None = None) -> dict[str, Any]:
    """The part of one host's variables :func:`check_host_variables` reads (gpucluster_* names, names
    close to them, ansible_host, the package sources' role variables), so the filter converts no more than those."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import SCHEMA

    known = sorted(SCHEMA["properties"]) if known is None else known
    return {
        n: v
        for n, v in values.items()
        if isinstance(n, str)
        and (n.startswith(PREFIX + "_") or n == "ansible_host" or n in PACKAGE_SOURCE_VARIABLES or _near_miss(n, known))
    }
