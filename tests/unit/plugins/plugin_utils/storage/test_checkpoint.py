"""Async checkpoint staging and drain (docs/sources.md [M3]: local NVMe first, then drain)."""

from __future__ import annotations

import pytest
from conftest import load_inventory
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.checkpoint import (
    C2C_GBS_PER_DIRECTION,
    FIELD,
    MARKER,
    STAGING_MODE,
    USER_DIR_MODE,
    async_inputs,
    checkpoint_drain,
    drain_plan,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.checkpoint_report import drain_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import storage_sizing

SIZING = dict(
    model_params_b=70, bytes_per_param=14, interval_min=30, overlap_target=0.10, write_floor_gbps=20,
    rated_write_gbps=20, gpus=16, gpu_hour_cost_usd=4.0, io_wait_fraction=0.2,
)  # fmt: skip


def _drain(raw: dict | None = None, storage_type: str = "nfs", nodes: int = 2, **sizing: float) -> dict:
    return checkpoint_drain(
        raw,
        storage_type=storage_type,
        local_scratch="/raid",
        sizing=storage_sizing(**{**SIZING, **sizing}),
        nodes=nodes,
        remote_path="/shared/checkpoints",
        shared_roots=("/shared",),
    )


def test_tier2_reference_numbers() -> None:
    """70B x 14 B = 980 GB over 2 nodes: 490 GB shards; staging (2 + 1) x 490 GB = 1.47 TB per node;
    drain limit 20 GB/s x 0.75 / 2 = 7.5 GB/s (rsync KiB/s); copy 490 / 7.5 = 65.3 s; drain = local hash
    490 / 7 = 70 s + copy + read-back = 200.7 s, within 1800 - 70 s."""
    d = _drain()
    assert d["enabled"] and d["shard_bytes"] == 490_000_000_000
    assert d["staging_path"] == "/raid/checkpoint-staging" and d["remote_path"] == "/shared/checkpoints"
    assert d["marker"] == MARKER == ".complete" and d["keep_local"] == 2
    assert d["staging_tb"] == 1.47
    assert d["bwlimit_gbps"] == 7.5 and d["bwlimit_kib"] == 7_324_218  # 7.5e9 / 1024
    assert d["copy_time_s"] == pytest.approx(65.3) and d["drain_time_s"] == pytest.approx(200.7)
    assert d["drain_window_s"] == 1730.0 and d["fits_window"]
    assert d["stall_sync_s"] == 49.0 and d["overlap_sync"] == pytest.approx(49 / 1800, abs=1e-4)
    # async blocks only for the device-to-host copy ([M4][M5]): 490 GB / 8 GPUs = 61.25 GB per GPU over
    # PCIe Gen5 x16 (63 GB/s) = 0.97 s, plus the framework's 5 s; the 490 GB write to local NVMe
    # (70 s at 7 GB/s) runs in the background, within the interval
    assert d["copy_d2h_s"] == pytest.approx(0.97) and d["stall_async_s"] == 6.0
    assert d["background_write_s"] == 70.0 and d["fits_background"]
    assert d["pinned_bytes"] == 490_000_000_000 and d["fits_ram"] is None  # no RAM given here
    assert d["check"] == [] and d["fits_capacity"] is None


def test_async_stall_beats_sync_on_a_slow_fs() -> None:
    """Article 000's case: a busy FS (here 2 GB/s) makes the sync stall long; the local write does not."""
    d = _drain(rated_write_gbps=2)
    assert d["stall_sync_s"] == 490.0 and d["stall_async_s"] == 6.0
    assert d["overlap_async"] < 0.05 < d["overlap_sync"]  # "from 20-30 % to under 5 %" direction
    rows = drain_rows(d, 980_000_000_000, 2, 30)
    assert "not shorter than sync" not in rows[-1][2]


def test_the_report_says_when_async_is_not_shorter() -> None:
    """A measured 1 GB/s device-to-host copy (pageable memory, say): 61.25 s + 5 s, longer than sync's 49 s."""
    d = _drain({"host_link_gbps": 1})
    assert d["stall_async_s"] == pytest.approx(66.2, abs=0.1) and d["host_link"] == f"{FIELD}.host_link_gbps"
    rows = {r[0]: r for r in drain_rows(d, 980_000_000_000, 2, 30)}
    assert "not shorter than sync" in rows["stall per checkpoint, async (s)"][2]
    assert "rsync --bwlimit=7324218" in rows["drain limit per node (GB/s)"][2]
    assert "20 GB/s FS write x (1 - read_headroom 0.25) / 2 nodes" in rows["drain limit per node (GB/s)"][2]


def _plan_drain(**kw: float) -> dict:
    return drain_plan(
        async_inputs({}, "lustre", "/raid"),
        checkpoint_bytes=5_670_000_000_000,  # tier4: 405B x 14 B
        interval_min=30,
        fs_write_gbps=120,
        nodes=8,
        remote_path="/lustre/aifs/checkpoints",
        gpus_per_node=8,
        **kw,
    )


def test_tier4_async_stall_is_the_pcie_copy_not_the_local_write() -> None:
    """Issue 26: the old model put tier4's async stall at 101 s (the local write) against 47 s sync. The
    frameworks block only for the copy to pinned host memory ([M4][M5]): 88.6 GB per GPU over PCIe Gen5
    x16 is 1.4 s (+ 5 s); sync is 708.75 GB per node / min(15 GB/s FS share, 100 GB/s link) = 47.3 s."""
    d = _plan_drain(host_link_gbps=63, node_ram_bytes=2048 * 2**30, client_link_gbps=100)
    assert d["stall_async_s"] == pytest.approx(6.4, abs=0.05)
    assert d["stall_sync_s"] == pytest.approx(47.2, abs=0.1)
    assert d["stall_async_s"] < d["stall_sync_s"]
    assert d["background_write_s"] == pytest.approx(101.2, abs=0.1) and d["fits_background"]
    assert d["fits_ram"] and d["sync_bound"] == "FS share"
    # a slow client link bounds sync instead: 708.75 GB / 12.5 GB/s (one 100G port)
    slow = _plan_drain(client_link_gbps=12.5)
    assert slow["stall_sync_s"] == pytest.approx(56.7, abs=0.1) and slow["sync_bound"] == "client link"
    # NVLink-C2C (Grace parts): the site sets the host link; the copy is a seventh of PCIe Gen5's
    c2c = drain_plan(
        async_inputs({"host_link_gbps": C2C_GBS_PER_DIRECTION}, "lustre", "/raid"),
        checkpoint_bytes=5_670_000_000_000, interval_min=30, fs_write_gbps=120, nodes=8,
        remote_path="/lustre/aifs/checkpoints",
    )  # fmt: skip
    assert c2c["copy_d2h_s"] == pytest.approx(88.59 / 450, abs=0.01)


def test_pinned_buffers_beyond_half_the_ram_stop_the_plan() -> None:
    d = _plan_drain(node_ram_bytes=1024 * 2**30)  # 660 GiB of pinned shard > 512 GiB
    assert d["fits_ram"] is False
    assert any("pin 660 GiB" in c and "gpucluster_node.memory_gib" in c for c in d["check"])


def test_a_background_write_longer_than_the_interval_stops_the_plan() -> None:
    d = _plan_drain()
    slow = drain_plan(
        async_inputs({"staging_write_gbps": 0.3}, "lustre", "/raid"),
        checkpoint_bytes=5_670_000_000_000, interval_min=30, fs_write_gbps=120, nodes=8,
        remote_path="/lustre/aifs/checkpoints",
    )  # fmt: skip
    assert d["fits_background"] and not slow["fits_background"]
    assert any("background write" in c and "checkpoint_interval_min" in c for c in slow["check"])


def test_async_off_still_reports_what_it_would_stall() -> None:
    d = _drain(storage_type="local_nvme")
    rows = {r[0]: r for r in drain_rows(d, 980_000_000_000, 2, 30)}
    assert rows["stall per checkpoint, async if it were on (s)"][1] == d["stall_async_s"] == 6.0


def test_capacity_check_stops_the_plan() -> None:
    d = _drain({"staging_capacity_tb": 1.0})
    assert d["fits_capacity"] is False
    assert len(d["check"]) == 1 and f"{FIELD}.staging_capacity_tb 1 TB" in d["check"][0]
    assert _drain({"staging_capacity_tb": 1.5})["check"] == []


def test_drain_that_cannot_finish_stops_the_plan() -> None:
    """A 1-minute interval: the window is 60 - 70 s; and 4 minutes: 170 s for a 200.7 s drain."""
    d = _drain(interval_min=1)
    assert not d["fits_window"] and d["drain_window_s"] == -10
    d = _drain(interval_min=4)
    assert not d["fits_window"] and d["drain_window_s"] == 170
    assert "before the next checkpoint" in d["check"][0]


def test_local_nvme_has_nothing_to_drain() -> None:
    d = _drain(storage_type="local_nvme")
    assert not d["enabled"] and "staging_path" not in d and d["check"] == []
    with pytest.raises(PlanError) as caught:
        _drain({"enabled": True}, storage_type="local_nvme")
    assert caught.value.field == f"{FIELD}.enabled"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"keep_local": 0}, "keep_local"),
        ({"keep_local": 1.5}, "keep_local"),
        ({"read_headroom": 0.95}, "read_headroom"),
        ({"staging_write_gbps": 0}, "staging_write_gbps"),
        ({"staging_capacity_tb": -1}, "staging_capacity_tb"),
        ({"enabled": "yes"}, "enabled"),
        ({"staging_path": "raid/x"}, "staging_path"),
        ({"staging_path": "/shared/stage"}, "staging_path"),  # inside the shared mount
        ({"staging_path": "/"}, "staging_path"),
        ({"blocking_overhead_s": -1}, "blocking_overhead_s"),
        ({"host_link_gbps": 0}, "host_link_gbps"),
    ],
)
def test_bad_inputs_name_the_field(raw: dict, field: str) -> None:
    with pytest.raises(PlanError) as caught:
        _drain(raw)
    assert caught.value.field == f"{FIELD}.{field}"


def test_no_scratch_and_no_staging_path_is_an_error() -> None:
    with pytest.raises(PlanError) as caught:
        async_inputs({}, "lustre", None)
    assert caught.value.field == f"{FIELD}.staging_path"


@given(
    ckpt_gb=st.floats(1, 20000),
    nodes=st.integers(1, 512),
    interval_min=st.floats(1, 10080),
    fs=st.floats(0.1, 2000),
    local=st.floats(0.1, 100),
    headroom=st.floats(0, 0.9),
    keep=st.integers(1, 100),
    capacity=st.one_of(st.none(), st.floats(0.001, 10000)),
)
def test_a_passing_check_means_the_drain_fits(
    ckpt_gb: float,
    nodes: int,
    interval_min: float,
    fs: float,
    local: float,
    headroom: float,
    keep: int,
    capacity: float | None,
) -> None:
    """Whenever the plan accepts the drain, every node's shard drains at the planned limit before the
    next checkpoint is written, all nodes together stay within the FS's write less the headroom, and
    the staging space fits the given capacity."""
    inputs = async_inputs(
        {
            "keep_local": keep,
            "staging_write_gbps": local,
            "read_headroom": headroom,
            "staging_capacity_tb": capacity,
        },
        "lustre",
        "/raid",
    )
    d = drain_plan(
        inputs,
        checkpoint_bytes=int(ckpt_gb * 1e9),
        interval_min=interval_min,
        fs_write_gbps=fs,
        nodes=nodes,
        remote_path="/lustre/aifs/checkpoints",
    )
    assert nodes * d["bwlimit_gbps"] <= fs * (1 - headroom) * (1 + 1e-5)
    assert d["bwlimit_kib"] * 1024 <= d["bwlimit_gbps"] * 1e9 * (1 + 1e-5)
    if not d["check"]:
        interval_s = interval_min * 60
        shard_gb = d["shard_bytes"] / 1e9
        local_s = shard_gb / local  # the training job's local write, then the drain's local hash
        at_rsync_limit = d["shard_bytes"] / (d["bwlimit_kib"] * 1024)  # rsync's whole KiB/s
        # write, hash, copy and read back the shard before the next checkpoint
        assert 2 * local_s + 2 * shard_gb / d["bwlimit_gbps"] <= interval_s * (1 + 1e-5)
        if d["bwlimit_kib"] > 1000:  # the rounding to whole KiB/s matters only at tiny limits
            assert 2 * local_s + 2 * at_rsync_limit <= interval_s * (1 + 1e-3)
        if capacity is not None:
            assert (keep + 1) * d["shard_bytes"] <= capacity * 1e12
    else:
        assert not d["fits_window"] or d["fits_capacity"] is False


@pytest.mark.parametrize("tier", ["tier1", "tier2", "tier3", "tier4"])
def test_every_reference_tier_plans_and_reports(tier: str) -> None:
    plan = cluster_plan(*load_inventory(tier))
    drain = plan["storage"]["checkpoint_drain"]
    assert drain["enabled"] is (tier != "tier1")
    assert drain["check"] == []
    section = next(s for s in report_sections(plan) if s["title"] == "Checkpoint staging and drain")
    first = section["rows"][0]
    if tier == "tier1":
        assert first[1] == "off"
    else:
        assert first[1] == f"{drain['staging_path']} -> {drain['remote_path']}"
        assert first[2].startswith("on; ")
        assert "copied as the folder's owner to <remote>/<user>/<name> (mode 0700)" in first[2]


def test_copies_are_scoped_by_owner_in_the_plan() -> None:
    """Issue 37: the drain copies <staging>/<name> as its owner to <remote>/<user>/<name>; the user's
    folder is theirs alone; the staging folder is sticky (no user renames or deletes another's)."""
    d = _drain()
    assert d["remote_layout"] == "/shared/checkpoints/<user>/<name>"
    assert d["user_dir_mode"] == USER_DIR_MODE == "0700"
    assert d["staging_mode"] == STAGING_MODE == "1777"
    assert int(d["staging_mode"], 8) & 0o1000  # the sticky bit
    assert int(d["user_dir_mode"], 8) & 0o077 == 0  # nothing for group or others
