"""Async checkpoints: stage in pinned host memory, write to local NVMe, then drain to the shared path.

How the frameworks do it (docs/sources.md [M4] PyTorch DCP ``async_save``, [M5] Megatron-Core async
save): training waits only while each GPU's shard is copied to host memory (DCP "first copying models
into internal CPU-buffers"; Megatron "preloading tensors to CPU with pinned memcpy"); a background
thread or process then serializes the copy and writes it while training goes on, and the next save
waits for it. Article 000 ([M3]): "write to local NVMe first, then drain to the parallel FS". So the
training job's background writer puts each node's shard in a local staging folder and marks it
complete; the compute role's drain service (gpucluster-ckpt-drain) copies it to the shared path at a
bandwidth limit, verifies it, and prunes old local copies. This module sizes that, from the storage
sizing (storage.storage_sizing), the node (GPUs, host link, RAM, storage NICs) and
``gpucluster_workload.checkpoint_async``:

- shard per GPU = checkpoint bytes / GPUs; shard per node = checkpoint bytes / compute nodes;
- stall per checkpoint, async = shard per GPU / host-link GB/s (each GPU copies over its own link at
  once: PCIe x16 of ``gpucluster_node.pcie_gen``, or ``host_link_gbps`` where the site measured it
  or the GPU has NVLink-C2C) + ``blocking_overhead_s`` (the framework's own blocking work: DCP's save
  plan, Megatron's sharded state dict; a default, unconfirmed: measure it);
- stall per checkpoint, sync = shard per node / min(the node's share of the FS write rate, the node's
  storage link): every node writes its shard straight to the shared path, training waits for all of it;
- background write = shard per node / local staging write GB/s: the serialized copy reaches the local
  NVMe while training goes on; it must end within the interval (stall + write <= interval), or the
  next save waits for it;
- pinned host memory per node = shard per node (DCP: CPU memory grows by the per-rank checkpoint x
  the ranks), at most ``PINNED_RAM_FRACTION`` of the node's RAM (``gpucluster_node.memory_gib``);
- staging space per node = (keep_local + 1) x shard: the kept completed copies plus the one
  being written;
- drain window = interval - background write: a checkpoint must be on the shared path before the
  next one is written to the staging space;
- drain time = shard / staging write GB/s (the drain hashes the local files first; reading is
  taken as no faster than writing) + 2 x shard / drain limit (the copy, then the read-back that
  verifies every file's sha256, taken as no faster than the copy);
- drain limit per node (rsync --bwlimit) = FS write GB/s x (1 - read_headroom) / nodes: all
  nodes drain at once, each gets an equal share of the FS write bandwidth, less the headroom
  kept for the data loaders' reads and other jobs' I/O on the same servers;
- the plan stops when the background write or the drain does not fit in its window, when the pinned
  buffers do not fit the node's RAM, or when the staging space does not fit in
  ``staging_capacity_tb`` (when the site gives it), unless the site set
  ``gpucluster_workload.allow_storage_below_need`` (the report still says "fits: no").

GB = 1e9 bytes, as in storage.py. The drain service's rules (marker, verification, pruning, copies
scoped by owner: ``<remote>/<user>/<name>``, made as that user): roles/compute/files/gpucluster-ckpt-drain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import (
    AsyncInputsRow,
    CheckpointDrain,
    Sizing,
)

FIELD = "gpucluster_workload.checkpoint_async"
#: The file a training job writes last into a checkpoint folder: the folder is complete. The
#: drain copies nothing else (never a checkpoint still being written) and writes the same name,
#: holding the verified manifest, into the remote copy once every file's size and sha256 match.
MARKER = ".complete"
#: Storage types with a remote checkpoint path to drain to: shared file systems, and NVMe-oF
#: (docs/tiers.md tier2 "async checkpoint to NVMe-oF"). local_nvme has none: the checkpoints are
#: already on the node's NVMe (tier1 "save to local NVMe").
SHARED_TYPES = ("nfs", "lustre", "beegfs", "nvmeof")
#: Local write GB/s of the staging space when the site gives none: the low end of article 000's
#: 4x NVMe Gen4 RAID 0 (7-14 GB/s write, docs/sources.md [M3]). Unconfirmed for a given node:
#: set staging_write_gbps from fio on the node's scratch.
DEFAULT_STAGING_WRITE_GBPS = 7.0
#: Share of the FS write bandwidth the drain leaves to reads and other I/O (a policy, not a
#: vendor number: 0.25 keeps three quarters for the drain).
DEFAULT_READ_HEADROOM = 0.25
#: Completed checkpoints kept locally: the newest (a restart reads it without the FS) and one
#: before it (in case the newest is bad).
DEFAULT_KEEP_LOCAL = 2
#: How often the drain service looks for completed checkpoints (its timer), seconds; the path
#: unit also starts it when the staging folder changes.
POLL_S = 60
#: The framework's blocking work beyond the device-to-host copy, seconds per checkpoint (DCP's save plan,
#: Megatron's sharded state dict; docs/sources.md [M4][M5] describe it, give no figure): a default,
#: unconfirmed, set blocking_overhead_s from a measured save.
DEFAULT_BLOCKING_OVERHEAD_S = 5.0
#: The share of a node's RAM the pinned staging buffers may take: pinned pages cannot be swapped or
#: reclaimed, and the data loaders, page cache and the framework need the rest (a policy, not a vendor number)
PINNED_RAM_FRACTION = 0.5
#: NVLink-C2C (Grace Hopper / Grace Blackwell) per direction, GB/s: 900 GB/s bidirectional (NVIDIA's
#: GH200 datasheet; the catalog has no Grace part yet, so a site with one sets host_link_gbps)
C2C_GBS_PER_DIRECTION = 450.0
STAGING_DIR = "checkpoint-staging"
#: The staging folder's mode: every user's job makes its own checkpoint folders there, and the sticky
#: bit keeps one user from renaming or deleting another's (like /tmp; chmod(2), S_ISVTX:
#: https://man7.org/linux/man-pages/man2/chmod.2.html). The drain takes a folder's owner (lstat) as
#: the checkpoint's owner.
STAGING_MODE = "1777"
#: Copies are scoped by owner: <remote_path>/<user>/<name>, <user> the user name of the staged folder's
#: owner (friendlier than a uid in a shared path, and unambiguous because the drain also requires the
#: folder to be owned by that uid), copied as that user (the drain drops root), so the shared file
#: system's own permissions keep one team from another's copies (issue 37).
REMOTE_LAYOUT = "<user>/<name>"
#: The per-user remote folder's mode, created by root with the user as owner: the user's alone. Not
#: 0750 with a group: the tenants (Slurm accounts, Kubernetes teams) have no Unix group the plan
#: knows of; a user who wants to share a checkpoint with the team opens their folder (it is theirs).
USER_DIR_MODE = "0700"
PROGRAM = "/usr/local/sbin/gpucluster-ckpt-drain"
CONFIG = "/etc/gpucluster/ckpt-drain.json"


@dataclass(frozen=True)
class AsyncInputs:
    """``gpucluster_workload.checkpoint_async``, checked."""

    enabled: bool
    keep_local: int
    staging_path: str | None
    staging_capacity_tb: float | None
    staging_write_gbps: float
    read_headroom: float
    blocking_overhead_s: float = DEFAULT_BLOCKING_OVERHEAD_S
    host_link_gbps: float | None = None

    def row(self) -> AsyncInputsRow:
        """The inputs as plan.storage.checkpoint_drain.inputs stores them (the fields in order)."""
        return {
            "enabled": self.enabled,
            "keep_local": self.keep_local,
            "staging_path": self.staging_path,
            "staging_capacity_tb": self.staging_capacity_tb,
            "staging_write_gbps": self.staging_write_gbps,
            "read_headroom": self.read_headroom,
            "blocking_overhead_s": self.blocking_overhead_s,
            "host_link_gbps": self.host_link_gbps,
        }


def _path(value: object, field: str) -> str:
    if not (isinstance(value, str) and value.startswith("/") and value != "/" and ".." not in value.split("/")):
        raise PlanError(field, value, "an absolute path other than / without '..'")
    return value.rstrip("/")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def async_inputs(raw: object, storage_type: str, local_scratch: str | None) -> AsyncInputs:
    """The site's checkpoint_async entry with its defaults (enabled where there is a shared path)."""
    if not (raw is None or isinstance(raw, dict)):
        raise PlanError(FIELD, raw, "a mapping")
    cfg: Mapping[str, object] = raw or {}
    shared = storage_type in SHARED_TYPES
    enabled = cfg.get("enabled", shared)
    if not isinstance(enabled, bool):
        raise PlanError(f"{FIELD}.enabled", enabled, "true or false")
    require(
        shared or not enabled,
        f"{FIELD}.enabled",
        enabled,
        f"false: storage type {storage_type} has no shared checkpoint path to drain to",
    )
    keep = int(check_range(cfg.get("keep_local", DEFAULT_KEEP_LOCAL), f"{FIELD}.keep_local", 1, 100, integer=True))
    raw_capacity = cfg.get("staging_capacity_tb")
    capacity = None
    if raw_capacity is not None:
        capacity = check_range(raw_capacity, f"{FIELD}.staging_capacity_tb", 0.001, 10000, unit=" TB")
    write = check_range(
        cfg.get("staging_write_gbps", DEFAULT_STAGING_WRITE_GBPS), f"{FIELD}.staging_write_gbps", 0.01, 1000
    )
    headroom = check_range(cfg.get("read_headroom", DEFAULT_READ_HEADROOM), f"{FIELD}.read_headroom", 0, 0.9)
    overhead = check_range(
        cfg.get("blocking_overhead_s", DEFAULT_BLOCKING_OVERHEAD_S), f"{FIELD}.blocking_overhead_s", 0, 3600, unit=" s"
    )
    raw_link = cfg.get("host_link_gbps")
    host_link = None if raw_link is None else check_range(raw_link, f"{FIELD}.host_link_gbps", 0.1, 10000)
    raw_staging = cfg.get("staging_path")
    staging = None
    if raw_staging is not None:
        staging = _path(raw_staging, f"{FIELD}.staging_path")
    elif enabled:
        require(
            isinstance(local_scratch, str),
            f"{FIELD}.staging_path",
            raw_staging,
            "an absolute path (there is no gpucluster_storage.local_scratch to put it under)",
        )
        staging = f"{str(local_scratch).rstrip('/')}/{STAGING_DIR}"
    return AsyncInputs(enabled, keep, staging, capacity, write, headroom, overhead, host_link)


def drain_plan(
    inputs: AsyncInputs,
    *,
    checkpoint_bytes: int,
    interval_min: float,
    fs_write_gbps: float,
    nodes: int,
    remote_path: str | None,
    shared_roots: tuple[str, ...] = (),
    lab: bool = False,
    gpus_per_node: int = 8,
    host_link_gbps: float = 63.0,
    host_link: str = "PCIe Gen5 x16",
    node_ram_bytes: float | None = None,
    client_link_gbps: float | None = None,
    shared: bool = True,
) -> CheckpointDrain:
    """Stalls with and without async, the background write, pinned memory, staging space, drain limit
    and window, and why the plan must stop.

    ``host_link_gbps``: a GPU's device-to-host GB/s per direction (``host_link`` names it);
    ``client_link_gbps``: a node's storage link, GB/s (None: unknown, the FS share alone bounds sync);
    ``shared``: the checkpoint path is a shared FS (else the node's own disks: no client link).
    ``remote_mount``: the shared mount the remote path lies on, which the drain requires mounted
    before it copies or deletes anything; none in the lab, whose containers mount no NFS (the
    compute role starts the mount units on real hosts only)."""
    nodes = int(check_range(nodes, "compute nodes", 1, None, integer=True))
    gpn = int(check_range(gpus_per_node, "gpucluster_node.gpus_per_node", 1, None, integer=True))
    interval_s = interval_min * 60
    shard = checkpoint_bytes / nodes
    shard_gb = shard / 1e9
    shard_gpu_gb = shard_gb / gpn
    link = inputs.host_link_gbps or host_link_gbps
    link_name = f"{FIELD}.host_link_gbps" if inputs.host_link_gbps else host_link
    node_fs = fs_write_gbps / nodes
    sync_rate = min(node_fs, client_link_gbps) if shared and client_link_gbps else node_fs
    stall_sync = shard_gb / sync_rate
    copy_d2h = shard_gpu_gb / link
    stall_async = copy_d2h + inputs.blocking_overhead_s
    out: CheckpointDrain = {
        "enabled": inputs.enabled,
        "inputs": inputs.row(),
        "shard_bytes": int(shard),
        "shard_gpu_bytes": int(shard / gpn),
        "fs_write_gbps": fs_write_gbps,
        "client_link_gbps": client_link_gbps,
        "sync_rate_gbps": round(sync_rate, 3),
        "sync_bound": "client link" if sync_rate < node_fs else "FS share",
        "stall_sync_s": round(stall_sync, 1),
        "overlap_sync": round(stall_sync / interval_s, 4),
        # what async would stall, on or off: the report compares both
        "host_link_gbps": link,
        "host_link": link_name,
        "copy_d2h_s": round(copy_d2h, 2),
        "stall_async_s": round(stall_async, 1),
        "overlap_async": round(stall_async / interval_s, 4),
        "check": [],
    }
    if inputs.enabled:
        _add_drain(
            out,
            inputs,
            shard=shard,
            stall_async=stall_async,
            interval_s=interval_s,
            fs_write_gbps=fs_write_gbps,
            nodes=nodes,
            remote_path=remote_path,
            shared_roots=shared_roots,
            lab=lab,
            node_ram_bytes=node_ram_bytes,
        )
    return out


def _add_drain(
    out: CheckpointDrain,
    inputs: AsyncInputs,
    *,
    shard: float,
    stall_async: float,
    interval_s: float,
    fs_write_gbps: float,
    nodes: int,
    remote_path: str | None,
    shared_roots: tuple[str, ...],
    lab: bool,
    node_ram_bytes: float | None,
) -> None:
    """An enabled drain's paths, staging, limit and window into ``out`` (drain_plan), and why it must stop."""
    shard_gb = shard / 1e9
    staging = str(inputs.staging_path)
    require(remote_path is not None, "gpucluster_storage.paths.checkpoints", remote_path, "a shared checkpoint path")
    remote = str(remote_path)
    for root in (remote, *shared_roots):
        require(
            not (_inside(staging, root) or _inside(root, staging)),
            f"{FIELD}.staging_path",
            staging,
            f"a node-local folder outside the shared path {root}",
        )
    mounts = sorted((r.rstrip("/") or "/" for r in shared_roots if _inside(remote, r.rstrip("/") or "/")), key=len)
    write_s = shard_gb / inputs.staging_write_gbps  # the framework's background write to local staging
    limit = fs_write_gbps * (1 - inputs.read_headroom) / nodes
    fig = _Figures(
        inputs=inputs,
        shard=shard,
        write_s=write_s,
        stall_async=stall_async,
        interval_s=interval_s,
        ram_limit=None if node_ram_bytes is None else PINNED_RAM_FRACTION * node_ram_bytes,
        limit=limit,
        copy_s=shard_gb / limit,
    )
    out.update(
        {
            "staging_path": staging,
            "remote_path": remote,
            "remote_mount": mounts[-1] if mounts and not lab else None,
            "remote_layout": f"{remote}/{REMOTE_LAYOUT}",
            "staging_mode": STAGING_MODE,
            "user_dir_mode": USER_DIR_MODE,
            "marker": MARKER,
            "program": PROGRAM,
            "config": CONFIG,
            "keep_local": inputs.keep_local,
            "poll_s": POLL_S,
            "staging_bytes": int(fig.staging_bytes),
            "staging_tb": round(fig.staging_bytes / 1e12, 3),
            "staging_capacity_tb": inputs.staging_capacity_tb,
            "fits_capacity": fig.fits_capacity,
            "bwlimit_gbps": float(f"{limit:.6g}"),
            # rsync --bwlimit counts in units of 1024 bytes per second
            "bwlimit_kib": max(1, int(limit * 1e9 // 1024)),  # 0 would mean no limit to rsync
            "drain_window_s": round(fig.window, 1),
            "copy_time_s": round(fig.copy_s, 1),
            "drain_time_s": round(fig.drain_s, 1),
            "fits_window": fig.fits_window,
            "background_write_s": round(write_s, 1),
            "fits_background": fig.fits_background,
            "pinned_bytes": int(fig.pinned),
            "pinned_ram_limit_bytes": None if fig.ram_limit is None else int(fig.ram_limit),
            "fits_ram": fig.fits_ram,
            "check": _drain_check(fig, fs_write_gbps, nodes, node_ram_bytes),
        }
    )


@dataclass(frozen=True)
class _Figures:
    """The figures of an enabled drain (drain_plan): the background write, the pinned memory, the staging
    space and the drain's window, and whether each fits."""

    inputs: AsyncInputs
    shard: float  # bytes per node
    write_s: float  # the background write to local staging
    stall_async: float
    interval_s: float
    ram_limit: float | None  # the pinned memory a node allows, bytes (None: RAM not given)
    limit: float  # the drain's bandwidth limit per node, GB/s
    copy_s: float

    @property
    def shard_gb(self) -> float:
        return self.shard / 1e9

    @property
    def pinned(self) -> float:
        """One staged copy of the node's shards in host memory ([M4]: per-rank size x ranks)."""
        return self.shard

    @property
    def window(self) -> float:
        return self.interval_s - self.write_s

    @property
    def drain_s(self) -> float:
        return self.shard_gb / self.inputs.staging_write_gbps + 2 * self.copy_s

    @property
    def staging_bytes(self) -> float:
        return (self.inputs.keep_local + 1) * self.shard

    @property
    def fits_background(self) -> bool:
        return self.stall_async + self.write_s <= self.interval_s

    @property
    def fits_ram(self) -> bool | None:
        return None if self.ram_limit is None else self.pinned <= self.ram_limit

    @property
    def fits_capacity(self) -> bool | None:
        capacity = self.inputs.staging_capacity_tb
        return None if capacity is None else self.staging_bytes <= capacity * 1e12

    @property
    def fits_window(self) -> bool:
        return self.window > 0 and self.drain_s <= self.window


def _drain_check(fig: _Figures, fs_write_gbps: float, nodes: int, node_ram_bytes: float | None) -> list[str]:
    """Why the plan must stop: what of an enabled drain does not fit (drain_plan)."""
    inputs, shard_gb = fig.inputs, fig.shard_gb
    check = []
    if not fig.fits_background:
        check.append(
            f"the async checkpoint's background write of {shard_gb:.1f} GB per node to local staging takes "
            f"{fig.write_s:.0f} s at {inputs.staging_write_gbps:g} GB/s; with the {fig.stall_async:.0f} s stall it "
            f"does not end within the {fig.interval_s:.0f} s interval, so every save waits for the last. Lengthen "
            f"gpucluster_workload.checkpoint_interval_min, set {FIELD}.staging_write_gbps from a faster scratch, "
            "or set gpucluster_workload.allow_storage_below_need: true to plan anyway."
        )
    if fig.fits_ram is False:
        check.append(
            f"async checkpoints pin {fig.pinned / 2**30:.0f} GiB of host memory per node (the node's "
            f"{shard_gb:.1f} GB shard staged from its GPUs), more than {PINNED_RAM_FRACTION:g} x the node's "
            f"{float(node_ram_bytes or 0) / 2**30:.0f} GiB (gpucluster_node.memory_gib). Add nodes, checkpoint "
            f"less (gpucluster_workload.checkpoint_bytes_per_param), set {FIELD}.enabled: false, or "
            "gpucluster_workload.allow_storage_below_need: true to plan anyway."
        )
    if not fig.fits_window:
        check.append(
            f"the checkpoint drain needs {fig.drain_s:.0f} s per {shard_gb:.1f} GB shard (local hash, copy and "
            f"read-back) at {fig.limit:.3g} GB/s per node (FS write {fs_write_gbps:g} GB/s x "
            f"(1 - read_headroom {inputs.read_headroom:g}) / {nodes} nodes), "
            f"but has {max(fig.window, 0):.0f} s before the next checkpoint. Lengthen "
            f"gpucluster_workload.checkpoint_interval_min, lower {FIELD}.read_headroom, use faster storage, "
            f"set {FIELD}.enabled: false, or gpucluster_workload.allow_storage_below_need: true to plan anyway."
        )
    if fig.fits_capacity is False:
        check.append(
            f"checkpoint staging needs {fig.staging_bytes / 1e12:.3f} TB per node ((keep_local {inputs.keep_local} "
            f"+ 1) x {shard_gb:.1f} GB shard), more than {FIELD}.staging_capacity_tb "
            f"{inputs.staging_capacity_tb:g} TB. Lower {FIELD}.keep_local, stage on a larger scratch, or set "
            "gpucluster_workload.allow_storage_below_need: true to plan anyway."
        )
    return check


def checkpoint_drain(
    raw: object,
    *,
    storage_type: str,
    local_scratch: str | None,
    sizing: Sizing,
    nodes: int,
    remote_path: str | None,
    shared_roots: tuple[str, ...] = (),
    lab: bool = False,
    gpus_per_node: int = 8,
    host_link_gbps: float = 63.0,
    host_link: str = "PCIe Gen5 x16",
    node_ram_bytes: float | None = None,
    client_link_gbps: float | None = None,
) -> CheckpointDrain:
    """The plan's storage.checkpoint_drain from the inventory entry, the storage sizing and the node."""
    inputs = async_inputs(raw, storage_type, local_scratch)
    rate = sizing["rated_write_gbps"] or sizing["write_floor_gbps"]
    return drain_plan(
        inputs,
        checkpoint_bytes=sizing["checkpoint_bytes"],
        interval_min=sizing["inputs"]["interval_min"],
        fs_write_gbps=rate,
        nodes=nodes,
        remote_path=remote_path,
        shared_roots=shared_roots,
        lab=lab,
        gpus_per_node=gpus_per_node,
        host_link_gbps=host_link_gbps,
        host_link=host_link,
        node_ram_bytes=node_ram_bytes,
        client_link_gbps=client_link_gbps,
        shared=storage_type in SHARED_TYPES,
    )
