"""The typed shapes of plan.gpu and plan.nccl: the GPU model, its clocks and temperatures, how the GPUs of a
node meet, MIG, bring-up and NCCL (compute/model.py re-exports them)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue

# --- plan.gpu -------------------------------------------------------------------------------------------------


class GpuModelSection(TypedDict):
    """plan.gpu.model: the catalog entry (inventory/catalog.py GpuModel) with the site's readings."""

    key: str
    name: str
    form_factor: str
    max_sm_mhz: int | None
    max_mem_mhz: int | None
    power_min_w: int | None
    power_default_w: int | None
    power_max_w: int | None
    memory_gb: float
    memory_bw_tbs: float | None
    nvlink_gen: int | None
    nvlink_gbs: int | None
    temp_max_operating_c: int | None
    temp_slowdown_c: int | None
    temp_shutdown_c: int | None
    memory_clock_lock: bool
    mig: dict[str, JsonValue] | None
    nvswitch: bool
    nvlink_links: int | None
    nvlsm: bool
    nvlink_domain_gpus: int | None
    sources: dict[str, str]


class ClocksSection(TypedDict):
    """plan.gpu.clocks (compute/clocks.py gpu_clocks)."""

    policy: str
    persistence: bool
    lock_gpu_clocks: list[int] | None
    lock_memory_clocks: list[int] | None
    power_limit_w: int
    power_limit_source: str
    power_limit_reason: str
    apply_args: list[str]
    reset_args: list[str]
    notes: list[str]


class TemperatureSection(TypedDict):
    """plan.gpu.temperature (compute/cooling.py gpu_temperature_thresholds)."""

    max_operating_c: int
    slowdown_c: int | None
    shutdown_c: int | None
    warn_c: int
    critical_c: int
    source: str
    notes: list[str]


class InterconnectSection(TypedDict):
    """plan.gpu.interconnect (compute/interconnect.py IntraNode)."""

    kind: str
    nvlink_gen: int | None
    domain_gpus: int
    link_gbs_per_direction: float
    pcie_gbs_per_direction: float
    pcie_gen: int
    reason: str
    tp_rule: str


#: one entry of a mig-parted config: the GPUs, whether MIG is on, the MIG devices by profile
PartedDevices = TypedDict(
    "PartedDevices",
    {"devices": "str | list[int]", "mig-enabled": bool, "mig-devices": NotRequired["dict[str, int]"]},
)


class PartedNamedConfig(TypedDict):
    name: str
    devices: list[PartedDevices]


#: nvidia-mig-parted's config as data (plan.gpu.mig.parted)
PartedConfig = TypedDict("PartedConfig", {"version": str, "mig-configs": "list[PartedNamedConfig]"})


class MigEntry(TypedDict):
    """One checked ``gpucluster_gpu_policy.mig`` entry and the placement found for its mix."""

    nodes: str
    gpus: str | list[int]
    profiles: list[str]
    placement: list[list[str | int]]


class MigConfig(TypedDict):
    """One node layout: its hosts (a host list), mig-parted entries, Slurm Gres and counts."""

    hosts: str
    devices: list[PartedDevices]
    gres: str
    mig_gpus: int
    whole_gpus: int
    instances: dict[str, int]


class MigSection(TypedDict):
    """plan.gpu.mig (compute/mig.py mig_plan)."""

    model: str
    compute_slices: int
    memory_slices: int
    entries: list[MigEntry]
    configs: dict[str, MigConfig]
    host_config: dict[str, str]
    config_file: str
    parted: PartedConfig
    mig_gpus: int
    k8s_resources: dict[str, int]


class LgipProfile(TypedDict):
    """One profile row of ``nvidia-smi mig -lgip``."""

    id: int
    instances: int
    memory_gib: float


class GresMigNode(TypedDict):
    node: str
    whole_type: str
    gpus: dict[str, dict[str, int]]


class GresMig(TypedDict):
    """The slurm role's part of the MIG nodes' gres.conf (compute/mig.py gres_mig)."""

    hosts: list[str]
    program: str | None
    conf: str | None
    config_file: str | None
    nodes: dict[str, GresMigNode]
    reason: str | None


class BillingWeights(TypedDict):
    """TRESBillingWeights and the unit of the GPU limits (compute/mig.py billing_weights)."""

    unit: str
    per_gpu: int
    tres: str
    untyped: float
    weights: dict[str, float]
    text: str


class GpuSoftware(TypedDict):
    """``gpucluster_node.gpu_software`` checked, as written (None: not given)."""

    driver_branch: int | None
    kernel_version: str | None
    kernel_modules: str | None
    gpudirect_rdma: str
    nccl_version: str | None
    rdma_stack: str
    pcie_acs: str
    iommu: str


class EffectiveSoftware(TypedDict):
    """What the nodes run, each value with where it comes from."""

    kernel_version: str
    kernel_from: str
    kernel_modules: str
    kernel_modules_from: str
    driver_branch: int | None
    nccl_version: str | None
    rdma_stack: str


class PciePlan(TypedDict):
    acs_disable: bool
    acs_unit: str | None
    acs_program: str | None
    bridge_class: str
    acs_register: str
    acs_value: str
    kernel_args: list[str]
    grub_dropin: str | None
    reboot_paths: list[str]
    reason: str


class GpudirectPlan(TypedDict):
    needed: bool
    method: str
    module: str | None
    modules_load_file: str | None
    open_modules_check: bool
    driver_version_file: str
    open_module_mark: str
    inputs: EffectiveSoftware
    rdma_stack: str
    doca_ofed: bool
    pcie: PciePlan
    reason: str


class NvlsmPlan(TypedDict):
    required: bool
    package: str | None
    modules: list[str]
    modules_load_file: str | None
    after: list[str]
    reason: str


class FabricManagerPlan(TypedDict):
    required: bool
    service: str
    package_prefix: str
    package: str | None
    before: list[str]
    nvlsm: NvlsmPlan
    reason: str


class BringupSection(TypedDict):
    """plan.gpu.bringup (compute/bringup.py bringup_plan)."""

    software: GpuSoftware
    nvswitch: bool
    fabric_manager: FabricManagerPlan
    gpudirect: GpudirectPlan
    nvlink_links: int | None


class GpuSection(TypedDict):
    """plan.gpu (compute/gpu.py gpu_plan)."""

    model: GpuModelSection
    clocks: ClocksSection
    temperature: TemperatureSection
    interconnect: InterconnectSection
    mig: MigSection | None
    bringup: BringupSection


# --- plan.nccl --------------------------------------------------------------------------------------------------


class IntraNodeTransport(TypedDict):
    transport: str
    nvls: str
    unset: list[str]
    checks: list[str]
    reason: str


#: one GPU or NIC of the NCCL topology file: its bus, PCI class and (a NIC) the RDMA device name
TopoDevice = TypedDict("TopoDevice", {"busid": str, "class": str, "net": "str | None"})
#: a PCIe switch of the topology file and the devices under it
TopoSwitch = TypedDict("TopoSwitch", {"busid": str, "class": str, "devices": "list[TopoDevice]"})


class TopoCpu(TypedDict):
    numaid: str
    switches: list[TopoSwitch]


class NcclTopology(TypedDict):
    """The node's PCI tree for NCCL_TOPO_FILE (compute/nccl.py nccl_topology)."""

    link_speed: str | None
    link_width: str
    cpus: list[TopoCpu]


class NcclSection(TypedDict):
    """plan.nccl (compute/nccl.py nccl_plan)."""

    enabled: bool
    conf: dict[str, str]
    topology: str
    topology_reason: str
    topology_tree: NcclTopology | None
    topo_file: str | None
    intra_node: IntraNodeTransport
