"""The site model: what a site HAS, as typed dataclasses (inventory/site.py :func:`load_site` builds them).

The defaults of optional fields are set here, once (:class:`Facility`, :class:`Workload`, :class:`Lustre`,
:class:`Storage`, :class:`Fabric`, :class:`GpuPolicy`, the :class:`Node` fields, and the :class:`Site` fields
and properties): the engine reads those, and never writes a ``.get(key, default)`` of its own. The sections a
domain module checks itself (Slurm's, the tenants', the containers', the rollout's, the costs', a UPS, the
Lustre devices) are fields of :data:`JsonValue` as written; a Site keeps no other raw inventory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import (
    COMPUTE,
    HEAD,
    SLURM_BACKUP,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tenants import DEFAULT_SCHEDULER


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
    gpu_temp_limits: dict[str, JsonValue] | None = None  # as written; a mapping or None
    nccl_topology: str = "detect"  # detect | file: whether the plan writes an NCCL_TOPO_FILE
    one_compute_nic_per_gpu: bool = True  # false: the site opts out of the 1:1 GPU:compute-NIC rule (tier2+)
    pcie_gen: int = 5  # PCIe generation of the GPU/NIC links, for a topology file's link_speed
    gpu_software: dict[str, JsonValue] | None = None  # as written; compute/bringup.py checks it and sets its defaults
    gpu_limits: dict[str, JsonValue] | None = (
        None  # the site's nvidia-smi readings, as written (inventory/gpu_limits.py)
    )
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
    ups: dict[str, JsonValue] | None = None  # as written: compute/ups.py checks it (None: no UPS)


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
    checkpoint_async: dict[str, JsonValue] | None = None  # as written:/checkpoint.py reads and checks it
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None


@dataclass(frozen=True)
class Lustre:
    """``gpucluster_storage.lustre`` with the defaults of its optional fields (storage/lustre_plan.py checks them)."""

    fsname: str = "lustre"
    lnet_net: str = "o2ib0"  # LNet's o2ib network 0: InfiniBand/RoCE verbs
    allow_format: bool = False  # the storage role formats no target unless the site says so
    mount_point: str | None = None  # unset: /lustre/<fsname> (load_site)
    # as written (None: unset); storage/lustre_plan.py and storage/lustre_targets.py check them
    osts_per_oss: int | None = None
    server_interfaces: list[str] | None = None  # unset or empty: the storage servers' (Storage.server_interfaces)
    mdt_device: str | None = None
    mdt_devices: list[str] | None = None  # the MDT's md mirror members (storage/raid.py); or mdt_device alone
    ost_devices: list[str] | None = None
    protection: dict[str, JsonValue] | None = None  # {kind, level, mdt_level}; unset: md arrays (storage/raid.py)
    allow_unprotected: bool = False  # a raw single-device target plans only with true (a plan warning)
    allow_format_devices: list[str] | None = None
    layouts: dict[str, JsonValue] | None = None  # per path; unset: storage/lustre.py's layouts


@dataclass(frozen=True)
class GpuPolicy:
    """``gpucluster_gpu_policy`` with the defaults of its optional fields (compute/clocks.py, mig.py check them)."""

    clock_policy: str = "max_performance"
    sm_mhz: int | None = None
    mem_mhz: int | None = None
    power_cap_w: float | None = None  # unset: the policy's own limit (clocks.requested_power_limit)
    mig: list[dict[str, JsonValue]] | None = None  # as written; unset: no MIG (compute/mig.py)


@dataclass(frozen=True)
class Storage:
    """``gpucluster_storage`` with the defaults of its optional fields. The sections of the storage kinds are
    the mappings their modules check (storage/nfs.py, nvmeof.py, beegfs.py, sizing.py); unset: empty."""

    type: str = "local_nvme"
    rated_write_gbps: float | None = None  # unset: sized from the tier's floor (storage/sizing.py)
    paths: dict[str, str] = field(default_factory=dict)  # {checkpoints, datasets, home}; unset: none
    local_scratch: str | None = None
    # the storage servers' storage-network interfaces: gpucluster_storage.server_interfaces, else (a Lustre
    # site) lustre.server_interfaces, else none; unchecked here, storage/interfaces.py checks it naming ``..._field``
    server_interfaces: list[str] = field(default_factory=list)
    server_interfaces_field: str = "gpucluster_storage.server_interfaces"
    # their line rates and PCIe cards, {interface: {...}}; unset: none described (storage/sizing.py server_links)
    server_nics: dict[str, JsonValue] | None = None
    local_nvme: dict[str, JsonValue] = field(default_factory=dict)
    nfs: dict[str, JsonValue] = field(default_factory=dict)
    nvmeof: dict[str, JsonValue] = field(default_factory=dict)
    beegfs: dict[str, JsonValue] = field(default_factory=dict)
    # the shared mount points the section of the storage's type names (its exports' and its own)
    mount_points: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fabric:
    """``gpucluster_fabric`` with the defaults of its optional fields; the switch tree's fields as written
    (:attr:`tree`) for the cabling (fabric/cabling.py), which checks those itself."""

    type: str = "none"
    topology: str = "none"  # unset: none without a fabric, else the tier's (inventory/tiers.py)
    # unset: the first compute NIC's rate, else 4x NDR, 400 Gb/s (docs/sources.md [IV6])
    link_rate_gbps: float = 400
    subnet_manager: str = "head"  # where the InfiniBand subnet manager runs (fabric/fabric_host.py checks it)
    infiniband: dict[str, JsonValue] | None = None  # as written: fabric/fabric_host.py infiniband_settings checks it
    roce: dict[str, JsonValue] | None = None  # as written: fabric/fabric_host.py roce_settings checks it
    # switch_radix, switch_model, spines, spine_scope, oversubscription, min_spines as written (those set):
    # fabric/cabling.py radix_for and tree_fields check them and set their defaults
    tree: dict[str, JsonValue] = field(default_factory=dict)


@dataclass
class Site:
    name: str
    tier: str
    domain: str
    hosts: list[Host]
    node: Node
    # gpucluster_network as written: plan/addresses.py checks its address pools; management_interface and
    # ntp_servers below read the rest
    network: dict[str, JsonValue] = field(default_factory=dict)
    # gpucluster_lab as written: its overrides apply in the lab only (lab_overrides; storage/nfs.py checks its own)
    lab: dict[str, JsonValue] = field(default_factory=dict)
    facility_model: Facility = field(default_factory=Facility)  # facility with its defaults
    workload_model: Workload = field(default_factory=Workload)  # workload with its defaults
    lustre_model: Lustre = field(default_factory=Lustre)  # storage.lustre with its defaults
    storage_model: Storage = field(default_factory=Storage)  # storage with its defaults
    fabric_model: Fabric = field(default_factory=Fabric)  # fabric with its defaults
    policy_model: GpuPolicy = field(default_factory=GpuPolicy)  # gpu_policy with its defaults
    scheduler: str = DEFAULT_SCHEDULER  # gpucluster_cluster.scheduler, checked (inventory/tenants.py)
    ntp_servers: list[str] = field(default_factory=list)  # gpucluster_network.ntp_servers; unset: none
    # the sections their modules check themselves, as written (None: unset)
    tenants: JsonValue = None  # gpucluster_tenants (inventory/tenants.py)
    slurm: JsonValue = None  # gpucluster_slurm (slurm/settings.py; not a mapping: accounting.py names it)
    slurm_health: JsonValue = None  # gpucluster_slurm.health (compute/health.py); None unless slurm is a mapping
    containers: JsonValue = None  # gpucluster_containers (compute/containers.py)
    rollout: JsonValue = None  # gpucluster_rollout (plan/rollout.py)
    healing: JsonValue = None  # gpucluster_healing (compute/healing.py)
    costs: JsonValue = None  # gpucluster_costs (fabric/tco.py)

    @property
    def subnet_manager(self) -> str:
        """Where the InfiniBand subnet manager runs (``gpucluster_fabric.subnet_manager``, default the head)."""
        return self.fabric_model.subnet_manager

    @property
    def in_lab(self) -> bool:
        """The site is the container lab (``gpucluster_lab.enabled``, default false)."""
        return bool(self.lab.get("enabled", False))

    @property
    def lab_overrides(self) -> dict[str, JsonValue]:
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
        management = self.network.get("management")
        return str(management.get("interface", "eth0")) if isinstance(management, dict) else "eth0"

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
