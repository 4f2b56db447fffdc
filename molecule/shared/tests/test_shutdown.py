"""The UPS shutdown (playbooks/shutdown.yml) in its default dry run, from the controller.

The playbook runs against the lab (inventories/<tier>, lab/overlay, the lab's inventory) without
any switch: a dry run. Its step record (-e gpucluster_shutdown_record) must list the plan's steps
(plan.ups.shutdown.steps) in order, each on the hosts it would touch, all marked dry run; the recap
shows no change on any cluster host; afterwards every compute node is still in service in Slurm
(not drained) and slurmd, slurmctld and every host still answer. A real run without the
confirmation (the cluster's name) stops before any host. Runs on every Slurm tier (~30 s).
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


def _run(lab: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(ROOT / "playbooks" / "shutdown.yml")]
    for inv in (ROOT / "inventories" / lab.name, ROOT / "lab" / "overlay", lab / "inventory.yml"):
        argv += ["-i", str(inv)]
    # molecule exports ANSIBLE_FORCE_COLOR, which wins over ANSIBLE_NOCOLOR: drop it (plain text)
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"}
    env.update({"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    return subprocess.run([*argv, *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


def _recap(out: str) -> dict[str, dict[str, int]]:
    rows = re.findall(r"^(\S+)\s+:\s+(ok=.*)$", out, re.MULTILINE)
    return {host: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", stats)} for host, stats in rows}


@pytest.fixture(scope="module")
def dry_run(lab: Path, plan: dict[str, Any]) -> dict[str, Any]:
    if plan["cluster"]["scheduler"] != "slurm":
        pytest.skip("the UPS shutdown's steps 1-5 are Slurm's: Slurm clusters only")
    record = lab / "shutdown-steps.jsonl"
    record.unlink(missing_ok=True)
    run = _run(lab, "-e", f"gpucluster_shutdown_record={record}")
    (lab / "shutdown-dry-run.log").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    steps = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]
    return {"out": run.stdout, "steps": steps}


def _expected_hosts(plan: dict[str, Any]) -> dict[str, list[str]]:
    head = plan["cluster"]["head"]
    compute, storage = hosts_with(plan, "compute"), hosts_with(plan, "storage")
    return {
        "drain": [head],
        "checkpoint_signal": [head],
        "wait_for_jobs": [head],
        "cancel_remaining": [head],
        "stop_slurmd": compute,
        "power_off_compute": [h for h in compute if h != head and h not in storage],
        "power_off_storage": [h for h in storage if h != head],
        "power_off_head": [head],
    }


def test_dry_run_records_the_planned_steps_in_order(dry_run: dict[str, Any], plan: dict[str, Any]) -> None:
    planned = plan["ups"]["shutdown"]["steps"]
    expected = _expected_hosts(plan)
    # a step whose hosts are none (tier1's one host) is skipped by Ansible: not recorded
    wanted = [(i, s) for i, s in enumerate(planned, 1) if expected[s["step"]]]
    assert [(r["index"], r["step"]) for r in dry_run["steps"]] == [(i, s["step"]) for i, s in wanted]
    for record, (_, step) in zip(dry_run["steps"], wanted, strict=True):
        assert record["dry_run"] is True, record
        assert record["does"] == step["does"], record
        assert sorted(record["hosts"]) == sorted(expected[step["step"]]), record
    assert f'state=drain reason="{plan["ups"]["shutdown"]["reason"]}"' in dry_run["steps"][0]["does"]
    assert dry_run["steps"][-1]["step"] == "power_off_head"
    assert dry_run["out"].count("[dry run: not done]") == len(wanted)


def test_dry_run_changes_nothing(dry_run: dict[str, Any], hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    recap = _recap(dry_run["out"])
    for name in plan["hosts"]:
        if name in recap:
            assert recap[name]["changed"] == 0 and recap[name]["failed"] == 0, (name, recap[name])
            assert recap[name]["unreachable"] == 0, (name, recap[name])
    head = hosts[plan["cluster"]["head"]]
    assert head.service("slurmctld").is_running
    states = head.check_output("sinfo --noheader --Node --format='%N %T'")
    rows = {line.split()[0]: line.split()[1] for line in states.splitlines()}
    assert sorted(rows) == sorted(hosts_with(plan, "compute"))
    assert not [n for n, s in rows.items() if "drain" in s or s.startswith("down")], rows
    reasons = head.check_output("sinfo --noheader --list-reasons --format='%N %E'")
    assert plan["ups"]["shutdown"]["reason"] not in reasons
    for name in hosts_with(plan, "compute"):
        assert hosts[name].service("slurmd").is_running, name
    for name, host in hosts.items():
        assert host.run("true").rc == 0, name  # powered on and answering


def test_a_real_shutdown_needs_the_confirmation(lab: Path, plan: dict[str, Any]) -> None:
    if plan["cluster"]["scheduler"] != "slurm":
        pytest.skip("Slurm clusters only")
    run = _run(lab, "-e", "gpucluster_shutdown_dry_run=false", "-e", "gpucluster_shutdown_confirm=not-this-cluster")
    assert run.returncode != 0
    assert f"gpucluster_shutdown_confirm={plan['cluster']['name']}" in re.sub(r"\s+", " ", run.stdout)
    recap = _recap(run.stdout)
    assert set(recap) == {"localhost"}, recap  # stopped before any cluster host
