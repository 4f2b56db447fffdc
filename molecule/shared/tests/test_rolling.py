"""Rolling converge: a slurmd restart never happens under a running job (tier3 only).

A job runs on the first compute node; every compute node's cgroup.conf drifts (a comment
line), so the next converge rewrites it on all of them and each needs a slurmd restart. The
converge (site.yml limited to the compute nodes, in two batches, the busy node's first)
must drain each node, wait for the job, restart slurmd and resume the node; a second
converge without drift (one batch) must restart nothing. Runs on tier3 (two converges of
the compute nodes; the job sleeps 60 s); GPUCLUSTER_ROLLING_TEST=1 runs it on another
tier, =0 skips it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import hosts_with

ROOT = Path(__file__).resolve().parents[3]
DRIFT = "# lab drift (test_rolling): the next converge rewrites this file"
REASON_PREFIX = "gpucluster-converge:"  # plugins/plugin_utils/slurm/rolling.py CONVERGE_PREFIX


def _enabled(plan: dict[str, Any]) -> bool:
    flag = os.environ.get("GPUCLUSTER_ROLLING_TEST", "")
    return flag == "1" or (flag != "0" and plan["cluster"]["name"] == "tier3")


def _slurmd_started(host: Any) -> int:
    """slurmd's last start, seconds since the epoch (systemd 252: --timestamp=unix prints @<s>)."""
    out = host.check_output("systemctl show slurmd.service --timestamp=unix -P ExecMainStartTimestamp").strip()
    return int(out.lstrip("@"))


def _converge(lab: Path, log: Path, batch_size: str) -> subprocess.CompletedProcess[str]:
    """site.yml on the compute nodes (and localhost, where the plan is computed), in batches."""
    inventories = [ROOT / "inventories" / lab.name, ROOT / "lab" / "overlay", lab / "inventory.yml"]
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(ROOT / "site.yml")]
    for inv in inventories:
        argv += ["-i", str(inv)]
    argv += ["--limit", "compute:localhost", "-e", json.dumps({"gpucluster_rollout": {"batch_size": batch_size}})]
    # molecule exports ANSIBLE_FORCE_COLOR, which wins over ANSIBLE_NOCOLOR: drop it (plain text)
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"}
    env.update({"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    log.write_text(proc.stdout + proc.stderr)
    return proc


def _recap(out: str) -> dict[str, dict[str, int]]:
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # colour codes, should any remain
    rows = re.findall(r"^(\S+)\s+:\s+(ok=.*)$", out, re.MULTILINE)
    return {host: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", stats)} for host, stats in rows}


def _task_results(out: str, task: str) -> str:
    """The result lines of every run of the task whose name contains ``task``."""
    blocks = re.split(r"^TASK \[", out, flags=re.MULTILINE)
    return "\n".join(b for b in blocks if task in b.split("]", 1)[0])


@pytest.fixture(scope="module")
def rolled(hosts: dict[str, Any], plan: dict[str, Any], lab: Path) -> dict[str, Any]:
    """Job on the first compute node, drift everywhere, converge, converge again: what was seen."""
    if not _enabled(plan):
        pytest.skip("rolling converge test runs on tier3 (GPUCLUSTER_ROLLING_TEST=1 elsewhere)")
    head = hosts[plan["cluster"]["head"]]
    nodes = hosts_with(plan, "compute")
    busy = nodes[0]
    job = head.check_output(
        f"sbatch --parsable --job-name=lab-rolling --nodelist={busy} --time=5 --wrap 'sleep 60'"
    ).strip()
    state = head.check_output(
        f"for i in $(seq 30); do s=$(squeue --noheader --jobs={job} --format=%T); "
        f'[ "$s" = RUNNING ] && break; sleep 1; done; echo "$s"'
    ).strip()
    assert state == "RUNNING", f"job {job} did not start on {busy}: {state}"
    before = {n: _slurmd_started(hosts[n]) for n in nodes}
    for n in nodes:
        hosts[n].check_output(f"echo '{DRIFT}' >> /etc/slurm/cgroup.conf")

    # two batches (the busy node's first) keep the roll visible; one batch for the idle check
    first = _converge(lab, lab / "rolling-converge.log", "50%")
    after = {n: _slurmd_started(hosts[n]) for n in nodes}
    second = _converge(lab, lab / "rolling-converge-idle.log", "100%")
    again = {n: _slurmd_started(hosts[n]) for n in nodes}
    acct = head.check_output(
        f"for i in $(seq 30); do out=$(sacct --noheader --parsable2 --allocations --jobs={job} "
        '--format=State,End); case $out in COMPLETED*) break;; esac; sleep 1; done; echo "$out"'
    ).strip()
    job_state, end = acct.split("|")
    end_s = int(head.check_output(f"date -d '{end}' +%s").strip()) if end not in ("", "Unknown") else None
    return {
        "nodes": nodes,
        "busy": busy,
        "job": job,
        "job_state": job_state,
        "job_end": end_s,
        "before": before,
        "after": after,
        "again": again,
        "first": first,
        "second": second,
        "head": head,
    }


def test_the_converge_with_drift_succeeds_and_drains_every_node(rolled: dict[str, Any]) -> None:
    first = rolled["first"]
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    drained = _task_results(first.stdout, "Drain the node")
    for node in rolled["nodes"]:
        assert re.search(rf"changed: \[{node} -> ", drained), (node, drained[-1500:])


def test_the_job_completed_before_its_node_restarted_slurmd(rolled: dict[str, Any]) -> None:
    assert rolled["job_state"] == "COMPLETED", rolled["job_state"]
    busy = rolled["busy"]
    assert rolled["job_end"] is not None
    # sacct's End has a one-second resolution, as has the restart's timestamp
    assert rolled["after"][busy] >= rolled["job_end"], (rolled["after"][busy], rolled["job_end"])


def test_every_compute_node_restarted_slurmd(rolled: dict[str, Any]) -> None:
    for node in rolled["nodes"]:
        assert rolled["after"][node] > rolled["before"][node], node


def test_the_nodes_are_resumed_without_a_converge_reason(rolled: dict[str, Any]) -> None:
    out = rolled["head"].check_output(
        "for i in $(seq 120); do out=$(sinfo --noheader --Node --format='%N|%t|%E'); "
        'case $out in *"*"*|*drain*|*drng*) sleep 0.5;; *) break;; esac; done; echo "$out"'
    )
    rows = {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines()}
    for node in rolled["nodes"]:
        state, reason = rows[node]
        assert state == "idle", (node, state, reason)
        assert not reason.startswith(REASON_PREFIX), (node, reason)


def test_a_converge_without_drift_restarts_nothing(rolled: dict[str, Any]) -> None:
    second = rolled["second"]
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-2000:]
    recap = _recap(second.stdout)
    assert all(recap[n]["changed"] == 0 for n in rolled["nodes"]), recap
    assert rolled["again"] == rolled["after"]
