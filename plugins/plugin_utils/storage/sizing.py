"""Checkpoint storage sizing (GB = 1e9 bytes, as storage vendors and nccl-tests count).

checkpoint bytes = parameters x bytes per parameter (docs/sources.md §9.4: 2 for bf16 weights,
~12-14 with fp32 master weights and Adam state; BLOOM-176B's 2.3 TB is ~13 B/param).
A synchronous checkpoint must finish within ``overlap_target`` of the interval, so
required write GB/s = checkpoint GB / (overlap_target x interval seconds) (tiers.md:
checkpoint overlap under 10 % of training time).
Idle cost per day = GPUs x 24 h x $/GPU-hour x I/O-wait fraction (tiers.md correction:
64 x 24 x $4 x 0.2 = $1,229, not $3,942).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.format_permission import host_devices
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.nfs import shared_directories

OVERRIDE_FLAG = "gpucluster_workload.allow_storage_below_need"


def storage_sizing(
    *,
    model_params_b: float,
    bytes_per_param: float,
    interval_min: float,
    overlap_target: float,
    write_floor_gbps: float,
    rated_write_gbps: float | None,
    gpus: int,
    gpu_hour_cost_usd: float,
    io_wait_fraction: float,
    field: str = "gpucluster_workload",
) -> dict[str, Any]:
    params = check_range(model_params_b, f"{field}.model_params_b", 0.001, 100000, unit=" (billions)")
    bpp = check_range(bytes_per_param, f"{field}.checkpoint_bytes_per_param", 0.25, 32)
    interval = check_range(interval_min, f"{field}.checkpoint_interval_min", 1, 10080, unit=" min")
    # more than half the interval spent checkpointing is not a training plan
    overlap = check_range(overlap_target, f"{field}.checkpoint_overlap_target", 0.001, 0.5)
    cost = check_range(gpu_hour_cost_usd, f"{field}.gpu_hour_cost_usd", 0, 1000)
    wait = check_range(io_wait_fraction, f"{field}.io_wait_fraction", 0, 1)
    gpus = check_range(gpus, "gpus", 1, None, integer=True)
    ckpt_bytes = params * 1e9 * bpp
    interval_s = interval * 60
    required = ckpt_bytes / 1e9 / (overlap * interval_s)
    per_day = 86400 / interval_s
    rate = rated_write_gbps if rated_write_gbps else write_floor_gbps
    write_time = ckpt_bytes / 1e9 / rate
    return {
        "checkpoint_bytes": int(ckpt_bytes),
        "checkpoint_tb": round(ckpt_bytes / 1e12, 3),
        "required_write_gbps": float(f"{required:.6g}"),
        "checkpoints_per_day": round(per_day, 2),
        "daily_write_tb": round(ckpt_bytes * per_day / 1e12, 2),
        "write_floor_gbps": write_floor_gbps,
        "rated_write_gbps": rated_write_gbps,
        "write_time_s": round(write_time, 1),
        "overlap_at_rate": round(write_time / interval_s, 4),
        "fits_floor": required <= write_floor_gbps,
        "fits_rated": None if rated_write_gbps is None else required <= rated_write_gbps,
        "full_day_cost_usd": round(gpus * 24 * cost, 2),
        "idle_cost_per_day_usd": round(gpus * 24 * cost * wait, 2),
        # the inputs, so the report can show every formula with its values (report.py)
        "inputs": {
            "model_params_b": params,
            "bytes_per_param": bpp,
            "interval_min": interval,
            "overlap_target": overlap,
            "gpus": gpus,
            "gpu_hour_cost_usd": cost,
            "io_wait_fraction": wait,
        },
    }


def storage_check(sizing: dict[str, Any], floor_gbps: float, override: bool) -> list[str]:
    """Why the plan must stop (empty when the storage keeps up, or the site overrode it)."""
    rate = sizing["rated_write_gbps"] or floor_gbps
    if sizing["required_write_gbps"] <= rate or override:
        return []
    return [
        f"checkpoints of {sizing['checkpoint_tb']} TB need {sizing['required_write_gbps']} GB/s of write "
        f"to stay within the overlap target, but the storage delivers {rate} GB/s "
        f"(tier floor {floor_gbps} GB/s). Use faster storage, a longer interval or async checkpoints, "
        f"or set {OVERRIDE_FLAG}: true to plan anyway."
    ]


#: Local NVMe (tier1): file systems the storage role makes, and how it mounts them. noatime: a
#: checkpoint or dataset read must not turn into a metadata write.
LOCAL_FILESYSTEMS = ("ext4", "xfs")
LOCAL_MOUNT_OPTIONS = "defaults,noatime"


def local_raid_plan(
    local: dict[str, Any],
    paths: dict[str, str],
    field: str = "gpucluster_storage.local_nvme",
    *,
    hosts: Sequence[str] = (),
    inventory_hosts: Sequence[str] = (),
) -> dict[str, Any]:
    """Devices, RAID0 array, file system and mount of local NVMe scratch; the commands the role runs.

    Nothing here decides whether a device may be erased: the block_device_guard module does, on the
    host, from ``allow_format`` and that host's ``allow_format_devices``. The inventory lists
    ``<host>:/dev/...`` entries (format_permission.py), each a device of ``devices`` or the array on
    one of ``hosts`` (the storage hosts, which build the scratch array); the plan gives
    ``{host: [device, ...]}``.
    """
    devices = local.get("devices")
    ok = isinstance(devices, list) and bool(devices)
    require(
        ok and all(isinstance(d, str) and d.startswith("/dev/") for d in devices),
        f"{field}.devices",
        devices,
        "a list of block devices (/dev/...)",
    )
    require(len(set(devices)) == len(devices), f"{field}.devices", devices, "each device listed once")
    raid = local.get("raid_device")
    if len(devices) > 1:
        require(isinstance(raid, str) and raid.startswith("/dev/md"), f"{field}.raid_device", raid, "/dev/mdN")
    elif raid is not None:
        raise PlanError(f"{field}.raid_device", raid, "no array for a single device (leave raid_device out)")
    fs = check_choice(local.get("filesystem", "ext4"), f"{field}.filesystem", LOCAL_FILESYSTEMS)
    mount_point = local.get("mount_point")
    require(
        isinstance(mount_point, str) and mount_point.startswith("/") and mount_point != "/",
        f"{field}.mount_point",
        mount_point,
        "an absolute path other than /",
    )
    allow = local.get("allow_format", False)
    require(isinstance(allow, bool), f"{field}.allow_format", allow, "true or false")
    planned = [*devices, *([raid] if raid else [])]
    allowed = host_devices(
        local.get("allow_format_devices"),
        f"{field}.allow_format_devices",
        {host: planned for host in hosts},
        inventory_hosts,
        what=f"device of {field}.devices or its raid_device",
    )
    target = raid or devices[0]
    create = None
    if raid:
        create = ["mdadm", "--create", raid, "--run", "--metadata=1.2", "--level=0", f"--raid-devices={len(devices)}"]
        create += devices
    return {
        "devices": list(devices),
        "raid_device": raid,
        "raid_level": "raid0" if raid else None,
        "filesystem": fs,
        "target": target,
        "mount_point": mount_point,
        "mount_options": LOCAL_MOUNT_OPTIONS,
        "allow_format": allow,
        "allow_format_devices": allowed,
        "flag": field,
        "mdadm_create_argv": create,
        "mkfs_argv": [f"mkfs.{fs}", target],
        "directories": shared_directories(paths, mount_point, mount_point),
    }


def protected_capacity(parts: dict[str, dict[str, Any]], counts: dict[str, int]) -> dict[str, Any]:
    """Raw and usable capacity of the protected storage, in devices' worth (issue 38, storage/raid.py).

    ``parts``: plan.storage.protection's parts (``{ost: {members, usable_devices, level}, ...}``);
    ``counts``: how many of each part the site has (``{ost: 16, mdt: 1}``). Usable per array:
    RAID-6 (n-2) x device, RAID-10 n/2, RAID-1 one device, a raw device itself (md(4)); a declared
    volume (hardware, zfs) counts as the one device it is. Multiply by the device size for bytes.
    """
    out: dict[str, Any] = {}
    for name, part in parts.items():
        members = int(part.get("members") or 1)
        usable = float(part.get("usable_devices") or members)
        n = int(counts.get(name, 1))
        out[name] = {
            "arrays": n,
            "raw_devices": n * members,
            "usable_devices": round(n * usable, 3),
            "usable_fraction": round(usable / members, 4),
            "formula": f"{n} x {part.get('level') or 'raw'} of {members}: {usable:g} devices' worth each",
        }
    return out
