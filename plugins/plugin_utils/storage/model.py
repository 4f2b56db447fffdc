"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

``StorageSection`` is plan.storage: the keys every site has, and one section of its storage type (``lustre``,
``nfs``, ``nvmeof``, ``beegfs`` or ``local_nvme``, NotRequired) with, for the shared types but NVMe-oF, its
``protection``; the four types' sections are in storage/fs_model.py. TypedDicts are plain dicts at run time:
plan.json keeps its bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.fs_model import Beegfs, Lustre, Nfs, Nvmeof

#: A cell of a report.md table row (checkpoint.drain_rows)
ReportCell = str | int | float


# --- sizing (storage/sizing.py) ---


class SizingInputs(TypedDict):
    model_params_b: float
    bytes_per_param: float
    interval_min: float
    overlap_target: float
    gpus: int
    gpu_hour_cost_usd: float
    io_wait_fraction: float


class Sizing(TypedDict):
    """plan.storage.sizing: the checkpoint's size, the write rate it needs, and the idle cost."""

    checkpoint_bytes: int
    checkpoint_tb: float
    required_write_gbps: float
    checkpoints_per_day: float
    daily_write_tb: float
    write_floor_gbps: float
    rated_write_gbps: float | None
    write_time_s: float
    overlap_at_rate: float
    fits_floor: bool
    fits_rated: bool | None
    full_day_cost_usd: float
    idle_cost_per_day_usd: float
    inputs: SizingInputs


class StorageFloors(TypedDict):
    read_gbps: list[float]
    write_gbps: list[float]


class ServerPort(TypedDict):
    """One planned storage interface of a data server (sizing.server_links)."""

    interface: str
    rate_gbps: float
    pcie_gen: int
    pcie_lanes: int
    card: str
    default: bool


class CardSlot(TypedDict):
    """A card's slot and the ports on it, before its rates are summed."""

    card: str
    pcie_gen: int
    pcie_lanes: int
    ports: list[str]


class ServerCard(CardSlot):
    line_gbs: float
    pcie_gbs: float
    gbs: float
    text: str


class ServerLinks(TypedDict):
    """What ONE data server's planned storage interfaces carry (sizing.server_links)."""

    ports: list[ServerPort]
    cards: list[ServerCard]
    line_gbs: float
    pcie_gbs: float
    gbs: float
    default: bool
    not_planned: list[str]


class Ceiling(TypedDict):
    """What the storage can deliver at most, GB/s, with the link that sets it and the inventory field to fix
    (sizing.storage_ceiling for the networked types, sizing.local_ceiling for local NVMe)."""

    gbs: float
    link: str
    field: str
    value: JsonValue
    fix: str
    servers: int
    server_group: NotRequired[str]
    cards: NotRequired[list[ServerCard]]
    not_planned: NotRequired[list[str]]
    per_server_gbs: float
    pcie_gbs: float
    line_gbs: float


class StorageCeilings(TypedDict):
    read_gbps: Ceiling | None
    write_gbps: Ceiling | None


# --- asynchronous checkpoints (storage/checkpoint.py) ---


class AsyncInputsRow(TypedDict):
    """checkpoint.AsyncInputs as the plan stores it."""

    enabled: bool
    keep_local: int
    staging_path: str | None
    staging_capacity_tb: float | None
    staging_write_gbps: float
    read_headroom: float
    blocking_overhead_s: float
    host_link_gbps: float | None


class CheckpointDrain(TypedDict):
    """plan.storage.checkpoint_drain: the stalls with and without async; the staging and drain keys only when
    async checkpoints are on (``enabled``)."""

    enabled: bool
    inputs: AsyncInputsRow
    shard_bytes: int
    shard_gpu_bytes: int
    fs_write_gbps: float
    client_link_gbps: float | None
    sync_rate_gbps: float
    sync_bound: str
    stall_sync_s: float
    overlap_sync: float
    host_link_gbps: float
    host_link: str
    copy_d2h_s: float
    stall_async_s: float
    overlap_async: float
    check: list[str]
    staging_path: NotRequired[str]
    remote_path: NotRequired[str]
    remote_mount: NotRequired[str | None]
    remote_layout: NotRequired[str]
    staging_mode: NotRequired[str]
    user_dir_mode: NotRequired[str]
    marker: NotRequired[str]
    program: NotRequired[str]
    config: NotRequired[str]
    keep_local: NotRequired[int]
    poll_s: NotRequired[int]
    staging_bytes: NotRequired[int]
    staging_tb: NotRequired[float]
    staging_capacity_tb: NotRequired[float | None]
    fits_capacity: NotRequired[bool | None]
    bwlimit_gbps: NotRequired[float]
    bwlimit_kib: NotRequired[int]
    drain_window_s: NotRequired[float]
    copy_time_s: NotRequired[float]
    drain_time_s: NotRequired[float]
    fits_window: NotRequired[bool]
    background_write_s: NotRequired[float]
    fits_background: NotRequired[bool]
    pinned_bytes: NotRequired[int]
    pinned_ram_limit_bytes: NotRequired[int | None]
    fits_ram: NotRequired[bool | None]


# --- data protection (storage/raid.py) ---


class ProtectionSpec(TypedDict):
    """``<section>.protection`` checked (raid.protection_spec)."""

    kind: str
    level: str | None
    mdt_level: str | None


class MdArray(TypedDict):
    """One md array of a Lustre target (raid.md_array)."""

    path: str
    name: str
    level: str
    members: list[str]
    data_disks: int
    chunk_kib: int | None
    full_stripe_kib: int | None
    full_stripe_is_rpc: bool
    usable_devices: float
    survives: int
    reason: str
    mkfs_options: str | None
    create_argv: list[str]
    conf_line: str


class TargetProtection(TypedDict):
    """How one Lustre target, an NFS export or the BeeGFS targets are protected: kind (md, hardware, zfs, raw;
    None: undeclared), level, the device failures it survives and why."""

    kind: str | None
    level: str | None
    survives: int
    reason: str


class LevelPlan(TargetProtection):
    """An OST's or the MDT's protection as raid.lustre_protection decides it."""

    members: int


class LustreProtection(TypedDict):
    ost_groups: list[list[str]]
    mdt_group: list[str]
    ost: LevelPlan
    mdt: LevelPlan
    warnings: list[str]


class DeclaredProtection(TargetProtection):
    """The volume an NFS or BeeGFS site declares (raid.declared_protection), with its plan warnings."""

    warnings: list[str]


class ProtectionPart(TargetProtection):
    """plan.storage.protection.parts.<part>: a declared volume, or a Lustre OST/MDT with its array's figures."""

    members: NotRequired[int]
    chunk_kib: NotRequired[int | None]
    usable_devices: NotRequired[float]
    mkfs_options: NotRequired[str | None]


class CapacityRow(TypedDict):
    arrays: int
    raw_devices: int
    usable_devices: float
    usable_fraction: float
    formula: str


class Protection(TypedDict):
    """plan.storage.protection: per part its level and the failures it survives (raid.summary)."""

    type: str
    parts: dict[str, ProtectionPart]
    survives_failures: int
    one_failure_loses_data: bool
    warnings: list[str]
    capacity: NotRequired[dict[str, CapacityRow]]


# --- local NVMe (storage/sizing.py local_raid_plan; NVMe-oF scratch too) ---


class Directory(TypedDict):
    path: str
    mode: str


class LocalNvme(TypedDict):
    """plan.storage.local_nvme (and each NVMe-oF client's scratch): devices, array, file system, mount."""

    devices: list[str]
    raid_device: str | None
    raid_level: str | None
    filesystem: str
    target: str
    mount_point: str
    mount_options: str
    allow_format: bool
    allow_format_devices: dict[str, list[str]]
    flag: str
    mdadm_create_argv: list[str] | None
    mkfs_argv: list[str]
    directories: list[Directory]


# --- the section ---


class TypedStorage(TypedDict, total=False):
    """The storage type's own section (one of them), and its protection (the shared types but NVMe-oF)."""

    lustre: Lustre
    nfs: Nfs
    nvmeof: Nvmeof
    beegfs: Beegfs
    local_nvme: LocalNvme
    protection: Protection


class StorageSection(TypedDict):
    """plan.storage (storage/plan.py storage_plan)."""

    type: str
    paths: dict[str, str]
    local_scratch: str | None
    sizing: Sizing
    check: list[str]
    floors: StorageFloors
    lustre: NotRequired[Lustre]
    nfs: NotRequired[Nfs]
    nvmeof: NotRequired[Nvmeof]
    beegfs: NotRequired[Beegfs]
    local_nvme: NotRequired[LocalNvme]
    protection: NotRequired[Protection]
    ceilings: StorageCeilings
    checkpoint_drain: CheckpointDrain
