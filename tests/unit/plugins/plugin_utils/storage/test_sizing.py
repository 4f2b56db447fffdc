"""Storage sizing (tiers.md storage rules and cost correction; dossier 9.4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import storage_check, storage_sizing

BASE = dict(
    model_params_b=70, bytes_per_param=14, interval_min=30, overlap_target=0.10, write_floor_gbps=20,
    rated_write_gbps=20, gpus=64, gpu_hour_cost_usd=4.0, io_wait_fraction=0.2,
)  # fmt: skip


def test_idle_cost_is_1229_not_3942() -> None:
    """tiers.md: 64 GPUs x 24 h x $4 x 0.2 = $1,229/day (the article's $3,942 is wrong); full day $6,144."""
    s = storage_sizing(**BASE)
    assert s["idle_cost_per_day_usd"] == pytest.approx(1228.8)
    assert s["idle_cost_per_day_usd"] != pytest.approx(3942, abs=1)
    assert s["full_day_cost_usd"] == pytest.approx(6144)


def test_checkpoint_arithmetic() -> None:
    """70B x 14 B/param = 980 GB; within 10 % of 30 min (180 s) needs 5.44 GB/s."""
    s = storage_sizing(**BASE)
    assert s["checkpoint_bytes"] == 980_000_000_000
    assert s["required_write_gbps"] == pytest.approx(5.4444, abs=1e-4)
    assert s["checkpoints_per_day"] == 48
    assert s["daily_write_tb"] == pytest.approx(47.04)
    assert s["write_time_s"] == 49.0 and s["fits_floor"] and s["fits_rated"]


def test_bloom_checkpoint_size() -> None:
    """dossier 9.4: BLOOM-176B's training checkpoint was 2.3 TB, ~13 bytes/param."""
    s = storage_sizing(**{**BASE, "model_params_b": 176, "bytes_per_param": 13})
    assert s["checkpoint_tb"] == pytest.approx(2.3, abs=0.02)


def test_storage_below_need_stops_the_plan_unless_overridden() -> None:
    s = storage_sizing(**{**BASE, "model_params_b": 671, "rated_write_gbps": 20})
    msg = storage_check(s, 20, override=False)
    assert msg and "allow_storage_below_need" in msg[0] and "52.1889 GB/s" in msg[0]
    assert storage_check(s, 20, override=True) == []


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("overlap_target", 0.9, "checkpoint_overlap_target"),
        ("bytes_per_param", 100, "checkpoint_bytes_per_param"),
        ("io_wait_fraction", 2, "io_wait_fraction"),
        ("interval_min", 0, "checkpoint_interval_min"),
    ],
)
def test_bad_input_names_the_field(key: str, value: float, field: str) -> None:
    with pytest.raises(PlanError, match=rf"gpucluster_workload\.{field}"):
        storage_sizing(**{**BASE, key: value})


@given(params=st.floats(0.1, 2000), interval=st.floats(1, 600), overlap=st.floats(0.01, 0.5))
def test_required_rate_keeps_overlap_on_target(params: float, interval: float, overlap: float) -> None:
    s = storage_sizing(**{**BASE, "model_params_b": params, "interval_min": interval, "overlap_target": overlap})
    seconds = s["checkpoint_bytes"] / 1e9 / s["required_write_gbps"]
    assert seconds / (interval * 60) == pytest.approx(overlap, rel=1e-2)
