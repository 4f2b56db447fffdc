"""The Kubernetes path's playbooks on localhost, no cluster and no container: playbooks/kubernetes.yml
(roles/k8s_workload) in check mode says it applies nothing without a kubeconfig and writes nothing;
a real run and make plan write every manifest of the plan, and a second run changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from conftest import ROOT

PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PLAYBOOK, *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)


def _recap(stdout: str) -> str:
    return stdout.split("PLAY RECAP")[-1]


def test_check_mode_without_a_kubeconfig_renders_nothing_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "k8s"
    run = _run("-i", "inventories/tier4-k8s", "playbooks/kubernetes.yml", "--check", "-e", f"k8s_workload_dir={out}")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "No kubeconfig given (k8s_workload_kubeconfig): rendered only, nothing applied" in run.stdout
    assert "failed=0" in _recap(run.stdout)
    assert not out.exists()  # check mode: nothing written


def test_a_run_writes_every_manifest_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "k8s"
    args = ("-i", "inventories/tier4-k8s", "playbooks/kubernetes.yml", "-e", f"k8s_workload_dir={out}")
    first = _run(*args)
    assert first.returncode == 0, first.stdout[-3000:]
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    objects = [yaml.safe_load((out / path).read_text()) for path in kustomization["resources"]]
    kinds = {o["kind"] for o in objects}
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "NicClusterPolicy", "Node"} <= kinds
    assert not kinds & {"RayJob", "RayCluster"}  # templates to submit: written, never applied
    assert yaml.safe_load(next((out / "kuberay").glob("rayjob-*.yaml")).read_text())["kind"] == "RayJob"
    overlay = yaml.safe_load((out / "overlays" / "tier4-k8s" / "kustomization.yaml").read_text())
    assert overlay["resources"] == ["../.."]
    second = _run(*args)
    assert second.returncode == 0 and "changed=0" in _recap(second.stdout), second.stdout[-3000:]


def test_make_plan_writes_the_manifests_of_the_plan(planned: Callable[[str], tuple[Path, str]]) -> None:
    out = planned("tier4-k8s")[0]  # make plan of tier4-k8s (tests/unit/conftest.py, once per session)
    plan = json.loads((out / "plan.json").read_text())
    for entry in plan["kubernetes"]["manifests"]:
        assert yaml.safe_load((out / "kubernetes" / entry["path"]).read_text()) == entry["object"], entry["path"]
    assert (out / "kubernetes" / "kustomization.yaml").is_file()


def test_make_plan_of_a_slurm_tier_writes_no_manifests(planned: Callable[[str], tuple[Path, str]]) -> None:
    out = planned("tier2")[0]
    assert (out / "plan.json").is_file()
    assert not (out / "kubernetes").exists()
