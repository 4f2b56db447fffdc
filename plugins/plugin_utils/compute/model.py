"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

Each section is a TypedDict of the keys its builder writes, nested TypedDicts for nested objects,
``NotRequired`` for keys present only sometimes. They are plain dicts at run time: plan.json and every host
file are what the builders wrote before. Keys that are not Python names (``mig-configs``, ``class``) use the
functional form."""

from __future__ import annotations

from typing import NotRequired, TypedDict

#: free JSON data (a catalog table carried through as the catalog wrote it)
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


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


# --- plan.power, plan.cooling, plan.parallelism, plan.ups -------------------------------------------------------


class PsuSection(TypedDict):
    count: int
    rating_w: float
    redundant: int
    level: str
    surviving_w: float


class PowerLimitSection(TypedDict):
    """compute/power.py PowerLimit as plain data."""

    power_limit_w: int
    power_limit_source: str
    power_limit_reason: str
    power_limit_w_uncapped: int
    reset_power_limit_w: int | None


class PowerSection(PowerLimitSection):
    """plan.power (compute/power.py power_plan): every kW at the applied limit, ``*_uncapped`` at the
    requested one."""

    gpu_load_kw_per_node: float
    node_kw: float
    gpu_load_kw_total: float
    total_kw: float
    rack_kw: float
    gpu_load_kw_per_node_uncapped: float
    node_kw_uncapped: float
    gpu_load_kw_total_uncapped: float
    total_kw_uncapped: float
    rack_kw_uncapped: float
    nodes_per_rack: int
    psu: PsuSection | None
    rack_budget_kw: float
    fits: bool
    capped: bool
    per_gpu_cap_w_to_fit: int | None
    node_kw_fitted: float
    rack_kw_fitted: float
    circuit_kw: float
    nodes_per_circuit: int
    circuits_per_rack: int | None
    notes: list[str]


class CoolingSection(TypedDict):
    """plan.cooling (compute/cooling.py dlc_thresholds): the keys past ``cooling`` only for a liquid loop."""

    cooling: str
    ashrae_class: NotRequired[str]
    heat_load_kw: NotRequired[float]
    liquid_fraction: NotRequired[float]
    liquid_heat_kw: NotRequired[float]
    design_delta_t_k: NotRequired[float]
    required_flow_lpm: NotRequired[float]
    supply_max_c: NotRequired[int]
    supply_warn_c: NotRequired[int]
    return_warn_c: NotRequired[float]
    return_max_c: NotRequired[float]
    delta_t_high_k: NotRequired[float]
    delta_t_low_k: NotRequired[float]
    flow_low_lpm: NotRequired[float]
    flow_critical_lpm: NotRequired[float]
    notes: list[str]


class BytesSplit(TypedDict):
    params: float
    grads: float
    optimizer: float


class ParallelismSection(TypedDict):
    """plan.parallelism (compute/parallelism.py parallelism)."""

    tp: int
    pp: int
    dp: int
    zero_stage: int
    model_params_b: float
    total_gpus: int
    bytes_per_param: float
    bytes_split: BytesSplit
    state_gb_total: float
    state_gb_per_gpu: float
    state_gb_per_gpu_sharded: float
    gb_per_gpu: float
    gb_per_gpu_by_zero_stage: dict[str, float]
    gpu_memory_gb: float
    memory_headroom: float
    gpu_memory_budget_gb: float
    activations_headroom_gb: float
    fits: bool
    tp_domain_gpus: int
    smallest_fitting_tier: str | None
    strategy: str
    notes: list[str]


#: one step of the UPS shutdown sequence: its name in the playbook, which hosts, the command
class ShutdownStep(TypedDict):
    step: str
    on: str
    does: str


class UpsShutdown(TypedDict):
    grace_s: int
    power_off_s: int
    sequence_s: int
    poll_s: int
    polls: int
    drain_async_s: int
    signal: str
    reason: str
    steps: list[ShutdownStep]


class RuntimePoint(TypedDict):
    load_percent: float
    minutes: float


class UpsRating(TypedDict):
    rating_kva: float
    rating_kw: float
    power_factor: float
    power_factor_source: str
    runtime_minutes: float
    scope: str
    other_load_kw: float
    end_of_life_capacity: float
    runtime_points: list[RuntimePoint]


class UpsCheck(TypedDict):
    ups: UpsRating
    load_kw: float
    compute_load_kw: float
    load_percent: float
    runtime_minutes_new: float | None
    runtime_minutes: float | None
    method: str
    approximation: bool
    sequence_minutes: float
    minimum_minutes: float
    status: str
    message: str


class UpsSection(TypedDict):
    """plan.ups (compute/ups.py ups_plan)."""

    configured: bool
    shutdown: UpsShutdown
    check: UpsCheck | None


# --- plan.health, plan.dcgm -------------------------------------------------------------------------------------


class HealthMode(TypedDict):
    enabled: bool
    program: str
    checks: list[str]


class HealthScheduler(TypedDict):
    """How the check takes a node out; the keys past ``kind`` on the Kubernetes path only."""

    kind: str
    kubectl: NotRequired[str]
    kubeconfig: NotRequired[str]
    taint: NotRequired[str]
    reason_annotation: NotRequired[str]
    dry_run: NotRequired[bool]


class HealthDcgm(TypedDict):
    level: int
    timeout_s: int
    host: str


class HealthRecorded(TypedDict):
    nvidia_smi_output: str


class HealthNvlsm(TypedDict):
    modules: list[str]
    process: str


class HealthGpu(TypedDict):
    count: int
    temp_warn_c: int
    temp_critical_c: int
    temp_source: str
    fabric_state: bool
    nvlink_links: int | None
    nvlsm: HealthNvlsm | None


class HealthFabric(TypedDict):
    type: str
    rate_gbps: float | None


class HealthCoolant(TypedDict):
    supply_max_c: int
    return_max_c: float
    flow_min_lpm: float


class HealthNode(TypedDict):
    slurm_node: str
    fabric_ports: list[str]


class HealthSection(TypedDict):
    """plan.health (compute/health.py health_config)."""

    schema: int
    reason_prefix: str
    lab: bool
    modes: dict[str, HealthMode]
    interval_s: int
    scheduler: HealthScheduler
    dcgm: HealthDcgm
    recorded: HealthRecorded | None
    gpu: HealthGpu
    gpudirect_module: str | None
    gpudirect_open_modules: bool
    fabric: HealthFabric
    coolant: HealthCoolant | None
    nodes: dict[str, HealthNode]


class Hostengine(TypedDict):
    command: str
    socket: str
    socket_dir: str
    socket_dir_mode: str
    runtime_directory: str
    address: str
    tcp_port: int
    min_dcgm_version: str


class ExporterCounter(TypedDict):
    field: str
    type: str
    help: str


class DcgmExporter(TypedDict):
    counters_file: str
    counters: list[ExporterCounter]
    hostengine: str


class DcgmSection(TypedDict):
    """plan.dcgm (compute/dcgm.py dcgm_policy)."""

    dcgmi: str
    health_systems: str
    health_watches: list[str]
    health_args: list[str]
    policy: None
    hostengine: Hostengine
    policy_consumers: dict[str, str]
    clear_command: str
    commands: list[str]
    exporter: DcgmExporter
    notes: list[str]


# --- plan.healing -----------------------------------------------------------------------------------------------


class ActiveCheck(TypedDict):
    """One active check: ``enabled``, ``why`` and ``budget_s`` always, the rest as the check has them."""

    enabled: bool
    why: str | None
    budget_s: int
    floor: NotRequired[float | None]
    unit: NotRequired[str]
    command: NotRequired[list[str]]
    level: NotRequired[int]
    rails: NotRequired[int | None]
    floor_basis: NotRequired[str]
    path: NotRequired[str | None]


class HealingActive(TypedDict):
    enabled: bool
    interval_s: int
    qos: str
    user: str
    program: str
    nodes_at_once: int
    overdue_after_s: int
    checks: dict[str, ActiveCheck]


#: a remediation class of the catalogue (compute/healing_classes.py CLASSES): ``written`` are literal reasons
#: of each format the unit tests match against it; ``action`` None for ``xid`` (by XID)
ClassRule = TypedDict(
    "ClassRule", {"class": str, "match": str, "action": "str | None", "why": str, "written": "list[str]"}
)

#: a remediation class as planned: ``action``, or for ``xid`` the action per XID (``by_xid``) and the rest
RemediationClass = TypedDict(
    "RemediationClass",
    {
        "class": str,
        "match": str,
        "by_xid": NotRequired["dict[str, str]"],
        "default": NotRequired[str],
        "combine": NotRequired[str],
        "source": NotRequired[str],
        "action": NotRequired[str],
        "why": str,
    },
)


class HealingRemediation(TypedDict):
    enabled: bool
    interval_s: int
    nodes_at_once: int
    rollout_batch_nodes: int
    retries: int
    window_s: int
    reboot_timeout_s: int
    validate_timeout_s: int
    stuck_after_s: int
    stale_after_s: int
    classes: list[RemediationClass]
    actions: list[str]
    ticket: str


class HealingBisect(TypedDict):
    floor: float | None
    unit: str
    max_rounds: None


class HealingSection(TypedDict):
    """plan.healing (compute/healing.py healing_plan)."""

    schema: int
    enabled: bool
    why: str | None
    dry_run: bool
    reason_prefix: str
    program: str
    unit: str
    state_dir: str
    history: str
    metrics: str
    metric_names: list[str]
    active: HealingActive
    remediation: HealingRemediation
    bisect: HealingBisect


# --- plan.containers --------------------------------------------------------------------------------------------


class MountEntry(TypedDict):
    source: str
    target: str
    options: str
    why: str


class ConfigMount(TypedDict):
    source: str
    target: str
    options: str


class Registry(TypedDict):
    host: str
    credential: str | None


class ContainerCache(TypedDict):
    path: str
    size_gb: int
    filesystem: str
    local_capacity_gb: int | None
    staging_gb: float


class PyxisSource(TypedDict):
    url: str
    sha256: str


class EnrootFolder(TypedDict):
    path: str
    mode: str


class EnrootPlan(TypedDict):
    conf: dict[str, str]
    nvidia_hook: str
    plugin: str
    user_roots: list[str]
    runtime_root: str
    folders: list[EnrootFolder]
    pyxis_source: PyxisSource | None


class ContainersConfig(TypedDict):
    """/etc/gpucluster/containers.json: what the OCI wrapper adds to every bundle."""

    run_dir: str | None
    mounts: list[ConfigMount]
    env: dict[str, str]
    devices: list[str]
    nvidia_hook: str | None
    nested: bool


class OciPlan(TypedDict):
    conf: dict[str, str]
    wrapper: str
    run_dir: str
    run_dir_mode: str
    state_root: str
    container_path: str
    nvidia_hook: str
    nested: bool
    config: NotRequired[ContainersConfig]


class ContainersSection(TypedDict):
    """plan.containers (compute/containers.py containers_plan)."""

    runtime: str
    enabled: bool
    reason: str
    mounts: list[MountEntry]
    env: dict[str, str]
    devices: list[str]
    registries: list[Registry]
    config_file: str
    cache: ContainerCache | None
    enroot: EnrootPlan | None
    oci: OciPlan | None


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
