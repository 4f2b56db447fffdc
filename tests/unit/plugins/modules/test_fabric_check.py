"""The fabric check: the fabric_check module and the lab runner (tools/lab/ibsim_check.py) on ibsim.

Recorded outputs in tests/data/ibnetdiscover/ come from the real tools (ibnetdiscover of
infiniband-diags 44 against Debian's ibsim 0.10) driven by tools/lab/ibsim_check.py; each file
says how it was made. The ``ibsim`` tests run the simulator itself and are skipped only
when its binary is absent. Debian's ibsim simulates HDR at most, so the lab checks an NDR
plan at 4x HDR. Cabling faults are made here, in the tests, never by product code.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import HAVE_IBSIM, ROOT, lab_runner, listed, load_inventory, needs_ibsim

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

DATA = ROOT / "tests" / "data" / "ibnetdiscover"

KINDS = (
    "missing_switches",
    "extra_switches",
    "missing_hcas",
    "extra_hcas",
    "wrong_leaf",
    "wrong_port",
    "missing_uplinks",
    "extra_uplinks",
    "slow_links",
)

_PLANS: dict[str, dict[str, Any]] = {}


def fabric(tier: str, *, sm_ports: bool = True) -> dict[str, Any]:
    """plan["fabric"] of a reference tier (a fresh copy: tests mutate cablings); ``sm_ports=False``
    without the subnet manager's ports, for recordings made before the plan cabled them."""
    if tier not in _PLANS:
        _PLANS[tier] = cluster_plan(*load_inventory(tier))["fabric"]
    out = copy.deepcopy(_PLANS[tier])
    if not sm_ports:
        out["cabling"].pop("sm_links", None)
        out["cabling"].pop("sm_hcas", None)
    return out


def only(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The entries of one kind, asserting that every other kind is empty."""
    others = {k: report[k] for k in KINDS if k != kind and report[k]}
    assert not others, others
    assert not report["topology"]["mismatches"]
    assert len(report["mismatches"]) == len(report[kind]), report["mismatches"]
    return report[kind]


def host_link(cabling: dict[str, Any], host: str, rail: int) -> dict[str, Any]:
    return next(
        x for x in listed(cabling)["links"] if x["kind"] == "host" and x["a"]["node"] == host and x["rail"] == rail
    )


def move_cable(cabling: dict[str, Any], host: str, rail: int, leaf: str, port: int) -> dict[str, Any]:
    host_link(cabling, host, rail)["b"] = {"node": leaf, "port": port}
    return cabling


def drop_uplink(cabling: dict[str, Any], leaf: str, spine: str) -> dict[str, Any]:
    link = next(
        x
        for x in listed(cabling)["links"]
        if x["kind"] == "uplink" and (x["a"]["node"], x["b"]["node"]) == (leaf, spine)
    )
    cabling["links"].remove(link)
    return link


def run_module(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from ansible.module_utils.testing import patch_module_args

    from ansible_collections.gpucluster.tiers.plugins.modules import fabric_check

    with patch_module_args(args), pytest.raises(SystemExit):
        fabric_check.main()
    return json.loads(capsys.readouterr().out)


def test_module_passes_recorded_tier3(capsys: pytest.CaptureFixture[str]) -> None:
    text = (DATA / "tier3.txt").read_text()
    expected = fabric("tier3", sm_ports=False)  # recorded before the plan cabled the head's SM ports
    out = run_module({"expected": expected, "ibnetdiscover_output": [text], "expected_rate": "4xHDR"}, capsys)
    assert out["ok"] is True and not out.get("failed") and out["changed"] is False
    assert out["discoveries"][0]["ports"] == 544


def test_module_fails_listing_each_mismatch(capsys: pytest.CaptureFixture[str]) -> None:
    text = (DATA / "tier3-miscabled.txt").read_text()
    expected = fabric("tier3", sm_ports=False)  # recorded before the plan cabled the head's SM ports
    out = run_module({"expected": expected, "ibnetdiscover_output": [text], "expected_rate": 200}, capsys)
    assert out["failed"] is True and out["ok"] is False
    assert out["msg"].splitlines() == [
        "the fabric differs from the plan (2):",
        "- compute02 rail 3 (mlx5_3): on leaf05 port 5 (a leaf of rail 4), planned leaf04 port 2",
        "- link compute03 mlx5_6 port 1 - leaf07 port 3: 1x HDR (50 Gb/s), planned 4x at 200 Gb/s",
    ]
    assert out["report"]["wrong_leaf"][0]["actual"] == {"leaf": "leaf05", "port": 5}


def test_module_bounds_every_tool_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hang = tmp_path / "ibnetdiscover"
    hang.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    hang.chmod(0o755)
    args = {"expected": fabric("tier2"), "ibnetdiscover_path": str(hang), "timeout": 1}
    out = run_module(args, capsys)
    assert out["failed"] is True
    assert out["msg"] == "fabric discovery failed: discovery rails0-7: ibnetdiscover did not finish within 1 s"


def assert_gone(pid: int) -> None:
    assert not Path(f"/proc/{pid}").exists(), f"ibsim {pid} still running"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@needs_ibsim
def test_ibsim_tier3_moved_cable_is_the_only_finding() -> None:
    planned = fabric("tier3")
    actual = move_cable(copy.deepcopy(planned["cabling"]), "compute02", 3, "leaf05", 6)  # port 5: the SM's
    started: list[int] = []
    result = lab_runner().run_check(planned, actual, started=started)
    assert result["ok"] is False
    assert only(result["report"], "wrong_leaf") == [
        {
            "host": "compute02",
            "hca": "mlx5_3",
            "hca_port": 1,
            "rail": 3,
            "expected": {"leaf": "leaf04", "port": 2},
            "actual": {"leaf": "leaf05", "port": 6},
            "actual_leaf_rail": 4,
        }
    ]
    assert [s["name"] for s in result["subnets"]] == [f"rail{r}" for r in range(8)]
    assert_gone(started[0])


@needs_ibsim
def test_ibsim_tier4_missing_spine_uplink_is_the_only_finding() -> None:
    planned = fabric("tier4")
    actual = copy.deepcopy(planned["cabling"])
    gone = drop_uplink(actual, "leaf03", "spine02")
    result = lab_runner().run_check(planned, actual)
    assert only(result["report"], "missing_uplinks") == [
        {"a": "leaf03", "a_port": gone["a"]["port"], "b": "spine02", "b_port": gone["b"]["port"]}
    ]
    assert result["report"]["counts"]["discovered_uplinks"] == 63  # 8 leaves x 8 uplinks (4 to each spine), one gone
    assert_gone(result["ibsim_pid"])


@needs_ibsim
def test_ibsim_three_tier_fat_tree_matches_its_plan() -> None:
    """A three-tier fat tree (leaves, pod spines, core switches) in ibsim: opensm brings it up, and the
    discovered fabric matches the plan and its nested topology.conf; a missing core link is the only finding."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import cabling

    plan = cabling.expected_cabling(
        topology="fat_tree",
        compute_hosts=[f"gpu{i:02d}" for i in range(1, 21)],
        rail_hcas=["mlx5_0", "mlx5_1"],
        switch_radix=8,
    )
    planned = {"cabling": plan, "slurm_topology": cabling.slurm_topology(plan)}
    assert plan["sizing"]["tiers"] == 3
    result = lab_runner().run_check(planned)
    assert result["report"]["ok"], result["report"]["mismatches"]
    assert_gone(result["ibsim_pid"])
    actual = listed(copy.deepcopy(plan))
    gone = next(x for x in actual["links"] if x["kind"] == "core")
    actual["links"].remove(gone)
    result = lab_runner().run_check(planned, actual)
    assert only(result["report"], "missing_uplinks") == [
        {"a": gone["a"]["node"], "a_port": gone["a"]["port"], "b": gone["b"]["node"], "b_port": gone["b"]["port"]}
    ]
    assert_gone(result["ibsim_pid"])


@needs_ibsim
def test_ibsim_narrow_link_is_the_only_finding() -> None:
    planned = fabric("tier2")
    actual = copy.deepcopy(planned["cabling"])
    host_link(actual, "compute02", 5)["width"] = "1x"
    result = lab_runner().run_check(planned, actual, subnet_manager=False)
    (slow,) = only(result["report"], "slow_links")
    assert (slow["a"], slow["b"], slow["width"], slow["speed"], slow["below"]) == (
        "compute02 mlx5_5",
        "ib-sw01",
        "1x",
        "HDR",
        ["width", "rate"],
    )


@needs_ibsim
def test_ibsim_is_stopped_when_the_check_itself_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = lab_runner()

    def broken(text: str) -> list[dict[str, Any]]:
        raise RuntimeError("parser exploded")

    monkeypatch.setattr(runner.ibfabric, "parse_ibnetdiscover_ports", broken)
    started: list[int] = []
    with pytest.raises(RuntimeError, match="parser exploded"):
        runner.run_check(fabric("tier2"), started=started, subnet_manager=False)
    assert len(started) == 1
    assert_gone(started[0])


@needs_ibsim
def test_module_against_ibsim_as_molecule_runs_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tools/lab/ibsim_check.py start; fabric_check with its rails and environment; stop."""
    runner = lab_runner()
    planned = fabric("tier3")
    state = runner.start(planned, tmp_path, None, 10.0)
    try:
        args = {
            "expected": planned,
            "rails": state["rails"],
            "environment": state["environment"],
            "expected_rate": state["lab_rate"]["rate_gbps"],
            "timeout": 10,
        }
        out = run_module(args, capsys)
    finally:
        assert runner.stop(tmp_path)
    assert out["ok"] is True, out.get("msg")
    assert [d["name"] for d in out["discoveries"]] == [f"rail{r}" for r in range(8)]
    assert_gone(state["pid"])


def test_lab_runner_cli_reports_missing_tools_or_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"fabric": fabric("tier2")}))
    rc = lab_runner().main(["check", str(plan), "--no-sm"])
    out = capsys.readouterr()
    if HAVE_IBSIM:
        assert rc == 0 and "fabric matches the plan" in out.out
    else:
        assert rc == 2 and "missing" in out.err


def _with_files(tier: str) -> dict[str, Any]:
    """The plan with each host's file list (conftest's cluster_plan passes the roles' file lists)."""
    from conftest import cluster_plan as plan_with_files

    return plan_with_files(*load_inventory(tier))


def _opensm_files(plan: dict[str, Any], head: str = "head01") -> dict[str, str]:
    """The head's rendered opensm.conf and partitions.conf (as make plan writes them)."""
    from conftest import render_role_template

    out = {}
    for entry in files_by_host(plan)[head]:
        if entry["role"] == "fabric" and entry["dest"].startswith("/etc/opensm/"):
            out[entry["dest"].rsplit("/", 1)[1]] = render_role_template("fabric", entry["src"], plan, head)
    return out


@needs_ibsim
@pytest.mark.parametrize("tier", ["tier2", "tier3"])
def test_opensm_on_the_heads_ports_brings_every_planned_port_active(tier: str) -> None:
    """opensm from the rendered files, one per subnet on the head's SM port: every planned CA port ACTIVE."""
    plan = _with_files(tier)
    files = _opensm_files(plan)
    started: list[int] = []
    result = lab_runner().run_sm_check(
        plan["fabric"], opensm_conf=files["opensm.conf"], partitions_conf=files["partitions.conf"], started=started
    )
    assert result["ok"], result
    assert [s["sm_port"] for s in result["subnets"]] == [
        f"head01 {x['hca']}" for x in plan["fabric"]["cabling"]["sm_hcas"]
    ]
    assert result["planned_ca_ports"] == (17 if tier == "tier2" else 40)
    assert {s["sm_priority"] for s in result["subnets"]} == {14}  # opensm.conf's, not opensm's default 0
    assert_gone(started[0])


@needs_ibsim
def test_opensm_check_fails_on_a_priority_the_plan_does_not_hold() -> None:
    plan = _with_files("tier2")
    files = _opensm_files(plan)
    conf = files["opensm.conf"].replace("sm_priority 14", "sm_priority 3")
    result = lab_runner().run_sm_check(plan["fabric"], opensm_conf=conf, partitions_conf=files["partitions.conf"])
    assert not result["ok"] and result["subnets"][0]["sm_priority"] == 3
    assert result["not_active"] == []  # the ports are up; the SM is not the planned one


@needs_ibsim
def test_opensm_check_fails_without_the_sm_port() -> None:
    """A plan whose subnet has no SM port (a managed switch's SM, not simulated): nothing can come up here."""
    plan = _with_files("tier2")
    files = _opensm_files(plan)
    fab = copy.deepcopy(plan["fabric"])
    fab["cabling"]["sm_hcas"] = []
    result = lab_runner().run_sm_check(fab, opensm_conf=files["opensm.conf"], partitions_conf=files["partitions.conf"])
    assert not result["ok"] and result["no_sm"] == ["rails0-7"]
