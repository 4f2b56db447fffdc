"""report.md's rows of the asynchronous checkpoints (plan.storage.checkpoint_drain, storage/checkpoint.py): each
value with the formula and inputs that reached it, sync and async side by side."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.checkpoint import (
    FIELD,
    MARKER,
    PINNED_RAM_FRACTION,
    REMOTE_LAYOUT,
    USER_DIR_MODE,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import CheckpointDrain, ReportCell


def _n(value: float) -> str:
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _sync_row(drain: CheckpointDrain, nodes: int, interval_min: float) -> list[ReportCell]:
    """The stall of a synchronous checkpoint: the node's shard at its FS share (or its storage link)."""
    shard_gb = drain["shard_bytes"] / 1e9
    fs = drain["fs_write_gbps"]
    client = drain.get("client_link_gbps")
    bound = (
        f"min({_n(fs / nodes)} GB/s FS share, {_n(client)} GB/s storage link)"
        if client
        else f"{_n(fs)} GB/s FS write / {nodes} nodes"
    )
    return [
        "stall per checkpoint, sync (s)",
        drain["stall_sync_s"],
        f"{_n(shard_gb)} GB shard per node / {bound} = {_n(drain['sync_rate_gbps'])} GB/s; "
        f"{_n(100 * drain['overlap_sync'])} % of the {_n(interval_min)} min interval",
    ]


def _async_how(drain: CheckpointDrain) -> str:
    """How the stall of an asynchronous checkpoint is reached: the device-to-host copy and the framework."""
    inp = drain["inputs"]
    gpu_gb = drain.get("shard_gpu_bytes", drain["shard_bytes"]) / 1e9
    return (
        f"{_n(gpu_gb)} GB shard per GPU / {_n(drain['host_link_gbps'])} GB/s device-to-host "
        f"({drain['host_link']}) = {_n(drain['copy_d2h_s'])} s + {_n(inp['blocking_overhead_s'])} s framework "
        f"blocking ({FIELD}.blocking_overhead_s; PyTorch DCP async_save, Megatron-Core async save: the write "
        f"runs in the background); {_n(100 * drain['overlap_async'])} % of the interval"
    )


def drain_rows(
    drain: CheckpointDrain, checkpoint_bytes: int, nodes: int, interval_min: float
) -> list[list[ReportCell]]:
    """The report's rows: each value with the formula and inputs that reached it; sync and async side by side."""
    shard_gb = drain["shard_bytes"] / 1e9
    sync_row = _sync_row(drain, nodes, interval_min)
    async_how = _async_how(drain)
    if not drain["enabled"]:
        return [
            ["async checkpoints", "off", f"{FIELD}.enabled: false (local_nvme: checkpoints are saved on the node)"],
            sync_row,
            ["stall per checkpoint, async if it were on (s)", drain["stall_async_s"], async_how],
        ]
    inp = drain["inputs"]
    fs = drain["fs_write_gbps"]
    cap = drain["staging_capacity_tb"]
    faster = drain["stall_async_s"] < drain["stall_sync_s"]
    ram = drain["pinned_ram_limit_bytes"]
    return [
        # paths in the value column: report.md escapes that one (inventory strings), not the "how"
        [
            "async checkpoints",
            f"{drain['staging_path']} -> {drain['remote_path']}",
            f"on; marker {MARKER}; copied as the folder's owner to <remote>/{REMOTE_LAYOUT} "
            f"(mode {drain.get('user_dir_mode', USER_DIR_MODE)})",
        ],
        ["shard per node (GB)", round(shard_gb, 1), f"{_n(checkpoint_bytes / 1e9)} GB / {nodes} nodes"],
        sync_row,
        [
            "stall per checkpoint, async (s)",
            drain["stall_async_s"],
            async_how + ("" if faster else "; not shorter than sync: the FS takes a shard faster than the host link"),
        ],
        [
            "background write (s)",
            drain["background_write_s"],
            f"{_n(shard_gb)} GB / {_n(inp['staging_write_gbps'])} GB/s local staging write, while training runs; "
            f"stall + write within the {_n(interval_min * 60)} s interval: "
            f"{'yes' if drain['fits_background'] else 'no'}",
        ],
        [
            "pinned host memory per node (GiB)",
            round(drain["pinned_bytes"] / 2**30, 1),
            "the node's shards staged from its GPUs (DCP: per-rank checkpoint x ranks); "
            + (
                f"within {_n(ram / 2**30)} GiB ({PINNED_RAM_FRACTION:g} x the node's RAM): "
                f"{'yes' if drain['fits_ram'] else 'no'}"
                if ram
                else "node RAM not given"
            ),
        ],
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
            f"(interval - background write): fits {'yes' if drain['fits_window'] else 'no'}",
        ],
    ]
