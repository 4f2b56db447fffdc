"""The fabric check: ibsim net file, ibnetdiscover -p parser, plan comparison, module, lab runner.

Recorded outputs in tests/data/ibnetdiscover/ come from the real tools (ibnetdiscover of
infiniband-diags 44 against Debian's ibsim 0.10) driven by lab/ibsim_check.py; each file
says how it was made. The ``ibsim`` tests run the simulator itself and are skipped only
when its binary is absent. Debian's ibsim simulates HDR at most, so the lab checks an NDR
plan at 4x HDR. Cabling faults are made here, in the tests, never by product code.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, load_inventory

from ansible_collections.gpucluster.tiers.plugins.module_utils import fabric as fabric_mod
from ansible_collections.gpucluster.tiers.plugins.module_utils import ibfabric
from ansible_collections.gpucluster.tiers.plugins.module_utils.plan import cluster_plan

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
HAVE_IBSIM = all(shutil.which(t) for t in ("ibsim", "ibnetdiscover", "opensm")) and os.path.exists(
    "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
)
needs_ibsim = pytest.mark.skipif(
    not HAVE_IBSIM, reason="ibsim, ibnetdiscover, opensm or libumad2sim not installed (ibsim-utils, infiniband-diags)"
)

_PLANS: dict[str, dict[str, Any]] = {}


def fabric(tier: str) -> dict[str, Any]:
    """plan["fabric"] of a reference tier (a fresh copy: tests mutate cablings)."""
    if tier not in _PLANS:
        _PLANS[tier] = cluster_plan(*load_inventory(tier))["fabric"]
    return copy.deepcopy(_PLANS[tier])


def lab_runner() -> Any:
    spec = importlib.util.spec_from_file_location("ibsim_check", ROOT / "lab" / "ibsim_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def only(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The entries of one kind, asserting that every other kind is empty."""
    others = {k: report[k] for k in KINDS if k != kind and report[k]}
    assert not others, others
    assert not report["topology"]["mismatches"]
    assert len(report["mismatches"]) == len(report[kind]), report["mismatches"]
    return report[kind]


# --- cabling faults (test-only mutations of a cabling dict) ---------------------------------


def host_link(cabling: dict[str, Any], host: str, rail: int) -> dict[str, Any]:
    return next(x for x in cabling["links"] if x["kind"] == "host" and x["a"]["node"] == host and x["rail"] == rail)


def move_cable(cabling: dict[str, Any], host: str, rail: int, leaf: str, port: int) -> dict[str, Any]:
    host_link(cabling, host, rail)["b"] = {"node": leaf, "port": port}
    return cabling


def drop_uplink(cabling: dict[str, Any], leaf: str, spine: str) -> dict[str, Any]:
    link = next(
        x for x in cabling["links"] if x["kind"] == "uplink" and (x["a"]["node"], x["b"]["node"]) == (leaf, spine)
    )
    cabling["links"].remove(link)
    return link


# --- ibsim net file ---------------------------------------------------------------------------


def test_netfile_declares_every_link_on_both_ends_with_unique_lids() -> None:
    cabling = fabric("tier4")["cabling"]
    text = ibfabric.ibsim_netfile(cabling)
    port_lines = [ln for ln in text.splitlines() if ln.startswith("[")]
    assert len(port_lines) == 2 * len(cabling["links"]) == 2 * (64 + 256)
    headers = [ln for ln in text.splitlines() if ln.startswith(("Switch", "Hca"))]
    assert len(headers) == 12 + 64
    assert 'Hca 1 "compute02 mlx5_3" # "compute02 mlx5_3"' in headers  # the rdma-ndd description
    assert 'Switch 64 "spine04" # "spine04" enhanced port 0 lid 12 lmc 0' in headers
    own_lids = [int(ln.split(" lid ")[1].split()[0]) for ln in headers if ln.startswith("Switch")]
    own_lids += [int(ln.split("# lid ")[1].split()[0]) for ln in port_lines if "# lid " in ln]
    assert sorted(own_lids) == list(range(1, 12 + 64 + 1))
    # both ends of one host link: compute02's HCAs follow the 12 switches and compute01's 8 HCAs
    assert '[2] "compute02 mlx5_3"[1] # "compute02 mlx5_3" lid 24 4xHDR' in port_lines
    assert '[1] "leaf04"[2] # lid 24 lmc 0 "leaf04" lid 4 4xHDR' in port_lines


def test_netfile_renders_ndr_as_hdr_and_says_so() -> None:
    cabling = fabric("tier3")["cabling"]
    assert ibfabric.lab_link(cabling) == {
        "planned": "4xNDR",
        "planned_rate_gbps": 400,
        "width": "4x",
        "speed": "HDR",
        "rate_gbps": 200.0,
        "capped": True,
    }
    text = ibfabric.ibsim_netfile(cabling)
    assert "planned 4xNDR (400 Gb/s), simulated as 4xHDR (200 Gb/s)" in text.splitlines()[1]
    assert "NDR" not in "\n".join(text.splitlines()[2:])
    # a narrower link keeps its lane speed: 1x HDR
    narrowed = copy.deepcopy(cabling)
    host_link(narrowed, "compute03", 6)["width"] = "1x"
    assert '[3] "compute03 mlx5_6"[1] # "compute03 mlx5_6" lid 31 1xHDR' in ibfabric.ibsim_netfile(narrowed)


def test_subnets_one_per_rail_without_spines() -> None:
    tier3 = ibfabric.subnets(fabric("tier3")["cabling"])
    assert [n["name"] for n in tier3] == [f"rail{r}" for r in range(8)]
    assert tier3[3]["sim_host"] == "compute01 mlx5_3" and tier3[3]["switches"] == ["leaf04"]
    assert ibfabric.subnets(fabric("tier3")["cabling"], "compute04")[0]["sim_host"] == "compute04 mlx5_0"
    (tier4,) = ibfabric.subnets(fabric("tier4")["cabling"])
    assert tier4["rails"] == list(range(8)) and len(tier4["switches"]) == 12
    assert len(ibfabric.subnets(fabric("tier2")["cabling"])) == 1
    assert ibfabric.subnets(fabric("tier1")["cabling"]) == []


def test_rates() -> None:
    assert ibfabric.speed_for(400, "4x") == "NDR" and ibfabric.speed_for(200, "4x") == "HDR"
    assert ibfabric.rate_value("4xHDR") == ibfabric.rate_value("HDR") == ibfabric.rate_value("200") == 200
    assert ibfabric.rate_value(400) == 400 and ibfabric.rate_value("1xNDR") == 100
    with pytest.raises(ValueError, match="not a link rate"):
        ibfabric.rate_value("fast")


# --- ibnetdiscover -p parser -----------------------------------------------------------------


def test_parse_recorded_ports_of_the_tier3_rails() -> None:
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "tier3.txt").read_text())
    assert len(ports) == 8 * (64 + 4)  # per rail: every leaf port, and the 4 HCAs' ports
    linked = [p for p in ports if p["remote"]]
    assert len(linked) == 8 * 4 * 2  # each host link seen from both ends
    ca = next(p for p in ports if p["desc"] == "compute02 mlx5_3")
    assert ca == {
        "type": "CA",
        "lid": 20,  # 8 leaves, then compute01's 8 HCAs, then compute02's
        "port": 1,
        "guid": ca["guid"],
        "width": "4x",
        "speed": "HDR",
        "rate_gbps": 200.0,
        "desc": "compute02 mlx5_3",
        "remote": {"type": "SW", "lid": 4, "port": 2, "guid": ca["remote"]["guid"], "desc": "leaf04"},
    }
    free = next(p for p in ports if p["desc"] == "leaf04" and p["port"] == 64)
    assert free["remote"] is None and free["type"] == "SW"


def test_parse_is_on_descriptions_and_skips_other_lines() -> None:
    # The format of a real NDR port (infiniband-diags prints "NDR" from the extended speed).
    text = (
        "ibwarn: [1234] some warning\n"
        "CA    12  1 0x946dae03006b1a2c 4x NDR - SW     3 17 0xfc6a1c0300a1b2c3 ( 'compute01 mlx5_0' - 'leaf01' )\n"
        "SW     3 18 0xfc6a1c0300a1b2c3 4x SDR                                    'leaf01'\n"
    )
    first, second = ibfabric.parse_ibnetdiscover_ports(text)
    assert first["rate_gbps"] == 400 and first["remote"]["port"] == 17 and first["remote"]["desc"] == "leaf01"
    assert second == {**second, "desc": "leaf01", "remote": None, "port": 18}


# --- comparison with the plan ----------------------------------------------------------------


def test_tier3_as_recorded_matches_the_plan_at_hdr() -> None:
    planned = fabric("tier3")
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "tier3.txt").read_text())
    report = ibfabric.compare(planned, ports, expected_rate="4xHDR")
    assert report["ok"], report["mismatches"]
    assert report["counts"]["discovered_hcas"] == report["counts"]["planned_hcas"] == 32
    assert report["topology"]["discovered"] == {
        "su01": {"nodes": [f"compute0{i}" for i in range(1, 5)], "switches": []}
    }
    # at the planned NDR rate every simulated HDR link is too slow
    assert len(ibfabric.compare(planned, ports)["slow_links"]) == 32


def test_recorded_miscabling_reports_each_fault_once() -> None:
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "tier3-miscabled.txt").read_text())
    report = ibfabric.compare(fabric("tier3"), ports, expected_rate=200)
    assert report["mismatches"] == [
        "compute02 rail 3 (mlx5_3): on leaf05 port 5 (a leaf of rail 4), planned leaf04 port 2",
        "link compute03 mlx5_6 port 1 - leaf07 port 3: 1x HDR (50 Gb/s), planned 4x at 200 Gb/s",
    ]


def test_missing_host_is_missing_from_topology_conf() -> None:
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "tier3.txt").read_text())
    ports = [
        p
        for p in ports
        if not p["desc"].startswith("compute04") and "compute04" not in (p["remote"] or {}).get("desc", "")
    ]
    report = ibfabric.compare(fabric("tier3"), ports, expected_rate="HDR")
    assert [(e["host"], e["rail"]) for e in report["missing_hcas"]] == [("compute04", r) for r in range(8)]
    assert report["topology"]["mismatches"] == [{"switch": "su01", "missing": ["compute04"], "extra": []}]
    assert "topology.conf SwitchName=su01: missing compute04 (discovered vs planned)" in report["mismatches"]
    # a node left out on purpose
    assert ibfabric.compare(fabric("tier3"), ports, expected_rate="HDR", ignore=["compute04 *"])["missing_hcas"] == []


def test_extra_hca_and_switch() -> None:
    ports = ibfabric.parse_ibnetdiscover_ports(
        (DATA / "tier3.txt").read_text()
        + "CA    99  1 0x0000000000900001 4x HDR - SW    90  7 0x0000000000900000 ( 'head01 mlx5_0' - 'leaf99' )\n"
    )
    report = ibfabric.compare(fabric("tier3"), ports, expected_rate="HDR")
    assert report["extra_switches"] == ["leaf99"]
    assert report["extra_hcas"] == [{"node": "head01 mlx5_0", "node_port": 1, "actual": {"leaf": "leaf99", "port": 7}}]
    assert len(report["mismatches"]) == 2


def synthetic_ports(cabling: dict[str, Any]) -> list[dict[str, Any]]:
    """Ports as parse_ibnetdiscover_ports gives them for a cabling at 4x HDR (no simulator)."""

    def end(e: dict[str, Any]) -> dict[str, Any]:
        desc = ibfabric.hca_desc(e["node"], e["hca"]) if e.get("hca") else e["node"]
        return {"type": "CA" if e.get("hca") else "SW", "lid": 0, "port": e["port"], "guid": "0x0", "desc": desc}

    out = []
    for link in cabling["links"]:
        a, b = end(link["a"]), end(link["b"])
        for near, far in ((a, b), (b, a)):
            out.append({**near, "width": "4x", "speed": "HDR", "rate_gbps": 200.0, "remote": far})
    return out


def two_unit_fabric() -> dict[str, Any]:
    """64 hosts in two scalable units, spines per rail plane (how tier4 grows)."""
    cabling = fabric_mod.expected_cabling(
        topology="fat_tree",
        compute_hosts=[f"gpu{i:03d}" for i in range(1, 65)],
        rail_hcas=[f"mlx5_{r}" for r in range(8)],
        switch_radix=64,
        spines=4,
        spine_scope="rail",
    )
    return {"cabling": cabling, "topology_conf": fabric_mod.slurm_topology_conf(cabling)}


def test_topology_conf_of_two_units_as_discovered() -> None:
    planned = two_unit_fabric()
    assert ibfabric.compare(planned, synthetic_ports(planned["cabling"]), expected_rate="HDR")["ok"]
    actual = move_cable(copy.deepcopy(planned["cabling"]), "gpu001", 0, "leaf09", 40)  # su02's rail-0 leaf
    report = ibfabric.compare(planned, synthetic_ports(actual), expected_rate="HDR")
    assert [(e["host"], e["actual"]["leaf"]) for e in report["wrong_leaf"]] == [("gpu001", "leaf09")]
    assert report["topology"]["mismatches"] == [{"switch": "su02", "missing": [], "extra": ["gpu001"]}]
    assert len(report["mismatches"]) == 2
    # su02 cut off from the spines: the spines' switch of switches loses it
    actual = copy.deepcopy(planned["cabling"])
    su02 = set(planned["cabling"]["scalable_units"][1]["leaves"])
    actual["links"] = [x for x in actual["links"] if not (x["kind"] == "uplink" and x["a"]["node"] in su02)]
    report = ibfabric.compare(planned, synthetic_ports(actual), expected_rate="HDR")
    assert len(report["missing_uplinks"]) == 8 * 32
    assert report["topology"]["mismatches"] == [{"switch": "spines", "missing": ["su02"], "extra": []}]


def test_same_leaf_other_port_and_extra_uplink() -> None:
    planned = fabric("tier4")
    actual = move_cable(copy.deepcopy(planned["cabling"]), "compute05", 2, "leaf03", 20)
    actual["links"].append(
        {"a": {"node": "leaf01", "port": 30}, "b": {"node": "spine01", "port": 64}, "kind": "uplink"}
    )
    report = ibfabric.compare(planned, synthetic_ports(actual), expected_rate="HDR")
    assert [(e["host"], e["rail"], e["expected"], e["actual"]) for e in report["wrong_port"]] == [
        ("compute05", 2, {"leaf": "leaf03", "port": 5}, {"leaf": "leaf03", "port": 20})
    ]
    assert report["extra_uplinks"] == [{"a": "leaf01", "a_port": 30, "b": "spine01", "b_port": 64}]
    assert report["mismatches"] == [
        "compute05 rail 2 (mlx5_2): on leaf03 port 20, planned port 5",
        "uplink leaf01 port 30 - spine01 port 64: not in the plan",
    ]


# --- the module, on recorded output ----------------------------------------------------------


def run_module(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from ansible.module_utils.testing import patch_module_args

    from ansible_collections.gpucluster.tiers.plugins.modules import fabric_check

    with patch_module_args(args), pytest.raises(SystemExit):
        fabric_check.main()
    return json.loads(capsys.readouterr().out)


def test_module_passes_recorded_tier3(capsys: pytest.CaptureFixture[str]) -> None:
    text = (DATA / "tier3.txt").read_text()
    out = run_module({"expected": fabric("tier3"), "ibnetdiscover_output": [text], "expected_rate": "4xHDR"}, capsys)
    assert out["ok"] is True and not out.get("failed") and out["changed"] is False
    assert out["discoveries"][0]["ports"] == 544


def test_module_fails_listing_each_mismatch(capsys: pytest.CaptureFixture[str]) -> None:
    text = (DATA / "tier3-miscabled.txt").read_text()
    out = run_module({"expected": fabric("tier3"), "ibnetdiscover_output": [text], "expected_rate": 200}, capsys)
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


# --- real ibsim runs -------------------------------------------------------------------------


def assert_gone(pid: int) -> None:
    assert not Path(f"/proc/{pid}").exists(), f"ibsim {pid} still running"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@needs_ibsim
def test_ibsim_tier3_moved_cable_is_the_only_finding() -> None:
    planned = fabric("tier3")
    actual = move_cable(copy.deepcopy(planned["cabling"]), "compute02", 3, "leaf05", 5)
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
            "actual": {"leaf": "leaf05", "port": 5},
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
    assert result["report"]["counts"]["discovered_uplinks"] == 255
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
    """lab/ibsim_check.py start; fabric_check with its rails and environment; stop."""
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
