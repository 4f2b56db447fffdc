"""converge_lock on the controller: who asks for the lock, and whether its current holder still runs.

The module (plugins/modules/converge_lock.py) runs on the head and knows nothing of the controller.
This action fills in the asking run's identity: the controller's hostname, the pid of the
ansible-playbook process and its start time. An action plugin runs in a worker process that the
ansible-playbook process forked (ansible/executor/process/worker.py, WorkerProcess is a
multiprocessing.Process started by the TaskQueueManager of that process), so ``os.getppid()`` is
ansible-playbook's pid; ``pid`` overrides it (tools/ci/run_slices.py passes its own).

When the head says the lock is held by another run from THIS controller whose process is gone
(killed, crashed, or its play aborted before the release), the action asks again with that
holder's token and takes the lock over, with a warning. A holder on another controller cannot be
checked from here: its lock is stale only after ``max_age_s``, or broken with ``force``.
In check mode the lock is only read: a dry run changes nothing, so it cannot interleave with a
converge, and it must not block one; a held lock is reported as a warning.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

MODULE = "gpucluster.tiers.converge_lock"


def proc_start(pid: int, proc: str = "/proc") -> str:
    """Field 22 of /proc/<pid>/stat (starttime, clock ticks after boot; proc_pid_stat(5)); '' if unknown."""
    try:
        with open(f"{proc}/{pid}/stat", encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return ""
    # field 2 (comm) is in parentheses and may hold spaces: split after its last ')'
    rest = text.rsplit(")", 1)[-1].split()
    return rest[19] if len(rest) > 19 else ""


def pid_alive(pid: int, start: str = "", proc: str = "/proc") -> bool:
    """Whether process ``pid`` runs on this machine and, when ``start`` is given, is the same process."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # kill(2): signal 0 checks existence and permission only
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    if start:
        now = proc_start(pid, proc)
        if now and now != start:
            return False  # the pid was reused by a later process
    return True


def holder_message(holder: dict[str, Any], path: str, max_age_s: int) -> str:
    when = holder.get("acquired_utc") or "?"
    who = f"{holder.get('user')}@" if holder.get("user") else ""
    return (
        f"Another converge holds the cluster's lock ({path} on the head): run {holder.get('run_id') or '?'} "
        f"by {who}{holder.get('controller') or '?'} pid {holder.get('pid') or '?'} since {when}. "
        f"No host was touched. Wait for it to finish and run again; if that run is gone (its controller "
        f"died), the lock is stale after {max_age_s} s (gpucluster_lock_max_age_s), a run from "
        f"{holder.get('controller') or 'its controller'} takes it over at once, or break it with "
        "-e gpucluster_lock_break=true (only when you are sure nothing else converges)."
    )


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        state = str(args.get("state") or "present")
        if state not in ("present", "absent"):
            raise AnsibleActionFail(f"state must be present or absent, got {state!r}")
        pid = int(args.get("pid") or 0) or os.getppid()
        controller = str(args.get("controller") or socket.gethostname())
        start = proc_start(pid)
        run_id = str(args.get("run_id") or "") or f"{controller}-{pid}-{int(time.time())}"
        max_age_s = int(args.get("max_age_s") or 14400)
        path = str(args.get("path") or "/run/gpucluster/converge.lock")
        module_args = {
            "state": state,
            "path": path,
            "run_id": run_id,
            "controller": controller,
            "pid": pid,
            "pid_start": start,
            "user": getpass.getuser(),
            "playbook": str(args.get("playbook") or task_vars.get("ansible_play_name") or ""),
            "max_age_s": max_age_s,
            "force": _bool(args.get("force")),
        }
        out = self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
        if out.get("failed"):
            return {**result, **out}
        if state == "present" and out.get("status") == "held":
            holder = out.get("holder") or {}
            same = holder.get("controller") == controller and int(holder.get("pid") or 0) != pid
            if same and not pid_alive(int(holder.get("pid") or 0), str(holder.get("pid_start") or "")):
                out = self._execute_module(
                    module_name=MODULE,
                    module_args={**module_args, "stale_token": out.get("token", "")},
                    task_vars=task_vars,
                )
            if out.get("status") == "held":
                message = holder_message(out.get("holder") or holder, path, max_age_s)
                if self._task.check_mode:
                    result.setdefault("warnings", []).append(message)
                    return {**result, **out, "failed": False, "changed": False, "run_id": run_id}
                return {**result, **out, "failed": True, "msg": message, "run_id": run_id}
        result.update(out)
        result["run_id"] = run_id
        return result


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on", "y")
