"""The gpu_facts module on recorded nvidia-smi output (the samples are described in
tests/unit/plugins/module_utils/test_gpu.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.modules import gpu_facts
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan

DATA = ROOT / "tests" / "data" / "nvidia-smi"


def sample(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture
def h100_plan_gpu(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> dict[str, Any]:
    site, groups = tier3
    return cluster_plan(site, groups)["gpu"]  # H100 SXM, max_performance: -lgc 1980, -lmc 2619, -pl 700


def run_module(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        gpu_facts.main()
    return json.loads(capsys.readouterr().out)


def test_module_recorded_output(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_module(
        {
            "query_output": sample("h100-545-query.txt"),
            "temperature_output": sample("h100-545-temperature.txt"),
            "_ansible_check_mode": True,
        },
        capsys,
    )
    facts = out["ansible_facts"]["gpucluster_gpus"]
    assert out["changed"] is False and "failed" not in out
    assert facts["gpu_present"] is True and facts["count"] == 1 and facts["driver_version"] == "545.23.08"
    assert facts["gpus"][0]["max_sm_mhz"] == 1980
    assert facts["gpus"][0]["thermal"]["form"] == "tlimit"


def test_module_fails_on_plan_mismatch(h100_plan_gpu: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    out = run_module({"query_output": sample("a100-525-query.txt"), "plan_gpu": h100_plan_gpu}, capsys)
    assert out["failed"] is True
    assert "GPU 0 (NVIDIA A100-SXM4-80GB): planned SM clock lock 1980 MHz" in out["msg"]
    assert len(out["mismatches"]) == 3


@pytest.mark.parametrize("name", ["no-driver.txt", "no-devices.txt"])
def test_module_no_gpu_is_not_a_failure(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_module({"query_output": sample(name)}, capsys)
    facts = out["ansible_facts"]["gpucluster_gpus"]
    assert "failed" not in out
    assert facts == {
        "gpu_present": False,
        "reason": sample(name).strip(),
        "count": 0,
        "driver_version": None,
        "gpus": [],
    }


def test_module_without_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gpu_facts.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    out = run_module({}, capsys)
    assert out["ansible_facts"]["gpucluster_gpus"]["reason"] == "nvidia-smi not found in PATH"


def _fake_smi(tmp_path: Path, query: str, rc: int = 0) -> Path:
    """An nvidia-smi that prints the recorded query CSV (rc as given) or the recorded temperature report."""
    (tmp_path / "query.txt").write_text(query)
    (tmp_path / "temperature.txt").write_text(sample("h800-525-temperature.txt"))
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --query-gpu=*) cat {tmp_path}/query.txt; exit {rc};; '
        f"-q) cat {tmp_path}/temperature.txt;; esac\n"
    )
    smi.chmod(0o755)
    return smi


def test_module_runs_nvidia_smi(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    smi = _fake_smi(tmp_path, sample("h800-525-query.txt"))
    out = run_module({"nvidia_smi": str(smi)}, capsys)
    (gpu,) = out["ansible_facts"]["gpucluster_gpus"]["gpus"]
    assert gpu["name"] == "NVIDIA H800" and gpu["ecc_uncorrected_volatile"] is None
    assert gpu["thermal"]["max_operating_c"] == 87
    assert out["ansible_facts"]["gpucluster_gpus"]["driver_version"] == "525.105.17"


def test_module_nvidia_smi_without_driver(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    smi = _fake_smi(tmp_path, sample("no-driver.txt"), rc=9)
    out = run_module({"nvidia_smi": str(smi)}, capsys)
    assert "failed" not in out
    assert out["ansible_facts"]["gpucluster_gpus"]["gpu_present"] is False
