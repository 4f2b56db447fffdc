"""The idempotent re-run's task-host pairs (docs/performance.md, "What is left to cut").

The compute role looks at the pending restarts a second time only when it has to: the slurm role's
restart.yml already ran on the node earlier in the play. Each case is the include's own `when`,
evaluated by ansible-core's templar on the registered results a run leaves.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from conftest import ROOT

TASKS = ROOT / "roles" / "compute" / "tasks"


def _walk(items: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for task in items or []:
        out.append(task)
        for key in ("block", "rescue", "always"):
            out += _walk(task.get(key))
    return out


def _restart_include() -> dict[str, Any]:
    main = yaml.safe_load((TASKS / "main.yml").read_text())
    (include,) = [t for t in main if t.get("ansible.builtin.include_role", {}).get("tasks_from") == "restart.yml"]
    return include


def _runs_restart(scheduler: str = "slurm", **registered: Any) -> bool:
    include = _restart_include()
    variables: dict[str, Any] = {"gpucluster_host_plan": {"cluster": {"scheduler": scheduler}}, **registered}
    variables.update({k: trust_as_template(v) for k, v in include["vars"].items() if isinstance(v, str)})
    templar = Templar(loader=DataLoader(), variables=variables)
    return all(templar.evaluate_conditional(trust_as_template(c)) for c in include["when"])


NOTHING = {"matched": 0, "changed": False}


@pytest.mark.parametrize(
    ("registered", "runs"),
    [
        ({"slurm_restart_markers": NOTHING}, False),  # the idempotent re-run: one look at the folder
        ({"slurm_restart_markers": NOTHING, "compute_pending_clocks": {"changed": True}}, True),
        ({"slurm_restart_markers": NOTHING, "compute_pending_gpu": {"changed": True}}, True),
        ({"slurm_restart_markers": NOTHING, "compute_pending_mig": {"changed": True}}, True),
        ({"slurm_restart_markers": NOTHING, "compute_pending_beegfs": {"changed": True}}, True),
        ({"slurm_restart_markers": NOTHING, "compute_pending_clocks": {"changed": False, "skipped": True}}, False),
        # the slurm role restarted what it found (and cleared the markers)
        ({"slurm_restart_markers": {"matched": 1}, "slurm_restart_decision": {"restart": True}}, False),
        # ... or left it pending (drain_policy skip): look again at the end of the node's converge
        ({"slurm_restart_markers": {"matched": 1}, "slurm_restart_decision": {"restart": False}}, True),
        ({}, True),  # the slurm role's look did not run on this host
        ({"slurm_restart_markers": {"skipped": True, "changed": False}}, True),
    ],
)
def test_the_second_look_at_the_pending_restarts_runs_only_when_needed(registered: dict, runs: bool) -> None:
    assert _runs_restart(**registered) is runs


def test_the_kubernetes_path_never_includes_the_slurm_restart() -> None:
    assert _runs_restart("kubernetes", compute_pending_clocks={"changed": True}) is False


def test_every_marker_the_compute_role_writes_is_named_in_the_condition() -> None:
    """A new task writing a marker into the pending folder must register compute_pending_<x> and be
    listed in compute_restart_recorded, or its restart would wait for the next run."""
    writers = [
        t
        for path in sorted(TASKS.glob("*.yml"))
        for t in _walk(yaml.safe_load(path.read_text()))
        if "compute_restart_pending_dir" in str(t.get("ansible.builtin.copy", {}).get("dest", ""))
    ]
    assert len(writers) == 4, [t["name"] for t in writers]
    recorded = _restart_include()["vars"]["compute_restart_recorded"]
    for task in writers:
        assert re.fullmatch(r"compute_pending_[a-z]+", task.get("register", "")), task["name"]
        assert f"{task['register']} | default({{}})" in recorded, task["register"]


def test_the_kubernetes_pending_restarts_are_one_include() -> None:
    main = yaml.safe_load((TASKS / "main.yml").read_text())
    (include,) = [t for t in main if t.get("ansible.builtin.include_tasks") == "pending_kubernetes.yml"]
    assert include["when"] == "gpucluster_host_plan.cluster.scheduler == 'kubernetes'"
    names = [t["name"] for t in yaml.safe_load((TASKS / "pending_kubernetes.yml").read_text())]
    assert names[0] == "List the pending restarts" and len(names) == 4
