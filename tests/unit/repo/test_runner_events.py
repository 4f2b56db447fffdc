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
