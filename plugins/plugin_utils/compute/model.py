"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

Each section is a TypedDict of the keys its builder writes, nested TypedDicts for nested objects,
``NotRequired`` for keys present only sometimes. They are plain dicts at run time: plan.json and every host
file are what the builders wrote before. Keys that are not Python names (``mig-configs``, ``class``) use the
functional form. The shapes of plan.gpu and plan.nccl live in compute/model_gpu.py, those of plan.health,
plan.dcgm and plan.healing in compute/model_ops.py; every name is importable from here."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model_gpu import (
    BillingWeights,
    BringupSection,
    ClocksSection,
    EffectiveSoftware,
    FabricManagerPlan,
    GpudirectPlan,
    GpuModelSection,
    GpuSection,
    GpuSoftware,
    GresMig,
    GresMigNode,
    InterconnectSection,
    IntraNodeTransport,
    JsonValue,
    LgipProfile,
    MigConfig,
    MigEntry,
    MigSection,
    NcclSection,
    NcclTopology,
    NvlsmPlan,
    PartedConfig,
    PartedDevices,
    PartedNamedConfig,
    PciePlan,
    TemperatureSection,
    TopoCpu,
    TopoDevice,
    TopoSwitch,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model_ops import (
    ActiveCheck,
    ClassRule,
    DcgmExporter,
    DcgmSection,
    ExporterCounter,
    HealingActive,
    HealingBisect,
    HealingRemediation,
    HealingSection,
    HealthCoolant,
    HealthDcgm,
    HealthFabric,
    HealthGpu,
    HealthMode,
    HealthNode,
    HealthNvlsm,
    HealthRecorded,
    HealthScheduler,
    HealthSection,
    Hostengine,
    RemediationClass,
)

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


__all__ = [
    "ActiveCheck",
    "BillingWeights",
    "BringupSection",
    "BytesSplit",
    "ClassRule",
    "ClocksSection",
    "ConfigMount",
    "ContainerCache",
    "ContainersConfig",
    "ContainersSection",
    "CoolingSection",
    "DcgmExporter",
    "DcgmSection",
    "EffectiveSoftware",
    "EnrootFolder",
    "EnrootPlan",
    "ExporterCounter",
    "FabricManagerPlan",
    "GpuModelSection",
    "GpuSection",
    "GpuSoftware",
    "GpudirectPlan",
    "GresMig",
    "GresMigNode",
    "HealingActive",
    "HealingBisect",
    "HealingRemediation",
    "HealingSection",
    "HealthCoolant",
    "HealthDcgm",
    "HealthFabric",
    "HealthGpu",
    "HealthMode",
    "HealthNode",
    "HealthNvlsm",
    "HealthRecorded",
    "HealthScheduler",
    "HealthSection",
    "Hostengine",
    "InterconnectSection",
    "IntraNodeTransport",
    "JsonValue",
    "LgipProfile",
    "MigConfig",
    "MigEntry",
    "MigSection",
    "MountEntry",
    "NcclSection",
    "NcclTopology",
    "NvlsmPlan",
    "OciPlan",
    "ParallelismSection",
    "PartedConfig",
    "PartedDevices",
    "PartedNamedConfig",
    "PciePlan",
    "PowerLimitSection",
    "PowerSection",
    "PsuSection",
    "PyxisSource",
    "Registry",
    "RemediationClass",
    "RuntimePoint",
    "ShutdownStep",
    "TemperatureSection",
    "TopoCpu",
    "TopoDevice",
    "TopoSwitch",
    "UpsCheck",
    "UpsRating",
    "UpsSection",
    "UpsShutdown",
]
