"""site.yml with --limit and --tags before any host is reached, the missing default inventory, a plan
folder that refuses another inventory's plan, and a bad inventory's error printed without noise.

The hosts are unreachable (ansible_host from TEST-NET-1): a run gets as far as the plan (on the
controller) and the converge lock (delegated to the head, where it stops unreachable), which is the
point: the plan and the lock run whatever the limit or the tags."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_TIMEOUT": "3"}
NOWHERE = ("-e", "ansible_host=192.0.2.1")


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PLAYBOOK, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "selection",
    [("--limit", "compute01"), ("--tags", "slurm"), ("--limit", "compute01", "--tags", "slurm")],
    ids=["limit", "tags", "both"],
)
def test_the_plan_and_the_lock_run_whatever_the_limit_or_tags(selection: tuple[str, ...]) -> None:
    run = _run("-i", "inventories/tier3", str(ROOT / "site.yml"), *selection, *NOWHERE)
    out = run.stdout
    assert re.search(r"plan tier3 sha256 [0-9a-f]{64} \(computed\)", out), out[-3000:]
    assert "has no gpucluster_plan" not in out + run.stderr
    # the lock is taken on the head (unreachable here: the run stops there, before any host play)
    lock = out.split("TASK [Converge lock on the head", 1)[1].split("TASK [", 1)[0]
    assert "-> head01]: UNREACHABLE!" in lock, lock
    assert "Could not match supplied host pattern" not in out + run.stderr
    recap = out.split("PLAY RECAP")[-1]
    if "--limit" in selection:
        assert "compute01" in recap and "localhost" not in recap and "head01" not in recap, recap


def test_a_run_without_an_inventory_stops_before_any_play(tmp_path: Path) -> None:
    """ansible.cfg names no default inventory: a forgotten -i plans and reaches nothing."""
    run = _run(str(ROOT / "site.yml"))
    assert run.returncode != 0
    assert "No inventory was parsed" in run.stdout + run.stderr
    assert "PLAY [" not in run.stdout


def test_the_plan_folder_refuses_another_inventorys_plan(tmp_path: Path) -> None:
    root = tmp_path / "plan"
    first = _run("-i", "inventories/tier1", "playbooks/plan.yml", "-e", f"gpucluster_plan_root={root}")
    assert first.returncode == 0, first.stdout[-3000:]
    assert (root / "tier1" / ".inventory").read_text().strip() == str(ROOT / "inventories" / "tier1")
    again = _run("-i", "tier1", "playbooks/plan.yml", "-e", f"gpucluster_plan_root={root}")  # the same, by name
    assert again.returncode == 0, again.stdout[-3000:]

    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "inventories" / "tier1", copy)
    before = (root / "tier1" / "plan.json").read_bytes()
    other = _run("-i", str(copy), "playbooks/plan.yml", "-e", f"gpucluster_plan_root={root}")
    assert other.returncode != 0
    assert (
        f"{root / 'tier1'} holds the plan of inventory {ROOT / 'inventories' / 'tier1'}, and inventory {copy} "
        "names its cluster tier1 too"
    ) in other.stdout
    assert (root / "tier1" / "plan.json").read_bytes() == before


def test_a_bad_value_is_printed_once_without_the_censored_line(tmp_path: Path) -> None:
    """The engine's error reaches the output as ansible-core shows any failed task (its error summary and
    the task's result), with no no_log "censored" line and no second try of the plan."""
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "tier3", inv)
    node = inv / "group_vars" / "all" / "node.yml"
    node.write_text(node.read_text().replace("gpu_model: h100_sxm", "gpu_model: h900"))
    run = _run("-i", str(inv), str(ROOT / "site.yml"), *NOWHERE)
    assert run.returncode != 0
    error = "inventory field 'gpucluster_node.gpu_model': value 'h900' is not allowed"
    lines = [line for line in run.stdout.splitlines() if error in line]
    assert [line.split(":", 1)[0] for line in lines] == ["[ERROR]", "fatal"], lines
    assert "the output has been hidden" not in run.stdout and "Show why there is no plan" not in run.stdout
    assert len(run.stdout.split("TASK [Compute the cluster plan")[1].split("PLAY RECAP")[0].splitlines()) <= 12
