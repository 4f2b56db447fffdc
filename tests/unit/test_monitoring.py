"""Alert rules from the plan: promtool accepts them and each alert fires at its threshold
and stays quiet just below it (promtool test rules)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import load_inventory

from ansible_collections.gpucluster.tiers.plugins.module_utils.plan import cluster_plan

PROMTOOL = shutil.which("promtool")


@pytest.fixture(scope="module", params=["tier1", "tier3", "tier4"])
def monitoring(request: pytest.FixtureRequest) -> dict[str, Any]:
    return cluster_plan(*load_inventory(request.param))["monitoring"]


def test_every_alert_has_a_firing_and_a_quiet_case(monitoring: dict[str, Any]) -> None:
    tests = yaml.safe_load(monitoring["rule_tests_yaml"])["tests"]
    for alert in monitoring["alerts"]:
        states = {t["name"].split()[1] for t in tests if t["name"].split()[0] == alert}
        assert states == {"fire", "quiet"}, alert


def test_thresholds_come_from_the_plan() -> None:
    plan = cluster_plan(*load_inventory("tier4"))
    rules = {r["alert"]: r["expr"] for g in yaml.safe_load(plan["monitoring"]["rules_yaml"])["groups"] for r in g["rules"]}
    assert rules["GpuTemperatureCritical"] == "DCGM_FI_DEV_GPU_TEMP >= 87"  # H100 max operating temp
    assert rules["GpuPowerAboveCap"] == "DCGM_FI_DEV_POWER_USAGE > 700"
    assert rules["CoolantSupplyHigh"] == "gpucluster_coolant_supply_celsius > 32"  # ASHRAE W32
    assert rules["InfinibandPortDegraded"] == "node_infiniband_rate_bytes_per_second < 50000000000"
    tier1 = cluster_plan(*load_inventory("tier1"))["monitoring"]["alerts"]
    assert "CoolantSupplyHigh" not in tier1 and "InfinibandPortDown" not in tier1  # air cooled, no fabric


def test_promtool_checks_and_unit_tests_the_rules(monitoring: dict[str, Any], tmp_path: Path) -> None:
    assert PROMTOOL, "promtool is required: apt-get install prometheus (.ci/run installs it)"
    (tmp_path / "gpucluster.rules.yml").write_text(monitoring["rules_yaml"])
    (tmp_path / "tests.yml").write_text(monitoring["rule_tests_yaml"])
    check = subprocess.run([PROMTOOL, "check", "rules", "gpucluster.rules.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run([PROMTOOL, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout + run.stderr
