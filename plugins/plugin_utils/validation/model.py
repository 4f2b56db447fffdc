"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``),
and of what the acceptance tools' outputs and checks are read into.

``ValidationSection`` is plan.validation: the acceptance floors (validation/floors.py) and the tests the validate
play runs against them (``tests``, validation/acceptance.py). TypedDicts are plain dicts at run time."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import GpuSection
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import FabricSection
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import ClusterSection, HostsSection
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import Ceiling, StorageSection

# --- the floors (validation/floors.py) ---


class IntraNode(TypedDict):
    """What the floors read of plan.gpu.interconnect (compute/interconnect.py): how a node's GPUs meet."""

    kind: str
    nvlink_gen: int | None
    domain_gpus: int
    link_gbs_per_direction: float
    pcie_gbs_per_direction: float
    pcie_gen: int


class LinkCeiling(TypedDict):
    """The line rate a floor cannot pass, GB/s (ib_write_bw: Gb/s), and the link that sets it."""

    gbs: float
    link: str


class FloorCeilings(TypedDict, total=False):
    """plan.validation.ceilings: each floor's ceiling; a floor with no known link has none."""

    allreduce_intra_node_busbw_gbs: LinkCeiling
    allreduce_inter_node_busbw_gbs: LinkCeiling
    nic_write_bw_gbps: LinkCeiling
    storage_read_gbps: Ceiling
    storage_write_gbps: Ceiling


class Floors(TypedDict):
    """The acceptance floors of a tier (floors.validation_floors); ``reasons``: why a floor is missing, ``how``:
    how a floor was reached where its link ceiling shaped it."""

    gate_message_bytes: int
    allreduce_intra_node_busbw_gbs: float | None
    allreduce_intra_node_source: str | None
    allreduce_inter_node_busbw_gbs: float | None
    nic_write_bw_gbps: float | None
    storage_read_gbps: float
    storage_write_gbps: float
    ceilings: FloorCeilings
    how: dict[str, str]
    reasons: dict[str, str]


# --- what the validate play runs (validation/acceptance.py) ---


class FioJob(TypedDict):
    name: str
    path: str
    dir: str
    scope: str
    gated: bool


class IbPair(TypedDict):
    """One ib_write_bw (or ib_write_lat) run: node i writes to node i+1 on one rail."""

    rail: int
    client: str
    server: str
    client_hca: str
    server_hca: str
    server_address: str
    port: int
    rdma_cm: bool


class CounterPort(TypedDict):
    host: str
    hca: str
    port: int
    rail: int


class AllReduceTest(TypedDict):
    min_bytes: int
    max_bytes: int
    step_factor: int
    gpus_per_node: int
    intra_node: bool
    inter_node: bool
    nodes: int
    ranks: int
    hostlist: str
    excluded: dict[str, str]


class AcceptanceTests(TypedDict):
    all_reduce: AllReduceTest
    ib_write_bw: list[IbPair]
    ib_write_lat: list[IbPair]
    port_counters: list[CounterPort]
    fio: list[FioJob]


class ValidationSection(Floors):
    """plan.validation (validation/plan.py validation_plan): the floors and the tests run against them."""

    tests: AcceptanceTests


class AcceptanceView(TypedDict):
    """The plan sections the acceptance tests read, as validation_plan has them: the floors just computed."""

    cluster: ClusterSection
    hosts: HostsSection
    gpu: GpuSection
    fabric: FabricSection
    storage: StorageSection
    validation: Floors


class PlanView(TypedDict):
    """The plan sections the acceptance checks and report read (a whole plan, ``Plan``, is one)."""

    cluster: ClusterSection
    hosts: HostsSection
    gpu: GpuSection
    fabric: FabricSection
    storage: StorageSection
    validation: ValidationSection


# --- a check and the report (validation/gates.py, acceptance.py) ---


class Check(TypedDict):
    """One check: a tool's result against its floor (gates.make_check)."""

    name: str
    nodes: list[str]
    measured: float | str | None
    floor: float | str | None
    unit: str
    status: str
    reason: str
    drain: list[str]


class DrainEntry(TypedDict):
    node: str
    reason: str


#: the report's summary: how many checks passed, failed, were skipped, of how many, and the result
Summary = TypedDict("Summary", {"pass": int, "fail": int, "skipped": int, "total": int, "result": str})


class AllReduceNodes(TypedDict):
    tested: list[str]
    excluded: dict[str, str]


class AcceptanceReport(TypedDict):
    """report.json of the validate play (report.acceptance_report; the action adds ``generated_at``)."""

    schema: int
    cluster: str
    tier: str
    lab: bool
    summary: Summary
    floors: dict[str, object]
    checks: list[Check]
    drain: list[DrainEntry]
    all_reduce_nodes: AllReduceNodes
    generated_at: NotRequired[str]


# --- the tools' outputs read (validation/parsers.py) ---


class BusBw(TypedDict):
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None


class AllReduceRow(TypedDict):
    size: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: BusBw
    in_place: BusBw


class AllReduceResult(TypedDict):
    rows: list[AllReduceRow]
    avg_busbw: float | None
    out_of_bounds: int | None
    ranks: int | None
    rank_hosts: list[str]
    errors: list[str]


class IbBwRow(TypedDict):
    bytes: int
    iterations: int
    bw_peak_gbps: float
    bw_avg_gbps: float
    msg_rate_mpps: float


class IbWriteBwResult(TypedDict):
    device: str | None
    link_type: str | None
    transport: str | None
    qps: int | None
    unit: str
    rows: list[IbBwRow]
    msg_bytes: int
    bw_avg_gbps: float
    errors: list[str]


class LatRow(TypedDict):
    """A perftest latency row, usec; the columns after ``t_typical`` where perftest prints them."""

    bytes: int
    iterations: int
    t_min: float
    t_max: float
    t_typical: float
    t_avg: NotRequired[float]
    t_stdev: NotRequired[float]
    p99: NotRequired[float]
    p99_9: NotRequired[float]


class IbLatResult(TypedDict):
    tool: str | None
    device: str | None
    link_type: str | None
    rows: list[LatRow]
    msg_bytes: int
    typical_us: float
    p99_us: float | None
    max_us: float
    errors: list[str]


class PerfqueryResult(TypedDict):
    lid: int
    port: int | None
    counters: dict[str, int]
    extended: bool


class FioResult(TypedDict):
    version: str | None
    jobs: int
    errors: list[str]
    read_gbps: float
    read_bytes: int
    write_gbps: float
    write_bytes: int


class DcgmTest(TypedDict):
    category: str | None
    name: str | None
    status: str
    failed_entities: list[str]
    warnings: list[str]


class DcgmResult(TypedDict):
    version: str | None
    driver: str | None
    runtime_error: str | None
    tests: list[DcgmTest]
