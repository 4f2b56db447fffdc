"""The plan play end to end: make plan's outputs, and a bad inventory stopping site.yml
before any host is contacted."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, TIERS

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import nccl_conf_text
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}

#: every inventory make plan is run for: the tiers, the Kubernetes variant and the examples
INVENTORIES = (
    *TIERS,
    "tier4-k8s",
    *sorted(f"examples/{p.name}" for p in (ROOT / "inventories" / "examples").iterdir() if (p / "hosts.yml").is_file()),
)
#: the sha256 (its first 16 hex digits) of every file make plan renders for every host of every inventory above
GOLDEN = Path(__file__).parent / "golden" / "host-files.txt"
UPDATE_GOLDEN = os.environ.get("GPUCLUSTER_UPDATE_GOLDEN") == "1"  # make golden


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PLAYBOOK, *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)


# planned (tests/unit/conftest.py): make plan of one inventory, run once for the whole session and only
# read here and in the other playbook tests


def _digests(hosts: Path) -> dict[str, str]:
    """``<host> <path>`` -> sha256 (16 hex digits) of every file under a plan's hosts/ folder."""
    return {
        f"{p.relative_to(hosts).parts[0]} /{Path(*p.relative_to(hosts).parts[1:])}": hashlib.sha256(
            p.read_bytes()
        ).hexdigest()[:16]
        for p in sorted(hosts.rglob("*"))
        if p.is_file()
    }


def _golden() -> dict[str, dict[str, str]]:
    """The golden list: one line ``<inventory> <host> <path> <sha256, 16 hex digits>`` per file."""
    out: dict[str, dict[str, str]] = {}
    for line in GOLDEN.read_text().splitlines() if GOLDEN.is_file() else []:
        inventory, host, path, digest = line.split(" ")
        out.setdefault(inventory, {})[f"{host} {path}"] = digest
    return out


@pytest.mark.parametrize("inventory", INVENTORIES)
def test_make_plan_writes_the_three_outputs(inventory: str, planned: Callable[[str], tuple[Path, str]]) -> None:
    out, _ = planned(inventory)
    plan = json.loads((out / "plan.json").read_text())
    report = (out / "report.md").read_text()
    assert report.startswith(f"# Cluster plan: {out.name}")
    for section in ("## GPU clocks and power", "## Power", "## Storage sizing", "## Acceptance floors"):
        assert section in report
    for host, files in files_by_host(plan).items():
        for f in files:
            assert (out / "hosts" / host / f["dest"].lstrip("/")).is_file(), (host, f["dest"])
    if plan["nccl"]["enabled"] and inventory in TIERS:
        nccl = (out / "hosts" / "compute01" / "etc" / "nccl.conf").read_text()
        assert nccl == nccl_conf_text(plan["nccl"]["conf"])  # rendered from the plan's keys
        assert "NCCL_IB_HCA==mlx5_0:1" in nccl


@pytest.mark.parametrize("inventory", INVENTORIES)
def test_every_host_file_is_byte_identical_to_the_golden_list(
    inventory: str, planned: Callable[[str], tuple[Path, str]]
) -> None:
    """Every file make plan renders for every host, compared by sha256 with tests/unit/repo/golden/
    host-files.txt: a refactoring of the engine, the plan or the templates changes no byte a host
    gets. A change meant to change files: ``make golden`` rewrites the list, and its diff in the
    commit names each file changed."""
    digests = _digests(planned(inventory)[0] / "hosts")
    golden = _golden()
    if UPDATE_GOLDEN:
        golden[inventory] = digests
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(
            "".join(f"{inv} {key} {golden[inv][key]}\n" for inv in sorted(golden) for key in sorted(golden[inv]))
        )
        return
    want = golden.get(inventory, {})
    assert want, f"{inventory} has no entry in {GOLDEN.name}: run make golden"
    changed = sorted(k for k in digests.keys() & want.keys() if digests[k] != want[k])
    assert (changed, sorted(digests.keys() - want.keys()), sorted(want.keys() - digests.keys())) == ([], [], []), (
        f"{inventory}: (changed, new, gone) host files against {GOLDEN.name}; if the change is meant, "
        "run make golden and commit the list"
    )


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


def test_plan_files_are_byte_identical_to_the_template_module(
    tmp_path: Path, planned: Callable[[str], tuple[Path, str]]
) -> None:
    """render_files (make plan) and ansible.builtin.template (the roles) give the same bytes."""
    out, direct = planned("tier3")[0], tmp_path / "direct"
    hosts = ("compute01", "head01")
    run = _run(
        "-i", "inventories/tier3", "tests/playbooks/render_with_template_module.yml",
        "-e", f"render_host={':'.join(hosts)}", "-e", f"render_root={direct}",
    )  # fmt: skip  # both hosts in one run, each into direct/<host>/
    assert run.returncode == 0, run.stdout[-3000:]
    for host in hosts:
        files = sorted(p.relative_to(direct / host) for p in (direct / host).rglob("*") if p.is_file())
        assert files, host
        for rel in files:
            assert (out / "hosts" / host / rel).read_bytes() == (direct / host / rel).read_bytes(), rel


def test_plan_sha256_and_a_precomputed_plan(planned: Callable[[str], tuple[Path, str]]) -> None:
    """make plan writes plan.sha256; a run loading plan.json records the same sha256, accepts it as
    expected, refuses another, and every host reads only its own slice."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import plan_sha256

    out, stdout = planned("tier2")
    plan_json = out / "plan.json"
    digest = (out / "plan.sha256").read_text().strip()
    assert digest == plan_sha256(json.loads(plan_json.read_text()))
    assert f"sha256 {digest} (computed)" in stdout

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


def test_a_plan_of_another_inventory_is_refused(planned: Callable[[str], tuple[Path, str]]) -> None:
    run = _run(
        "-i", "inventories/tier3", "tests/playbooks/plan_only.yml",
        "-e", f"gpucluster_plan_file={planned('tier1')[0] / 'plan.json'}",
    )  # fmt: skip
    assert run.returncode != 0
    assert "is not a plan (schema 2) of this inventory's hosts" in run.stdout


def test_bad_rollout_stops_before_any_host(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "tier1", inv)
    (inv / "group_vars" / "all" / "rollout.yml").write_text("gpucluster_rollout:\n  batch_size: 0\n")
    run = _run("-i", str(inv), "site.yml", "-e", "ansible_host=192.0.2.1")
    assert run.returncode != 0
    assert "inventory field 'gpucluster_rollout.batch_size': value 0 is not allowed" in run.stdout
    assert "compute01" not in run.stdout.split("PLAY RECAP")[-1]


def test_a_loaded_plan_renders_the_same_files(tmp_path: Path, planned: Callable[[str], tuple[Path, str]]) -> None:
    """Every slice of a sliced run loads plan.json (written with sorted keys): each host's files
    rendered from the loaded plan are byte-identical to those of the computed plan, so a sliced
    re-run changes nothing a one-process run wrote (a template iterating a dict in the plan's
    order once changed nccl-allreduce.sbatch on the head)."""
    computed, loaded = planned("tier4")[0], tmp_path / "loaded"
    plan_json = computed / "plan.json"
    again = _run(
        "-i", "inventories/tier4", "playbooks/plan.yml",
        "-e", f"gpucluster_plan_root={loaded}", "-e", f"gpucluster_plan_file={plan_json}",
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:]
    assert "loaded from" in again.stdout
    first = {p.relative_to(computed / "hosts"): p for p in (computed / "hosts").rglob("*") if p.is_file()}
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
