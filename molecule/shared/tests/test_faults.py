"""Faults during a converge: a second converge is refused, a lost node is reported and healed (tier2 only).

1. Every compute node's cgroup.conf drifts (a comment line), so the next converge has work on each.
2. site.yml starts (the whole tier); once its converge lock is on the head, a SECOND site.yml
   starts: it must stop at the lock, naming the holder, having only read the hosts' facts (the preflight).
3. When the first run reaches the compute play, the node of the LAST rolling batch (the lab
   overlay rolls in two batches of 50 %, in inventory order) is stopped (``podman stop``): its
   drift is not fixed yet. The earlier batch converges; the last batch's node is unreachable, the
   whole batch failed, so Ansible ends the run there (the plan's max_fail_percentage is 0 in the
   lab: any failed node of a batch stops the roll; a failed FIRST batch would leave the later
   batches untouched, which is why the victim is the last batch's node). The recap names that
   host; every other host has failed=0 and its drift is fixed.
4. The run ended before its release play: the lock stays, held by a dead process of this
   controller. The container starts again (``podman start``, systemd up), site.yml runs again:
   it takes the lock over (a warning), heals the node (drift gone, slurmd active, idle in
   sinfo), and no OTHER host changes anything.

What an operator sees and does: docs/runbook.md, "A node lost during a converge".
Runs on tier2 (DEFAULT_TIERS); GPUCLUSTER_FAULT_TEST=1 runs it on another tier (the victim is
the last compute node), =0 skips it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import hosts_with

ROOT = Path(__file__).resolve().parents[3]
DRIFT = "# lab drift (test_faults): the next converge rewrites this file"
LOCK = "/run/gpucluster/converge.lock"  # plugins/modules/converge_lock.py's default path
COMPUTE_PLAY = "PLAY [Compute nodes, in rolling batches]"  # playbooks/site.yml


#: Tiers the test runs on by default (GPUCLUSTER_FAULT_TEST=1 runs it on another tier, =0 skips it).
DEFAULT_TIERS: tuple[str, ...] = ("tier2",)


def _enabled(plan: dict[str, Any]) -> bool:
    flag = os.environ.get("GPUCLUSTER_FAULT_TEST", "")
    return flag == "1" or (flag != "0" and plan["cluster"]["name"] in DEFAULT_TIERS)


def _argv(lab: Path) -> list[str]:
    inventories = [ROOT / "inventories" / lab.name, ROOT / "lab" / "overlay", lab / "inventory.yml"]
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(ROOT / "site.yml")]
    for inv in inventories:
        argv += ["-i", str(inv)]
    return argv


def _env() -> dict[str, str]:
    # molecule exports ANSIBLE_FORCE_COLOR, which wins over ANSIBLE_NOCOLOR: drop it (plain text)
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"}
    # one JSON line per result (the cfg's yaml format folds long messages across lines)
    env.update(
        {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    )
    return env


def _flat(text: str) -> str:
    """Whitespace runs (and YAML's line-continuation backslashes) as one space: wrapped warnings match."""
    return re.sub(r"[\\\s]+", " ", text)


def _recap(out: str) -> dict[str, dict[str, int]]:
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    rows = re.findall(r"^(\S+)\s+:\s+(ok=.*)$", out, re.MULTILINE)
    return {host: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", stats)} for host, stats in rows}


def _wait_for(what: str, check: Any, timeout: float, proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the first converge ended (rc {proc.returncode}) before {what}")
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _lock_holder(head: Any) -> dict[str, Any]:
    text = head.check_output(f"cat {LOCK} 2>/dev/null || true").strip()
    return json.loads(text) if text else {}


def _answers(host: Any) -> bool:
    """True once ssh to the host works (testinfra raises RuntimeError while sshd refuses: exit 255)."""
    try:
        return host.run("true").rc == 0
    except RuntimeError:
        return False


def _drifted(host: Any) -> bool:
    return host.run(f"grep -qF '{DRIFT}' /etc/slurm/cgroup.conf").rc == 0


@pytest.fixture(scope="module")
def faulted(hosts: dict[str, Any], plan: dict[str, Any], lab: Path) -> dict[str, Any]:
    """Drift, converge with a refused second run and a stopped node, restart it, converge again."""
    if not _enabled(plan):
        pytest.skip("fault test runs on tier2 (GPUCLUSTER_FAULT_TEST=1 elsewhere)")
    head = hosts[plan["cluster"]["head"]]
    nodes = [n for n in hosts_with(plan, "compute") if n != plan["cluster"]["head"]]
    victim = nodes[-1]  # inventory order: the last rolling batch
    container = f"gpucluster-{plan['cluster']['name']}-{victim}"
    for n in nodes:
        hosts[n].check_output(f"echo '{DRIFT}' >> /etc/slurm/cgroup.conf")

    first_log, second_log = lab / "faults-converge.log", lab / "faults-second.log"
    started = time.monotonic()
    with first_log.open("w") as log:
        first = subprocess.Popen(_argv(lab), cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT, text=True)
    second: subprocess.Popen[str] | None = None
    stopped_drifted = None
    try:
        _wait_for("the converge lock", lambda: _lock_holder(head).get("pid") == first.pid, 420, first)
        with second_log.open("w") as log:
            second = subprocess.Popen(_argv(lab), cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT, text=True)
        # the refused run ends within seconds of its plan, while the first is still on the head;
        # then the victim is stopped as soon as the compute play starts (its batch comes last)
        second.wait(timeout=600)
        _wait_for("the compute play", lambda: COMPUTE_PLAY in first_log.read_text(), 600, first)
        stopped_drifted = _drifted(hosts[victim])
        subprocess.run(["podman", "stop", container], check=True, capture_output=True, timeout=120)
        first.wait(timeout=900)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    first_out = first_log.read_text()
    first_seconds = time.monotonic() - started
    lock_after_first = _lock_holder(head)

    subprocess.run(["podman", "start", container], check=True, capture_output=True, timeout=120)
    subprocess.run(
        ["podman", "exec", container, "systemctl", "is-system-running", "--wait"],
        capture_output=True,
        timeout=180,
        check=False,  # "degraded" (exit 1) still means boot finished
    )
    _wait_for(f"ssh on {victim}", lambda: _answers(hosts[victim]), 120)
    heal = subprocess.run(_argv(lab), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900)
    (lab / "faults-heal.log").write_text(heal.stdout + heal.stderr)
    return {
        "head": head,
        "hosts": hosts,
        "nodes": nodes,
        "victim": victim,
        "first": first_out,
        "first_rc": first.returncode,
        "first_pid": first.pid,
        "first_seconds": first_seconds,
        "second": second_log.read_text(),
        "second_rc": second.returncode,
        "stopped_drifted": stopped_drifted,
        "lock_after_first": lock_after_first,
        "heal": heal,
    }


def test_a_second_converge_is_refused_at_the_lock_touching_no_host(faulted: dict[str, Any]) -> None:
    out = faulted["second"]
    assert faulted["second_rc"] != 0, out[-3000:]
    assert "Another converge holds the cluster's lock" in _flat(out), out[-3000:]
    assert f"pid {faulted['first_pid']} since" in _flat(out), out[-3000:]
    recap = _recap(out)
    # the preflight (playbooks/preflight.yml) read every host's facts before the lock; nothing else ran there
    others = {host: stats for host, stats in recap.items() if host != "localhost"}
    assert all(stats["changed"] == 0 and stats["failed"] == 0 for stats in others.values()), recap
    assert all(stats["ok"] <= 2 for stats in others.values()), recap  # the preflight's two tasks, no more
    assert recap["localhost"]["failed"] == 1 and recap["localhost"]["changed"] == 0, recap


def test_the_stopped_node_was_still_drifted(faulted: dict[str, Any]) -> None:
    assert faulted["stopped_drifted"], f"{faulted['victim']} converged before it was stopped"


def test_the_interrupted_run_names_the_lost_host_and_the_rest_converged(faulted: dict[str, Any]) -> None:
    out, victim = faulted["first"], faulted["victim"]
    assert faulted["first_rc"] != 0, out[-3000:]
    recap = _recap(out)
    assert recap[victim]["unreachable"] + recap[victim]["failed"] >= 1, recap
    for host, stats in recap.items():
        if host != victim:
            assert stats["failed"] == 0 and stats["unreachable"] == 0, (host, recap)
    for n in faulted["nodes"]:
        if n != victim:
            assert not _drifted(faulted["hosts"][n]), n


def test_the_lock_left_by_the_interrupted_run_is_taken_over(faulted: dict[str, Any]) -> None:
    """The run ended before its release play: the lock names its (now dead) process; the heal took it over."""
    holder = faulted["lock_after_first"]
    if holder:
        assert holder["pid"] == faulted["first_pid"], holder
        assert "taken over: that process no longer runs" in _flat(faulted["heal"].stdout + faulted["heal"].stderr)
    assert _lock_holder(faulted["head"]) == {}, "the healing run did not release the lock"


def test_the_rerun_heals_the_node_and_changes_nothing_elsewhere(faulted: dict[str, Any]) -> None:
    heal, victim = faulted["heal"], faulted["victim"]
    assert heal.returncode == 0, heal.stdout[-3000:] + heal.stderr[-2000:]
    recap = _recap(heal.stdout)
    assert recap[victim]["changed"] >= 1, recap
    for host, stats in recap.items():
        if host != victim:
            assert stats["changed"] == 0, (host, recap)
    node = faulted["hosts"][victim]
    assert not _drifted(node)
    assert node.service("slurmd").is_running


def test_the_healed_node_is_idle_in_slurm(faulted: dict[str, Any]) -> None:
    victim = faulted["victim"]
    state = (
        faulted["head"]
        .check_output(
            # one line per partition the node is in: the same state on each
            f"for i in $(seq 180); do s=$(sinfo --noheader --Node --nodes={victim} --format=%t | sort -u); "
            '[ "$s" = idle ] && break; sleep 0.5; done; echo "$s"'
        )
        .strip()
    )
    assert state == "idle", (victim, state)
