"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

``SlurmSection`` is ``plan.slurm`` (settings.py ``slurm_plan``): slurm.conf, gres.conf and topology.conf as
data, with the scheduling policy (accounting.py), the controllers (ha.py), tenant isolation (tenancy.py) and
the MPI defaults (mpi.py). The rolling restart's results (rolling.py) are typed here too. TypedDicts are plain
dicts at run time: the plan's JSON is unchanged by them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

# -- accounting.py -----------------------------------------------------------------------------------------


class QosSpec(TypedDict):
    """A QOS before its limits are turned into units: the built-in set merged with ``gpucluster_slurm.qos``."""

    name: str
    priority: int
    preempt: list[str]
    grp_gpus_percent: float | None
    max_gpus_per_user_percent: float | None


class QosRow(TypedDict):
    """One QOS as sacctmgr sets it (accounting.Qos)."""

    name: str
    priority: int
    preempt: list[str]
    preempt_mode: str
    grp_gpus: int | None
    max_gpus_per_user: int | None
    description: str
    gpu_tres: str


class AccountRow(TypedDict):
    """One Slurm account (accounting.Account)."""

    name: str
    fairshare: int
    users: list[str]
    qos: list[str]
    default_qos: str
    grp_gpus: int | None
    description: str
    organization: str
    gpu_tres: str


class NodeFeatures(TypedDict):
    """A set of compute hosts with the same node Features."""

    nodes: str  # a host list
    features: list[str]


class Billing(TypedDict):
    """TRESBillingWeights and the unit of the GPU limits (compute/mig.py ``billing_weights``)."""

    unit: str  # gpu | mig_slice
    per_gpu: int
    tres: str
    untyped: float
    weights: dict[str, float]
    text: str


class Accounting(TypedDict):
    """``plan.slurm.accounting``: priority, preemption, QOS, accounts and node features."""

    priority_type: str
    weights: dict[str, int]
    decay_half_life: str
    max_age: str
    enforce: str
    preempt_type: str
    preempt_mode: str
    billing_weights: str
    billing: Billing
    default_qos: str
    qos: list[QosRow]
    accounts: list[AccountRow]
    node_features: list[NodeFeatures]


# -- ha.py -------------------------------------------------------------------------------------------------


class ControllerRow(TypedDict):
    name: str
    address: str
    role: str  # primary | backup


class StateMountRow(TypedDict):
    """The shared StateSaveLocation's systemd mount unit (ha.StateMount)."""

    what: str
    where: str
    type: str
    options: str
    unit_name: str
    unit_path: str


class PrimaryOnConfig(TypedDict):
    hold_s: int
    poll_s: int
    answer_poll_s: float
    reason: str
    hosts: list[str]
    state_dir: str


class StandbyRestart(TypedDict):
    unit: str
    request: str
    in_control: str


class PrimaryOn(TypedDict):
    """The takeover hook (SlurmctldPrimaryOnProg/OffProg) and its settings."""

    program: str
    off_program: str
    config: PrimaryOnConfig
    standby_restart: StandbyRestart


class Ha(TypedDict):
    """``plan.slurm.ha``: the controllers, StateSaveLocation, its mount and SlurmctldTimeout."""

    primary_on: PrimaryOn | None
    enabled: bool
    controllers: list[ControllerRow]
    backups: list[str]
    state_save_location: str
    state_save_mount: StateMountRow | None
    slurmctld_timeout_s: int
    slurmctld_kill_mode: str | None


# -- tenancy.py --------------------------------------------------------------------------------------------


class PamAdopt(TypedDict):
    enabled: bool
    admin_group: str
    options: list[str]
    access_rules: list[str]


class Tenancy(TypedDict):
    """``plan.slurm.tenancy``: PrivateData, CommunicationParameters and the compute nodes' ssh admission."""

    private_data: str
    dbd_private_data: str
    communication_parameters: str
    pam_adopt: PamAdopt


class TenancyPlan(TypedDict):
    """tenancy.tenancy_plan: :class:`Tenancy` and the PrologFlags with adoption's Contain."""

    private_data: str
    dbd_private_data: str
    communication_parameters: str
    prolog_flags: str
    pam_adopt: PamAdopt


# -- mpi.py, topology.py -----------------------------------------------------------------------------------


class Mpi(TypedDict):
    """``plan.slurm.mpi``: MpiDefault and the UCX / Open MPI files (mpi.MpiSettings)."""

    mpi_default: str
    fabric: str
    transport: str
    ucx: dict[str, str]
    ucx_conf: str
    openmpi: dict[str, str]
    openmpi_mca_params: str
    files: bool
    lab: bool
    reason: str


class TopologyBlock(TypedDict):
    name: str
    nodes: str  # a host list


class TopologyPlan(TypedDict):
    """topology.topology_plan: the plugin ("" for none), its blocks and why."""

    plugin: str
    blocks: list[TopologyBlock]
    reason: str


# -- settings.py: the section ------------------------------------------------------------------------------


class SlurmNodeLine(TypedDict):
    """One slurm.conf NodeName line as data (``slurm.nodes[]``, settings._node_lines), its fields in the line's
    order: ``nodes`` a host list, ``gres`` the line's ``Gres=`` (``gpu:<type>:<n>``, comma-separated per MIG
    profile), ``features`` the ``Features=`` names in order (slurm/accounting.py), ``state`` settings.NODE_STATE."""

    nodes: str
    cpus: int
    boards: int
    sockets_per_board: int
    cores_per_socket: int
    threads_per_core: int
    real_memory: int
    gres: str
    features: list[str]
    state: str


class Partition(TypedDict):
    name: str
    nodes: str
    default: bool
    max_time: str


class Plugins(TypedDict):
    proctrack_type: str
    task_plugin: str
    jobacct_gather_type: str
    prolog_flags: str


class Reboot(TypedDict):
    program: str
    resume_timeout_s: int


class GpuDefaults(TypedDict):
    """slurm.conf DefCpuPerGPU and DefMemPerGPU (0: the line is left out)."""

    def_cpu_per_gpu: int
    def_mem_per_gpu: int


class SlurmTopology(TypedDict):
    topology_plugin: str
    topology_blocks: list[TopologyBlock]


class SlurmSection(TypedDict):
    """``plan.slurm``: slurm.conf/gres.conf/topology.conf content as data for the templates."""

    cluster_name: str
    controller: str
    controller_address: str
    ha: Ha
    nodes: list[SlurmNodeLine]
    accounting: Accounting
    accounting_tres: str
    real_memory_mib: int
    def_cpu_per_gpu: int
    def_mem_per_gpu: int
    gres: str
    gres_conf_lines: list[str]
    gres_mig: Mapping[str, object]  # compute/mig.py gres_mig: the MIG nodes' part (that package's shape)
    partitions: list[Partition]
    plugins: Plugins
    tenancy: Tenancy
    slurmd_parameters: str
    select_type: str
    topology_plugin: str
    topology_blocks: list[TopologyBlock]
    health_check_program: str
    reboot: Reboot
    health_check_interval: int
    epilog: str
    prolog: str
    lab: bool
    mpi: Mpi


# -- rolling.py: the rolling restart's results (the slurm_node_restart module) ----------------------------


class NodeStateRow(TypedDict):
    """rolling.NodeState as data."""

    known: bool
    state: str
    reason: str | None
    drained: bool
    ours: bool
    registered: bool


class RestartDecision(TypedDict):
    """rolling.Decision as data, with the seconds the head waits for the node's jobs."""

    units: list[str]
    drain: bool
    wait: bool
    restart: bool
    defer: bool
    message: str
    reason: str
    timeout_s: int
