"""tools/ci/runner_dir.py reads a run's job events with JMESPath: recap, failed and changed tasks.

The events are written here in ansible-runner's artifact layout (artifacts/<ident>/job_events/
<counter>-<uuid>.json, status, rc), with the fields ansible-runner records.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def runner_dir() -> ModuleType:
    spec = importlib.util.spec_from_file_location("runner_dir", ROOT / "tools" / "ci" / "runner_dir.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("runner_dir", module)
    spec.loader.exec_module(module)
    return module


def _ok(host: str, task: str, *, changed: bool) -> dict[str, Any]:
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": task, "res": {"changed": changed}}}


def _failed(host: str, task: str, *, ignored: bool) -> dict[str, Any]:
    data = {"host": host, "task": task, "ignore_errors": True if ignored else None, "res": {"failed": True}}
    return {"event": "runner_on_failed", "event_data": data}


def _artifacts(tmp_path: Path, events: list[dict[str, Any]], status: str = "failed", rc: int = 2) -> Path:
    art = tmp_path / "artifacts" / "site-again"
    (art / "job_events").mkdir(parents=True)
    for counter, event in enumerate(events, start=1):
        # counters past 9 sort after 1 only numerically: the reader must order by number, not name
        (art / "job_events" / f"{counter}-{counter:08x}.json").write_text(json.dumps({"counter": counter, **event}))
    (art / "status").write_text(status + "\n")
    (art / "rc").write_text(f"{rc}\n")
    return art


EVENTS = [
    {"event": "playbook_on_start", "event_data": {}},
    _ok("head01", "Write slurm.conf", changed=False),
    _ok("compute01", "Write nccl.conf", changed=True),
    _failed("compute01", "Probe nvidia-smi", ignored=True),
    *[_ok("compute02", f"Task {n}", changed=False) for n in range(8)],
    _ok("compute02", "Restart slurmd", changed=True),
    _failed("compute02", "Start slurmd", ignored=False),
    {
        "event": "playbook_on_stats",
        "event_data": {
            "ok": {"head01": 1, "compute01": 1, "compute02": 9},
            "changed": {"head01": 0, "compute01": 1, "compute02": 1},
            "failures": {"compute02": 1},
            "dark": {},
        },
    },
]


def test_stats_queries_the_events(runner_dir: ModuleType, tmp_path: Path) -> None:
    result = runner_dir.stats(_artifacts(tmp_path, EVENTS))
    assert (result["status"], result["rc"]) == ("failed", 2)
    assert result["stats"]["changed"] == {"head01": 0, "compute01": 1, "compute02": 1}
    assert result["stats"]["failures"] == {"compute02": 1} and result["stats"]["skipped"] == {}
    # an ignored failure is not a failed task
    assert result["failed_tasks"] == [{"host": "compute02", "task": "Start slurmd"}]
    # in event order, which is numeric (event 13 after event 2)
    assert result["changed_tasks"] == [
        {"host": "compute01", "task": "Write nccl.conf"},
        {"host": "compute02", "task": "Restart slurmd"},
    ]


def test_a_run_without_events(runner_dir: ModuleType, tmp_path: Path) -> None:
    result = runner_dir.stats(_artifacts(tmp_path, [], status="failed", rc=1))
    assert result["stats"] == {} and result["failed_tasks"] == [] and result["changed_tasks"] == []


def test_expect_unchanged_names_the_tasks_that_changed(
    runner_dir: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    art = _artifacts(tmp_path, EVENTS, status="successful", rc=0)
    assert runner_dir.main(["stats", str(art), "--expect-unchanged"]) == 1
    err = capsys.readouterr().err
    assert "compute01: Write nccl.conf" in err and "compute02: Restart slurmd" in err
    assert runner_dir.main(["stats", str(art)]) == 0


DATA = ROOT / "tests" / "data" / "runner"


def test_a_run_that_failed_on_an_unreachable_host_names_it(
    runner_dir: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """Recorded: site-unreachable-only, head01 fine, compute02 unreachable (ssh refused): the run failed
    with no failed task, and the summary still says which host and why."""
    result = runner_dir.stats(DATA / "site-unreachable-only")
    assert (result["status"], result["rc"]) == ("failed", 4)
    assert result["failed_tasks"] == [] and result["failed_hosts"] == [] and result["hosts_failed"] == 0
    assert result["unreachable_hosts"] == ["compute02"] and result["hosts_unreachable"] == 1
    (task,) = result["unreachable_tasks"]
    assert (task["host"], task["task"]) == ("compute02", "Reach the host") and "ssh" in task["msg"].lower()
    assert runner_dir.main(["stats", str(DATA / "site-unreachable-only")]) == 1
    assert "run failed (rc 4); unreachable: compute02" in capsys.readouterr().err


def test_failed_and_unreachable_hosts_are_counted_apart(runner_dir: ModuleType) -> None:
    """Recorded: site-unreachable, compute01 fails a task, compute02 cannot be reached, head01 changes."""
    result = runner_dir.stats(DATA / "site-unreachable")
    assert result["status"] == "failed"
    assert (result["failed_hosts"], result["unreachable_hosts"]) == (["compute01"], ["compute02"])
    assert (result["hosts_failed"], result["hosts_unreachable"]) == (1, 1)
    assert result["failed_tasks"] == [{"host": "compute01", "task": "Check the GPU count"}]
    assert [t["host"] for t in result["unreachable_tasks"]] == ["compute02"]
    assert result["stats"]["dark"] == {"compute02": 1} and result["stats"]["failures"] == {"compute01": 1}


def test_hosts_from_the_events_when_the_run_has_no_recap(runner_dir: ModuleType, tmp_path: Path) -> None:
    unreachable = {"event": "runner_on_unreachable", "event_data": {"host": "compute03", "task": "Reach", "res": {}}}
    result = runner_dir.stats(_artifacts(tmp_path, [unreachable, _failed("compute01", "Probe", ignored=False)]))
    assert result["stats"] == {}
    assert (result["failed_hosts"], result["unreachable_hosts"]) == (["compute01"], ["compute03"])


@pytest.mark.parametrize("script", ["run_plan.py", "runner_dir.py"])
def test_a_python_without_the_toolchain_reruns_the_script_with_the_venv(script: str) -> None:
    """`python3 tools/ci/run_plan.py --tier tier1` from a Python without ansible-runner (here: -S, no
    site-packages) re-runs itself with .venv/bin/python; where that cannot help, it says what to run."""
    import os
    import subprocess

    base = str(Path(sys.base_prefix) / "bin" / "python3")
    cmd = [base, "-S", str(ROOT / "tools" / "ci" / script), "--help"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPUCLUSTER_TOOLS_REEXEC")}
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert "usage:" in run.stdout and f"running with {ROOT / '.venv' / 'bin' / 'python'}" in run.stderr
    run = subprocess.run(cmd, env={**env, "GPUCLUSTER_TOOLS_REEXEC": "1"}, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "usage:" not in run.stdout
    assert f"then `.venv/bin/python tools/ci/{script} ...`" in run.stderr, run.stderr
