"""Async checkpoints: stage on local NVMe, then drain to the shared checkpoint path.

Article 000 (docs/sources.md [M3]): "write to local NVMe first, then drain to the parallel FS"
cuts checkpoint overlap from 20-30 % to under 5 %. The training job writes each node's shard
of a checkpoint to a local staging folder and marks it complete; the compute role's drain
service (gpucluster-ckpt-drain) copies it to the shared path at a bandwidth limit, verifies
it, and prunes old local copies. This module sizes that, from the storage sizing
(storage.storage_sizing) and ``gpucluster_workload.checkpoint_async``:

- shard per node = checkpoint bytes / compute nodes (every node saves its part at once);
- staging space per node = (keep_local + 1) x shard: the kept completed copies plus the one
  being written;
- training stall per checkpoint: sync = checkpoint GB / FS write GB/s (storage_sizing's
  write_time_s); async = shard GB / local staging write GB/s (the nodes write in parallel);
- drain window = interval - async stall: a checkpoint must be on the shared path before the
  next one is written to the staging space;
- drain time = shard / staging write GB/s (the drain hashes the local files first; reading is
  taken as no faster than writing) + 2 x shard / drain limit (the copy, then the read-back that
  verifies every file's sha256, taken as no faster than the copy);
- drain limit per node (rsync --bwlimit) = FS write GB/s x (1 - read_headroom) / nodes: all
  nodes drain at once, each gets an equal share of the FS write bandwidth, less the headroom
  kept for the data loaders' reads and other jobs' I/O on the same servers;
- the plan stops when the drain at that limit does not fit in the window, or when the staging
  space does not fit in ``staging_capacity_tb`` (when the site gives it), unless the site set
  ``gpucluster_workload.allow_storage_below_need`` (the report still says "fits: no").

GB = 1e9 bytes, as in storage.py. The drain service's rules (marker, verification, pruning):
roles/compute/files/gpucluster-ckpt-drain.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_range, require

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
STAGING_DIR = "checkpoint-staging"
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


def _path(value: Any, field: str) -> str:
    require(
        isinstance(value, str) and value.startswith("/") and value != "/" and ".." not in value.split("/"),
        field,
        value,
        "an absolute path other than / without '..'",
    )
    return value.rstrip("/")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def async_inputs(raw: Any, storage_type: str, local_scratch: str | None) -> AsyncInputs:
    """The site's checkpoint_async entry with its defaults (enabled where there is a shared path)."""
    require(raw is None or isinstance(raw, dict), FIELD, raw, "a mapping")
    cfg = dict(raw or {})
    shared = storage_type in SHARED_TYPES
    enabled = cfg.get("enabled", shared)
    require(isinstance(enabled, bool), f"{FIELD}.enabled", enabled, "true or false")
    require(
        shared or not enabled,
        f"{FIELD}.enabled",
        enabled,
        f"false: storage type {storage_type} has no shared checkpoint path to drain to",
    )
    keep = int(check_range(cfg.get("keep_local", DEFAULT_KEEP_LOCAL), f"{FIELD}.keep_local", 1, 100, integer=True))
    capacity = cfg.get("staging_capacity_tb")
    if capacity is not None:
        capacity = check_range(capacity, f"{FIELD}.staging_capacity_tb", 0.001, 10000, unit=" TB")
    write = check_range(
        cfg.get("staging_write_gbps", DEFAULT_STAGING_WRITE_GBPS), f"{FIELD}.staging_write_gbps", 0.01, 1000
    )
    headroom = check_range(cfg.get("read_headroom", DEFAULT_READ_HEADROOM), f"{FIELD}.read_headroom", 0, 0.9)
    staging = cfg.get("staging_path")
    if staging is not None:
        staging = _path(staging, f"{FIELD}.staging_path")
    elif enabled:
        require(
            isinstance(local_scratch, str),
            f"{FIELD}.staging_path",
            staging,
            "an absolute path (there is no gpucluster_storage.local_scratch to put it under)",
        )
        staging = f"{str(local_scratch).rstrip('/')}/{STAGING_DIR}"
    return AsyncInputs(enabled, keep, staging, capacity, write, headroom)


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
) -> dict[str, Any]:
    """Staging space, drain limit and window, stalls with and without async, and why the plan must stop.

    ``remote_mount``: the shared mount the remote path lies on, which the drain requires mounted
    before it copies or deletes anything; none in the lab, whose containers mount no NFS (the
    compute role starts the mount units on real hosts only)."""
    nodes = int(check_range(nodes, "compute nodes", 1, None, integer=True))
    interval_s = interval_min * 60
    shard = checkpoint_bytes / nodes
    shard_gb = shard / 1e9
    stall_sync = checkpoint_bytes / 1e9 / fs_write_gbps
    stall_async = shard_gb / inputs.staging_write_gbps
    out: dict[str, Any] = {
        "enabled": inputs.enabled,
        "inputs": asdict(inputs),
        "shard_bytes": int(shard),
        "fs_write_gbps": fs_write_gbps,
        "stall_sync_s": round(stall_sync, 1),
        "overlap_sync": round(stall_sync / interval_s, 4),
        "check": [],
    }
    if not inputs.enabled:
        return out
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
    window = interval_s - stall_async
    limit = fs_write_gbps * (1 - inputs.read_headroom) / nodes
    copy_s = shard_gb / limit
    drain_s = shard_gb / inputs.staging_write_gbps + 2 * copy_s
    staging_bytes = (inputs.keep_local + 1) * shard
    capacity = inputs.staging_capacity_tb
    fits_capacity = None if capacity is None else staging_bytes <= capacity * 1e12
    fits_window = window > 0 and drain_s <= window
    check = []
    if not fits_window:
        check.append(
            f"the checkpoint drain needs {drain_s:.0f} s per {shard_gb:.1f} GB shard (local hash, copy and "
            f"read-back) at {limit:.3g} GB/s per node (FS write {fs_write_gbps:g} GB/s x "
            f"(1 - read_headroom {inputs.read_headroom:g}) / {nodes} nodes), "
            f"but has {max(window, 0):.0f} s before the next checkpoint. Lengthen "
            f"gpucluster_workload.checkpoint_interval_min, lower {FIELD}.read_headroom, use faster storage, "
            f"set {FIELD}.enabled: false, or gpucluster_workload.allow_storage_below_need: true to plan anyway."
        )
    if fits_capacity is False:
        check.append(
            f"checkpoint staging needs {staging_bytes / 1e12:.3f} TB per node ((keep_local {inputs.keep_local} + 1) "
            f"x {shard_gb:.1f} GB shard), more than {FIELD}.staging_capacity_tb {capacity:g} TB. "
            f"Lower {FIELD}.keep_local, stage on a larger scratch, or set "
            "gpucluster_workload.allow_storage_below_need: true to plan anyway."
        )
    out.update(
        {
            "staging_path": staging,
            "remote_path": remote,
            "remote_mount": mounts[-1] if mounts and not lab else None,
            "marker": MARKER,
            "program": PROGRAM,
            "config": CONFIG,
            "keep_local": inputs.keep_local,
            "poll_s": POLL_S,
            "staging_bytes": int(staging_bytes),
            "staging_tb": round(staging_bytes / 1e12, 3),
            "staging_capacity_tb": capacity,
            "fits_capacity": fits_capacity,
            "bwlimit_gbps": float(f"{limit:.6g}"),
            # rsync --bwlimit counts in units of 1024 bytes per second
            "bwlimit_kib": max(1, int(limit * 1e9 // 1024)),  # 0 would mean no limit to rsync
            "drain_window_s": round(window, 1),
            "copy_time_s": round(copy_s, 1),
            "drain_time_s": round(drain_s, 1),
            "fits_window": fits_window,
            "stall_async_s": round(stall_async, 1),
            "overlap_async": round(stall_async / interval_s, 4),
            "check": check,
        }
    )
    return out


def checkpoint_drain(
    raw: Any,
    *,
    storage_type: str,
    local_scratch: str | None,
    sizing: dict[str, Any],
    nodes: int,
    remote_path: str | None,
    shared_roots: tuple[str, ...] = (),
    lab: bool = False,
) -> dict[str, Any]:
    """The plan's storage.checkpoint_drain from the inventory entry and the storage sizing."""
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
    )


def _n(value: float) -> str:
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def drain_rows(drain: dict[str, Any], checkpoint_bytes: int, nodes: int, interval_min: float) -> list[list[Any]]:
    """The report's rows: each value with the formula and inputs that reached it."""
    inp = drain["inputs"]
    shard_gb = drain["shard_bytes"] / 1e9
    fs = drain["fs_write_gbps"]
    sync_row = [
        "stall per checkpoint, sync (s)",
        drain["stall_sync_s"],
        f"{_n(checkpoint_bytes / 1e9)} GB / {_n(fs)} GB/s FS write; {_n(100 * drain['overlap_sync'])} % "
        f"of the {_n(interval_min)} min interval",
    ]
    if not drain["enabled"]:
        return [
            ["async checkpoints", "off", f"{FIELD}.enabled: false (local_nvme: checkpoints are saved on the node)"],
            sync_row,
        ]
    cap = drain["staging_capacity_tb"]
    faster = drain["stall_async_s"] < drain["stall_sync_s"]
    return [
        # paths in the value column: report.md escapes that one (inventory strings), not the "how"
        ["async checkpoints", f"{drain['staging_path']} -> {drain['remote_path']}", f"on; marker {MARKER}"],
        ["shard per node (GB)", round(shard_gb, 1), f"{_n(checkpoint_bytes / 1e9)} GB / {nodes} nodes"],
        [
            "staging per node (TB)",
            drain["staging_tb"],
            f"(keep_local {drain['keep_local']} + 1 being written) x {_n(shard_gb)} GB; "
            + (f"fits {_n(cap)} TB: {'yes' if drain['fits_capacity'] else 'no'}" if cap else "capacity not given"),
        ],
        [
            "drain limit per node (GB/s)",
            drain["bwlimit_gbps"],
            f"{_n(fs)} GB/s FS write x (1 - read_headroom {_n(inp['read_headroom'])}) / {nodes} nodes; "
            f"rsync --bwlimit={drain['bwlimit_kib']}",
        ],
        [
            "drain time (s)",
            drain["drain_time_s"],
            f"{_n(shard_gb)} GB / {_n(inp['staging_write_gbps'])} GB/s local hash + 2 x {_n(shard_gb)} GB / "
            f"{_n(drain['bwlimit_gbps'])} GB/s copy and read-back; window {_n(drain['drain_window_s'])} s "
            f"(interval - async stall): fits {'yes' if drain['fits_window'] else 'no'}",
        ],
        sync_row,
        [
            "stall per checkpoint, async (s)",
            drain["stall_async_s"],
            f"{_n(shard_gb)} GB / {_n(inp['staging_write_gbps'])} GB/s local write; "
            f"{_n(100 * drain['overlap_async'])} % of the interval"
            + ("" if faster else "; not shorter than sync: the FS's per-node share is faster than the staging disk"),
        ],
    ]
