"""The typed shapes of plan.health, plan.dcgm and plan.healing: how a node is watched, drained and healed
(compute/model.py re-exports them)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

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
