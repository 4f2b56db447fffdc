"""converge_lock's action (plugins/action/converge_lock.py): the controller's identity and liveness.

The module runs for real (its logic on a lock file in tmp_path); _execute_module is replaced by a
call of that logic, as the head would answer.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.plugins.action import ActionBase

from ansible_collections.gpucluster.tiers.plugins.action import converge_lock as action_mod
from ansible_collections.gpucluster.tiers.plugins.action.converge_lock import ActionModule, pid_alive, proc_start
from ansible_collections.gpucluster.tiers.plugins.module_utils.converge_lock import Holder, acquire, release


def _head(module_name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
    """What the module on the head returns, without Ansible's transport."""
    args = dict(module_args)
    me = Holder(
        run_id=args["run_id"],
        controller=args["controller"],
        pid=args["pid"],
        pid_start=args["pid_start"],
        user=args["user"],
        playbook=args["playbook"],
    )
    if args["state"] == "present":
        out = acquire(
            args["path"], me, max_age_s=args["max_age_s"], force=args["force"], stale_token=args.get("stale_token", "")
        )
    else:
        out = release(args["path"], me, force=args["force"])
    token = Holder.from_dict(out.holder).token if out.holder else ""
    return {"changed": out.changed, "status": out.status, "holder": out.holder, "msg": out.msg, "token": token}


def run_action(monkeypatch: pytest.MonkeyPatch, check_mode: bool = False, **args: Any) -> dict[str, Any]:
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    action = object.__new__(ActionModule)
    action._task = SimpleNamespace(args=args, check_mode=check_mode)
    action._execute_module = _head  # type: ignore[method-assign]
    return action.run(task_vars={"ansible_play_name": "site"})


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_proc_start_reads_field_22_past_a_comm_with_spaces(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    fields = ["S"] + [str(n) for n in range(4, 60)]  # field 3 (state) onwards; field 22 is "22"
    (tmp_path / "42" / "stat").write_text(f"42 (a) b) {' '.join(fields)}\n")
    assert proc_start(42, str(tmp_path)) == "22"
    assert proc_start(43, str(tmp_path)) == ""


def test_pid_alive_tells_running_dead_and_reused_pids() -> None:
    me = os.getpid()
    assert pid_alive(me) and pid_alive(me, proc_start(me))
    assert not pid_alive(me, "1")  # same pid, another start time: a reused pid
    assert not pid_alive(dead_pid())
    assert not pid_alive(0)


def test_the_run_is_identified_by_its_ansible_playbook_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = run_action(monkeypatch, path=str(tmp_path / "l"), state="present")
    assert out["status"] == "acquired" and not out.get("failed")
    holder = out["holder"]
    assert holder["pid"] == os.getppid() and holder["controller"] == socket.gethostname()
    assert holder["pid_start"] == proc_start(os.getppid()) and holder["playbook"] == "site"
    assert out["run_id"] == holder["run_id"]


def test_a_live_holder_refuses_the_run_with_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "l")
    run_action(monkeypatch, path=path, pid=os.getpid(), run_id="first")
    out = run_action(monkeypatch, path=path, run_id="second", max_age_s=600)
    assert out["failed"] and out["status"] == "held"
    msg = out["msg"]
    assert "run first by" in msg and f"{socket.gethostname()} pid {os.getpid()}" in msg
    assert "No host was touched" in msg and "gpucluster_lock_break=true" in msg and "600 s" in msg


def test_a_dead_holder_on_this_controller_is_taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "l")
    run_action(monkeypatch, path=path, pid=dead_pid(), run_id="crashed")
    out = run_action(monkeypatch, path=path, run_id="next")
    assert not out.get("failed") and out["status"] == "taken_over" and out["holder"]["run_id"] == "next"


def test_a_holder_on_another_controller_is_not_judged_from_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "l")
    run_action(monkeypatch, path=path, pid=dead_pid(), run_id="elsewhere", controller="other-ctl")
    out = run_action(monkeypatch, path=path, run_id="mine")
    assert out["failed"] and out["status"] == "held" and "other-ctl" in out["msg"]
    out = run_action(monkeypatch, path=path, run_id="mine", force="true")
    assert out["status"] == "broken"


def test_slices_with_the_holders_run_id_join(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "l")
    run_action(monkeypatch, path=path, pid=os.getpid(), run_id="site-1")
    out = run_action(monkeypatch, path=path, pid=os.getpid(), run_id="site-1")
    assert out["status"] == "joined" and not out.get("failed")


def test_check_mode_reports_a_held_lock_as_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "l")
    run_action(monkeypatch, path=path, pid=os.getpid(), run_id="first")
    out = run_action(monkeypatch, check_mode=True, path=path, run_id="dry")
    assert not out["failed"] and out["status"] == "held"
    assert "Another converge holds" in out["warnings"][0]


def test_release_by_another_run_leaves_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "l")
    run_action(monkeypatch, path=path, pid=os.getpid(), run_id="first")
    assert run_action(monkeypatch, path=path, state="absent", run_id="other")["status"] == "not_holder"
    assert run_action(monkeypatch, path=path, state="absent", run_id="first")["status"] == "released"
    assert not Path(path).exists()


def test_a_bad_state_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(action_mod.AnsibleActionFail, match="present or absent"):
        run_action(monkeypatch, state="locked")
