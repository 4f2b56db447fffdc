"""converge_lock (plugins/modules/converge_lock.py, module_utils/converge_lock.py): one converge at a time.

The lock file lives in tmp_path; the head's clock is the ``now`` argument.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpucluster.tiers.plugins.module_utils.converge_lock import Holder, acquire, decide, release
from ansible_collections.gpucluster.tiers.plugins.modules import converge_lock

A = Holder(run_id="run-a", controller="ctl1", pid=100, pid_start="555", user="ops")
B = Holder(run_id="run-b", controller="ctl2", pid=200)
T0 = 1_800_000_000.0


def lock(tmp_path: Path) -> str:
    return str(tmp_path / "gpucluster" / "converge.lock")


def test_the_first_run_creates_the_lock_naming_itself(tmp_path: Path) -> None:
    out = acquire(lock(tmp_path), A, now=T0)
    assert (out.changed, out.status) == (True, "acquired")
    data = json.loads(Path(lock(tmp_path)).read_text())
    assert data["run_id"] == "run-a" and data["controller"] == "ctl1" and data["pid"] == 100
    assert data["acquired"] == T0 and data["acquired_utc"] == "2027-01-15T08:00:00Z"


def test_a_second_run_is_refused_and_told_who_holds_the_lock(tmp_path: Path) -> None:
    acquire(lock(tmp_path), A, now=T0)
    out = acquire(lock(tmp_path), B, now=T0 + 60)
    assert (out.changed, out.status) == (False, "held")
    assert out.holder is not None and out.holder["run_id"] == "run-a"
    assert "run run-a by ops@ctl1 pid 100 since 2027-01-15 08:00:00 UTC" in out.msg
    assert json.loads(Path(lock(tmp_path)).read_text())["run_id"] == "run-a"  # untouched


def test_the_same_run_id_joins_without_replacing(tmp_path: Path) -> None:
    acquire(lock(tmp_path), A, now=T0)
    slice2 = Holder(run_id="run-a", controller="ctl1", pid=101)
    out = acquire(lock(tmp_path), slice2, now=T0 + 5)
    assert (out.changed, out.status) == (False, "joined")
    assert json.loads(Path(lock(tmp_path)).read_text())["pid"] == 100


def test_a_lock_older_than_max_age_is_stale_and_taken_over(tmp_path: Path) -> None:
    acquire(lock(tmp_path), A, now=T0)
    assert acquire(lock(tmp_path), B, now=T0 + 3600, max_age_s=3600).status == "held"  # not older yet
    out = acquire(lock(tmp_path), B, now=T0 + 3601, max_age_s=3600)
    assert (out.changed, out.status) == (True, "stale")
    assert out.previous is not None and out.previous["run_id"] == "run-a"
    assert out.warnings and "3601 s old" in out.warnings[0]
    assert json.loads(Path(lock(tmp_path)).read_text())["run_id"] == "run-b"


def test_break_replaces_a_live_lock_with_a_warning(tmp_path: Path) -> None:
    acquire(lock(tmp_path), A, now=T0)
    out = acquire(lock(tmp_path), B, now=T0 + 1, force=True)
    assert (out.changed, out.status) == (True, "broken")
    assert "gpucluster_lock_break" in out.warnings[0]


def test_a_takeover_needs_the_token_of_the_current_holder(tmp_path: Path) -> None:
    acquire(lock(tmp_path), A, now=T0)
    me = Holder(run_id="run-c", controller="ctl1", pid=300)
    wrong = Holder(run_id="run-z", controller="ctl1", pid=100, pid_start="555").token
    assert acquire(lock(tmp_path), me, now=T0 + 1, stale_token=wrong).status == "held"
    out = acquire(lock(tmp_path), me, now=T0 + 1, stale_token=A.token)
    assert (out.changed, out.status) == (True, "taken_over")
    assert "no longer runs on ctl1" in out.warnings[0]


def test_check_mode_writes_nothing(tmp_path: Path) -> None:
    out = acquire(lock(tmp_path), A, now=T0, check_mode=True)
    assert (out.changed, out.status) == (True, "acquired")
    assert not (tmp_path / "gpucluster").exists()
    acquire(lock(tmp_path), A, now=T0)
    assert acquire(lock(tmp_path), B, now=T0, check_mode=True).status == "held"
    assert release(lock(tmp_path), A, check_mode=True).status == "released"
    assert Path(lock(tmp_path)).exists()


def test_only_the_holder_releases(tmp_path: Path) -> None:
    acquire(lock(tmp_path), A, now=T0)
    out = release(lock(tmp_path), B)
    assert (out.changed, out.status) == (False, "not_holder") and Path(lock(tmp_path)).exists()
    out = release(lock(tmp_path), Holder(run_id="run-a", controller="other", pid=9))
    assert (out.changed, out.status) == (True, "released") and not Path(lock(tmp_path)).exists()
    assert release(lock(tmp_path), A).status == "absent"


def test_break_removes_another_runs_lock(tmp_path: Path) -> None:
    acquire(lock(tmp_path), A, now=T0)
    out = release(lock(tmp_path), B, force=True)
    assert (out.changed, out.status) == (True, "released") and not Path(lock(tmp_path)).exists()
    assert out.previous is not None and out.previous["run_id"] == "run-a"


def test_an_unreadable_lock_names_nobody_but_keeps_its_age(tmp_path: Path) -> None:
    path = Path(lock(tmp_path))
    path.parent.mkdir(parents=True)
    path.write_text("not json")
    os.utime(path, (T0, T0))
    assert acquire(str(path), B, now=T0 + 10, max_age_s=60).status == "held"
    assert acquire(str(path), B, now=T0 + 61, max_age_s=60).status == "stale"


def test_decide_without_a_lock_creates_it() -> None:
    assert decide(None, A, T0).action == "create"


def _race(path: str, index: int, queue: Any) -> None:
    me = Holder(run_id=f"run-{index}", controller="ctl", pid=1000 + index)
    queue.put(acquire(path, me, now=T0).status)


def test_runs_asking_at_once_get_one_lock(tmp_path: Path) -> None:
    """Eight processes at once: exactly one acquires (flock guard + O_EXCL), the rest are refused."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(lock(tmp_path), i, queue)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(10)
    statuses = sorted(queue.get(timeout=5) for _ in procs)
    assert statuses == ["acquired"] + ["held"] * 7


def run_module(capsys: pytest.CaptureFixture[str], **args: Any) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        converge_lock.main()
    return json.loads(capsys.readouterr().out)


def test_the_module_takes_refuses_and_releases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = {"path": lock(tmp_path), "controller": "ctl1", "pid": 100}
    out = run_module(capsys, run_id="run-a", **base)
    assert out["changed"] is True and out["status"] == "acquired"
    assert out["token"] == "ctl1:100::run-a"
    out = run_module(capsys, run_id="run-b", **{**base, "pid": 200})
    assert out["changed"] is False and out["status"] == "held" and out["holder"]["run_id"] == "run-a"
    assert out["token"] == "ctl1:100::run-a"  # what a takeover must name
    out = run_module(capsys, run_id="run-b", state="absent", **base)
    assert out["status"] == "not_holder" and Path(lock(tmp_path)).exists()
    assert "left in place: held by run run-a" in out["msg"]
    out = run_module(capsys, run_id="run-a", state="absent", **base)
    assert out["changed"] is True and out["status"] == "released" and not Path(lock(tmp_path)).exists()


def test_the_module_in_check_mode_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_module(capsys, run_id="run-a", path=lock(tmp_path), controller="c", pid=1, _ansible_check_mode=True)
    assert out["changed"] is True and out["status"] == "acquired"
    assert not (tmp_path / "gpucluster").exists()


def test_the_module_alone_needs_the_identity_the_action_fills_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_module(capsys, path=lock(tmp_path))
    assert out["failed"] and "through its action plugin" in out["msg"]
    assert not (tmp_path / "gpucluster").exists()
