"""The plan play end to end: make plan's outputs, and a bad inventory stopping site.yml
before any host is contacted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PLAYBOOK, *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("tier", ["tier1", "tier2", "tier3", "tier4"])
def test_make_plan_writes_the_three_outputs(tier: str, tmp_path: Path) -> None:
    run = _run("-i", f"inventories/{tier}", "playbooks/plan.yml", "-e", f"gpucluster_plan_root={tmp_path}")
    assert run.returncode == 0, run.stdout[-3000:]
    out = tmp_path / tier
    plan = json.loads((out / "plan.json").read_text())
    report = (out / "report.md").read_text()
    assert report.startswith(f"# Cluster plan: {tier}")
    for section in ("## GPU clocks and power", "## Power", "## Storage sizing", "## Acceptance floors"):
        assert section in report
    for host, files in plan["files"].items():
        for f in files:
            assert (out / "hosts" / host / f["dest"].lstrip("/")).is_file(), (host, f["dest"])
    if plan["nccl"]["enabled"]:
        nccl = (out / "hosts" / "compute01" / "etc" / "nccl.conf").read_text()
        assert nccl == plan["nccl"]["conf_text"]
        assert "NCCL_IB_HCA==mlx5_0:1" in nccl


def test_bad_inventory_stops_before_any_host(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "tier3", inv)
    node = inv / "group_vars" / "all" / "node.yml"
    node.write_text(node.read_text().replace("gpu_model: h100_sxm", "gpu_model: h900"))
    run = _run("-i", str(inv), "site.yml", "-e", "ansible_host=192.0.2.1")
    assert run.returncode != 0
    assert "inventory field 'gpucluster_node.gpu_model': value 'h900' is not allowed" in run.stdout
    recap = run.stdout.split("PLAY RECAP")[-1]
    assert "localhost" in recap and "compute01" not in recap and "head01" not in recap


def test_plan_files_are_byte_identical_to_the_template_module(tmp_path: Path) -> None:
    """render_files (make plan) and ansible.builtin.template (the roles) give the same bytes."""
    planned = tmp_path / "plan"
    assert (
        _run("-i", "inventories/tier3", "playbooks/plan.yml", "-e", f"gpucluster_plan_root={planned}").returncode == 0
    )
    for host in ("compute01", "head01"):
        direct = tmp_path / f"direct-{host}"
        run = _run(
            "-i", "inventories/tier3", "tests/playbooks/render_with_template_module.yml",
            "-e", f"render_host={host}", "-e", f"render_root={direct}",
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:]
        files = sorted(p.relative_to(direct) for p in direct.rglob("*") if p.is_file())
        assert files, host
        for rel in files:
            assert (planned / "tier3" / "hosts" / host / rel).read_bytes() == (direct / rel).read_bytes(), rel
