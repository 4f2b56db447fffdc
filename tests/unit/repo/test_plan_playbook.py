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
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import nccl_conf_text

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
        assert nccl == nccl_conf_text(plan["nccl"]["conf"])  # rendered from the plan's keys
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


def test_make_plan_shows_the_engine_error(tmp_path: Path) -> None:
    """The plan task runs under no_log; its rescue makes the plan again, shown, so make plan prints the
    field, the bad value and what is allowed (not a hidden or captured error)."""
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "tier2", inv)
    workload = inv / "group_vars" / "all" / "workload.yml"
    workload.write_text(workload.read_text().replace("clock_policy: max_performance", "clock_policy: turbo"))
    run = _run("-i", str(inv), "playbooks/plan.yml", "-e", f"gpucluster_plan_root={tmp_path}")
    assert run.returncode != 0
    assert (
        "inventory field 'gpucluster_gpu_policy.clock_policy': value 'turbo' is not allowed; "
        "allowed: one of max_performance, fixed, power_capped"
    ) in run.stdout
    assert "CapturedExceptionMarker" not in run.stdout


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


def test_plan_sha256_and_a_precomputed_plan(tmp_path: Path) -> None:
    """make plan writes plan.sha256; a run loading plan.json records the same sha256, accepts it as
    expected, refuses another, and every host reads only its own slice."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import plan_sha256

    run = _run("-i", "inventories/tier2", "playbooks/plan.yml", "-e", f"gpucluster_plan_root={tmp_path}")
    assert run.returncode == 0, run.stdout[-3000:]
    plan_json = tmp_path / "tier2" / "plan.json"
    digest = (tmp_path / "tier2" / "plan.sha256").read_text().strip()
    assert digest == plan_sha256(json.loads(plan_json.read_text()))
    assert f"sha256 {digest} (computed)" in run.stdout

    loaded = _run(
        "-i", "inventories/tier2", "tests/playbooks/plan_only.yml",
        "-e", f"gpucluster_plan_file={plan_json}", "-e", f"gpucluster_plan_sha256_expected={digest}",
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stdout[-3000:]
    assert f"SHA256={digest}" in loaded.stdout and f"loaded from {plan_json}" in loaded.stdout
    assert "BATCH=25%" in loaded.stdout
    assert "VIEW compute01 hosts=compute01 files=compute01" in loaded.stdout

    wrong = _run(
        "-i", "inventories/tier2", "tests/playbooks/plan_only.yml",
        "-e", f"gpucluster_plan_file={plan_json}", "-e", "gpucluster_plan_sha256_expected=" + "0" * 64,
    )  # fmt: skip
    assert wrong.returncode != 0
    assert f"The plan's sha256 is {digest}, not the expected {'0' * 64}" in wrong.stdout
    assert "VIEW" not in wrong.stdout


def test_a_plan_of_another_inventory_is_refused(tmp_path: Path) -> None:
    assert (
        _run("-i", "inventories/tier1", "playbooks/plan.yml", "-e", f"gpucluster_plan_root={tmp_path}").returncode == 0
    )
    run = _run(
        "-i", "inventories/tier3", "tests/playbooks/plan_only.yml",
        "-e", f"gpucluster_plan_file={tmp_path / 'tier1' / 'plan.json'}",
    )  # fmt: skip
    assert run.returncode != 0
    assert "is not a plan (schema 1) of this inventory's hosts" in run.stdout


def test_bad_rollout_stops_before_any_host(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "tier1", inv)
    (inv / "group_vars" / "all" / "rollout.yml").write_text("gpucluster_rollout:\n  batch_size: 0\n")
    run = _run("-i", str(inv), "site.yml", "-e", "ansible_host=192.0.2.1")
    assert run.returncode != 0
    assert "inventory field 'gpucluster_rollout.batch_size': value 0 is not allowed" in run.stdout
    assert "compute01" not in run.stdout.split("PLAY RECAP")[-1]


def test_a_loaded_plan_renders_the_same_files(tmp_path: Path) -> None:
    """Every slice of a sliced run loads plan.json (written with sorted keys): each host's files
    rendered from the loaded plan are byte-identical to those of the computed plan, so a sliced
    re-run changes nothing a one-process run wrote (a template iterating a dict in the plan's
    order once changed nccl-allreduce.sbatch on the head)."""
    computed, loaded = tmp_path / "computed", tmp_path / "loaded"
    run = _run("-i", "inventories/tier4", "playbooks/plan.yml", "-e", f"gpucluster_plan_root={computed}")
    assert run.returncode == 0, run.stdout[-3000:]
    plan_json = computed / "tier4" / "plan.json"
    again = _run(
        "-i", "inventories/tier4", "playbooks/plan.yml",
        "-e", f"gpucluster_plan_root={loaded}", "-e", f"gpucluster_plan_file={plan_json}",
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:]
    assert "loaded from" in again.stdout
    first = {
        p.relative_to(computed / "tier4" / "hosts"): p for p in (computed / "tier4" / "hosts").rglob("*") if p.is_file()
    }
    second = {
        p.relative_to(loaded / "tier4" / "hosts"): p for p in (loaded / "tier4" / "hosts").rglob("*") if p.is_file()
    }
    assert first.keys() == second.keys() and len(first) > 100
    assert [str(k) for k in first if first[k].read_bytes() != second[k].read_bytes()] == []


def test_an_inventory_without_hosts_names_the_path_and_the_tiers(tmp_path: Path) -> None:
    """A hosts.yml that yields no hosts stops the plan naming the inventory given and the known tiers,
    not later on an undefined gpucluster_cluster."""
    inv = tmp_path / "empty"
    inv.mkdir()
    (inv / "hosts.yml").write_text("all: {}\n")
    run = _run("-i", str(inv), "playbooks/plan.yml", "-e", f"gpucluster_plan_root={tmp_path}")
    assert run.returncode != 0
    assert f"inventory {inv} yields no hosts" in run.stdout
    assert "known tiers: tier1, tier2, tier3, tier4, tier4-k8s" in run.stdout
    assert "gpucluster_cluster" not in run.stdout.split("yields no hosts")[-1]
