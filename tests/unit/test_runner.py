"""CI through ansible-runner: the private data dir, the Python API example and the make
target's syntax. The plan only (tier1, no host is contacted), so it stays fast."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import ROOT


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tier1_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    base = tmp_path_factory.mktemp("runner")
    run_plan = _load("run_plan")
    result = run_plan.run_plan(ROOT / "inventories" / "tier1", base / "pdd", plan_root=base / "plan", ident="plan-test")
    return result, base / "pdd", base / "plan"


def test_plan_through_ansible_runner_succeeds(tier1_run: tuple[dict, Path, Path]) -> None:
    result, _, _ = tier1_run
    assert result["status"] == "successful"
    assert result["rc"] == 0
    assert not result["stats"]["failures"] and not result["stats"]["dark"]
    assert result["stats"]["ok"]["localhost"] > 0


def test_the_plan_task_is_a_job_event(tier1_run: tuple[dict, Path, Path]) -> None:
    result, pdd, _ = tier1_run
    run_plan = sys.modules["run_plan"]
    ok = [t for t in result["tasks"] if t["event"] == "runner_on_ok"]
    assert {"task": run_plan.PLAN_TASK, "host": "localhost"}.items() <= next(
        t for t in ok if t["task"] == run_plan.PLAN_TASK
    ).items()
    # the same event is in the artifacts, as a file per event
    events = [json.loads(p.read_text()) for p in (pdd / "artifacts" / "plan-test" / "job_events").glob("*.json")]
    assert any(e["event"] == "runner_on_ok" and e["event_data"]["task"] == run_plan.PLAN_TASK for e in events)
    assert any(e["event"] == "playbook_on_stats" for e in events)


def test_plan_and_pictures_are_written(tier1_run: tuple[dict, Path, Path]) -> None:
    result, _, plan_root = tier1_run
    out = plan_root / "tier1"
    assert result["plan_json"] == str(out / "plan.json")
    plan = json.loads((out / "plan.json").read_text())
    assert plan["cluster"]["name"] == "tier1"
    for name in ("report.md", "report.html", "fabric.dot", "power.svg"):
        assert (out / name).is_file(), name
    report = (out / "report.md").read_text()
    assert "![Rack power and cooling](power.svg)" in report and "[report.html](report.html)" in report
    assert ("![Fabric](fabric.svg)" in report) == (out / "fabric.svg").is_file() == bool(shutil.which("dot"))


def test_artifacts_and_layout(tier1_run: tuple[dict, Path, Path]) -> None:
    result, pdd, _ = tier1_run
    art = pdd / "artifacts" / "plan-test"
    assert result["artifact_dir"] == str(art)
    assert (art / "status").read_text().strip() == "successful"
    assert (art / "rc").read_text().strip() == "0"
    assert "PLAY RECAP" in (art / "stdout").read_text()
    assert (pdd / "project").resolve() == ROOT
    assert (pdd / "inventory" / "hosts.yml").read_text() == (ROOT / "inventories/tier1/hosts.yml").read_text()
    envvars = (pdd / "env" / "envvars").read_text()
    assert f"ANSIBLE_CONFIG: {ROOT / 'ansible.cfg'}" in envvars
    summary = _load("runner_dir").stats(art)
    assert summary["status"] == "successful" and summary["rc"] == 0 and summary["failed_tasks"] == []
    assert summary["stats"]["changed"]["localhost"] > 0


def test_prepare_keeps_artifacts_and_adds_the_lab_sources(tmp_path: Path) -> None:
    runner_dir = _load("runner_dir")
    fake_root = tmp_path / "repo"
    for sub in ("inventories/tier2", "lab/overlay", "ci/runner"):
        (fake_root / sub).parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(ROOT / sub, fake_root / sub)
    (fake_root / "ansible.cfg").write_text("[defaults]\n")
    pdd = tmp_path / "pdd"
    (pdd / "artifacts" / "old").mkdir(parents=True)
    with pytest.raises(SystemExit, match="make lab-up TIER=tier2"):
        runner_dir.prepare("inventories/tier2", pdd, lab="tier2", root=fake_root)
    (fake_root / ".lab" / "tier2").mkdir(parents=True)
    (fake_root / ".lab" / "tier2" / "inventory.yml").write_text("all:\n  hosts: {}\n")
    runner_dir.prepare("inventories/tier2", pdd, lab="tier2", root=fake_root)
    assert (pdd / "artifacts" / "old").is_dir()
    assert (pdd / "inventory" / "zz-lab-overlay.yml").read_text() == (ROOT / "lab/overlay/lab.yml").read_text()
    assert (pdd / "inventory" / "zz-lab-connection.yml").is_file()
    assert (pdd / "project").resolve() == fake_root.resolve()
    runner_dir.prepare("inventories/tier2", pdd, root=fake_root)  # again, without the lab
    assert not (pdd / "inventory" / "zz-lab-overlay.yml").exists()


def test_make_runner_and_pipeline_parse() -> None:
    run = subprocess.run(
        ["make", "-n", "-f", "Makefile", "-f", "mk/ci.mk", "runner", "TIER=tier2", "PLAYBOOK=site", "LAB=1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "ci/runner_dir.py prepare --inventory inventories/tier2 --dest build/runner/tier2 --lab tier2" in run.stdout
    assert "ansible-runner run build/runner/tier2 -p playbooks/site.yml --ident site-" in run.stdout
    bash = subprocess.run(["bash", "-n", "ci/pipeline.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bash.returncode == 0, bash.stderr
