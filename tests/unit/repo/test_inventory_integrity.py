"""Issue 30, inventory integrity, end to end with Ansible: nothing of the inventory is lost in silence
and no inventory variable moves the plan.

- ansible.cfg: a duplicate YAML key and an inventory source no plugin parses are errors;
- playbooks/tasks/plan.yml (the cluster_plan action's inventory check): a gpucluster_* variable on a host
  or another group, a misspelt site variable, gpucluster_plan_root from the inventory and a shared
  ansible_host stop the plan before it is computed, nothing is written; ``-e gpucluster_plan_root`` still
  works (test_plan_playbook).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

BIN = Path(sys.executable).parent
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / tool), *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)


def _copy(tmp_path: Path, tier: str = "tier2") -> Path:
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / tier, inv)
    return inv


def test_a_duplicate_yaml_key_is_an_error(tmp_path: Path) -> None:
    inv = _copy(tmp_path)
    (inv / "group_vars" / "all" / "twice.yml").write_text(
        "gpucluster_rollout: {batch_size: 1}\ngpucluster_rollout: {}\n"
    )
    run = _run("ansible-inventory", "-i", str(inv), "--list")
    assert run.returncode != 0
    assert "duplicate" in (run.stdout + run.stderr).lower()


@pytest.mark.parametrize("name", ["yes", "null", "010"])
def test_a_host_name_yaml_coerces_stops_the_inventory(tmp_path: Path, name: str) -> None:
    inv = _copy(tmp_path)
    hosts = inv / "hosts.yml"
    hosts.write_text(hosts.read_text().replace("compute02:", f"{name}:"))
    run = _run("ansible-inventory", "-i", str(inv), "--list")
    assert run.returncode != 0, run.stdout[-2000:]
    assert "must be a string" in run.stdout + run.stderr  # Ansible's yaml plugin: "Enclose ... in quotation marks"


def test_the_lab_overlay_still_parses() -> None:
    run = _run("ansible-inventory", "-i", "inventories/tier2", "-i", "lab/overlay", "--list")
    assert run.returncode == 0, run.stderr[-2000:]
    assert '"gpucluster_lab"' in run.stdout


CASES = {
    "host-vars": ("host_vars/compute01.yml", "gpucluster_gpu_policy: {clock_policy: fixed}\n", "gpucluster_gpu_policy"),
    "other-group": ("group_vars/compute/x.yml", "gpucluster_tenants: []\n", "gpucluster_tenants"),
    "near-miss": ("group_vars/all/typo.yml", "gpucluser_gpu_policy: {clock_policy: fixed}\n", "gpucluser_gpu_policy"),
    "plan-root": ("group_vars/all/out.yml", "gpucluster_plan_root: {out}\n", "gpucluster_plan_root"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_inventory_variables_the_plan_would_ignore_stop_it(tmp_path: Path, case: str) -> None:
    inv = _copy(tmp_path)
    rel, text, field = CASES[case]
    out = tmp_path / "escaped"
    (inv / rel).parent.mkdir(parents=True, exist_ok=True)
    (inv / rel).write_text(text.replace("{out}", str(out)))
    run = _run("ansible-playbook", "-i", str(inv), "playbooks/plan.yml")
    assert run.returncode != 0
    assert f"inventory field '{field}'" in run.stdout, run.stdout[-3000:]
    assert not out.exists()
    recap = run.stdout.split("PLAY RECAP")[-1]
    assert "compute01" not in recap


def test_two_hosts_with_one_ansible_host_stop_the_plan(tmp_path: Path) -> None:
    inv = _copy(tmp_path)
    hosts = inv / "hosts.yml"
    text = hosts.read_text()
    for name in ("compute01", "compute02"):
        text = text.replace(f"{name}:\n", f"{name}: {{ansible_host: 192.0.2.7}}\n")
    hosts.write_text(text)
    run = _run("ansible-playbook", "-i", str(inv), "playbooks/plan.yml")
    assert run.returncode != 0
    assert "ansible_host': value '192.0.2.7' is not allowed" in run.stdout, run.stdout[-3000:]
