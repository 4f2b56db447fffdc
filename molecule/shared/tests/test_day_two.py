"""Day two on a converged lab: site.yml with --limit and --tags, as docs/runbook.md runs it (tier4 only).

Four runs of site.yml from the controller on the converged lab, each changing nothing:
``--limit compute01 -e compute_apply_pending=true`` (re-converge one node), ``--limit head01`` (the
head, as for a new tenant), ``--tags slurm`` (the Slurm role and munge on every host) and
``--limit compute01 --tags slurm``. The plan and the converge lock run whatever the limit or the tags
(the first two plays, on localhost:all under a limit, run once on the controller and the head): only the named hosts
appear in the recap, and with --tags only Slurm's tasks run (plus the roles' argument checks, which
Ansible tags always). Runs on tier4 (compute01, head01, a backup controller);
GPUCLUSTER_DAY_TWO_TEST=1 runs it on another tier that has those hosts, =0 skips it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
#: the argument check of every role (ansible-core tags it always)
ARG_CHECK = "Validating arguments against arg spec"


def _enabled(plan: dict[str, Any]) -> bool:
    flag = os.environ.get("GPUCLUSTER_DAY_TWO_TEST", "")
    return flag == "1" or (flag != "0" and plan["cluster"]["name"] == "tier4")


def _site(lab: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """site.yml from the controller on the lab (the tier, the lab overlay, the connection inventory)."""
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(ROOT / "site.yml")]
    for inv in (ROOT / "inventories" / lab.name, ROOT / "lab" / "overlay", lab / "inventory.yml"):
        argv += ["-i", str(inv)]
    # molecule exports ANSIBLE_FORCE_COLOR, which wins over ANSIBLE_NOCOLOR: drop it (plain text)
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"}
    env.update({"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    proc = subprocess.run([*argv, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    (lab / f"day-two-{name}.log").write_text(proc.stdout + proc.stderr)
    return proc


def _recap(out: str) -> dict[str, dict[str, int]]:
    rows = re.findall(r"^(\S+)\s+:\s+(ok=.*)$", out.split("PLAY RECAP")[-1], re.MULTILINE)
    return {host: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", stats)} for host, stats in rows}


def _role_tasks(out: str) -> set[tuple[str, str]]:
    """(role, task) of every role task banner of the run (``TASK [gpucluster.tiers.<role> : <task>]``)."""
    return set(re.findall(r"^TASK \[gpucluster\.tiers\.(\w+) : (.*?)\] \**$", out, re.MULTILINE))


def _munge_tasks() -> set[str]:
    """The names of roles/common/tasks/munge.yml's tasks: the common role's part tagged slurm."""
    return {t["name"] for t in yaml.safe_load((ROOT / "roles" / "common" / "tasks" / "munge.yml").read_text())}


@pytest.fixture(scope="module")
def runs(plan: dict[str, Any], lab: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    if not _enabled(plan):
        pytest.skip("day-two runs (--limit, --tags) run on tier4 (GPUCLUSTER_DAY_TWO_TEST=1 elsewhere)")
    return {
        "node": _site(lab, "node", "--limit", "compute01", "-e", "compute_apply_pending=true"),
        "head": _site(lab, "head", "--limit", plan["cluster"]["head"]),
        "slurm": _site(lab, "slurm", "--tags", "slurm"),
        "node_slurm": _site(lab, "node_slurm", "--limit", "compute01", "--tags", "slurm"),
    }


@pytest.mark.parametrize("run", ["node", "head", "slurm", "node_slurm"])
def test_each_run_converges_and_changes_nothing(runs: dict[str, subprocess.CompletedProcess[str]], run: str) -> None:
    proc = runs[run]
    recap = _recap(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert recap, proc.stdout[-2000:]
    bad = {h: s for h, s in recap.items() if s["changed"] or s["failed"] or s["unreachable"]}
    assert bad == {}, proc.stdout[-4000:]
    # the plan ran (on the controller) and the lock was taken and released (on the head)
    assert re.search(r"plan \S+ sha256 [0-9a-f]{64} \(computed\)", proc.stdout)
    assert proc.stdout.count("TASK [Converge lock on the head") == 2


@pytest.mark.parametrize(("run", "host"), [("node", "compute01"), ("node_slurm", "compute01"), ("head", "")])
def test_a_limited_run_reaches_only_the_named_host(
    runs: dict[str, subprocess.CompletedProcess[str]], plan: dict[str, Any], run: str, host: str
) -> None:
    """The recap names the limited host alone: the plan and the lock ran for it, on the controller and the head."""
    assert set(_recap(runs[run].stdout)) == {host or plan["cluster"]["head"]}


@pytest.mark.parametrize("run", ["slurm", "node_slurm"])
def test_tags_slurm_runs_only_slurm_tasks(runs: dict[str, subprocess.CompletedProcess[str]], run: str) -> None:
    tasks = _role_tasks(runs[run].stdout)
    assert any(role == "slurm" for role, _ in tasks)
    munge = _munge_tasks()
    others = {
        (role, task)
        for role, task in tasks
        if role != "slurm" and not task.startswith(ARG_CHECK) and not (role == "common" and task in munge)
    }
    assert others == set()


def test_a_full_tags_run_reaches_every_slurm_host(
    runs: dict[str, subprocess.CompletedProcess[str]], plan: dict[str, Any]
) -> None:
    """--tags slurm without a limit: every host that runs Slurm or munge ran its part."""
    slurm_hosts = {name for name, host in plan["hosts"].items() if {"compute", "head"} & set(host["roles"])}
    assert slurm_hosts <= set(_recap(runs["slurm"].stdout))
