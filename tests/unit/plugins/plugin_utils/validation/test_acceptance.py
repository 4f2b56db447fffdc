"""Acceptance gates and report on recorded outputs: floors from the plan, never the average,
an absent tool is skipped (never a pass), and a tier whose outputs are below floor fails."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import acceptance, gates
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import report as acceptance_report

DATA = ROOT / "tests" / "data" / "acceptance"
TOOLS = {
    "all_reduce_perf": True,
    "ib_write_bw": True,
    "fio": True,
    "dcgmi": True,
    "ib_write_lat": True,
    "perfquery": True,
}


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _reg(stdout: str, rc: int = 0, stderr: str = "") -> dict[str, Any]:
    """An ansible.builtin.command registration."""
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "changed": False, "failed": False}


def _loop(items: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"results": [{**r, "item": i} for i, r in zip(items, results, strict=True)], "changed": False}


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    return {t: cluster_plan(*load_inventory(t)) for t in ("tier1", "tier2", "tier3", "tier4")}


def _by_name(checks: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [c for c in checks if c["name"] == name]


# ---------------------------------------------------------------- what to run


def test_plan_carries_the_tests(plans: dict[str, dict[str, Any]]) -> None:
    for tier, plan in plans.items():
        tests = plan["validation"]["tests"]
        assert tests == acceptance.acceptance_tests(plan), tier
        ar = tests["all_reduce"]
        assert ar["max_bytes"] == plan["validation"]["gate_message_bytes"] == 8 * 2**30
        assert ar["min_bytes"] == 2**30 and ar["gpus_per_node"] == 8
        assert ar["inter_node"] == (plan["cluster"]["compute_nodes"] >= 2)
    assert plans["tier3"]["validation"]["tests"]["all_reduce"]["hostlist"] == "compute[01-04]"


def test_fio_targets_follow_the_storage_paths(plans: dict[str, dict[str, Any]]) -> None:
    t1 = acceptance.fio_jobs(plans["tier1"])
    assert t1 == [
        {
            "name": "checkpoints",
            "path": "/raid/checkpoints",
            "dir": "/raid/checkpoints/.gpucluster-validate",
            "scope": "local",
            "gated": True,
        }
    ]  # /raid local scratch is the same filesystem: not measured twice
    t2 = acceptance.fio_jobs(plans["tier2"])
    assert [(t["name"], t["path"], t["scope"], t["gated"]) for t in t2] == [
        ("checkpoints", "/shared/checkpoints", "shared", True),
        ("local_scratch", "/raid", "local", False),
    ]
    t3 = acceptance.fio_jobs(plans["tier3"])
    assert t3[0]["path"] == "/lustre/aifs/checkpoints" and t3[0]["scope"] == "shared"


def test_ib_write_bw_ring_per_rail(plans: dict[str, dict[str, Any]]) -> None:
    assert acceptance.ib_write_bw_pairs(plans["tier1"]) == []
    pairs = acceptance.ib_write_bw_pairs(plans["tier3"])
    assert len(pairs) == 8 * 4
    rail3 = [p for p in pairs if p["rail"] == 3]
    assert [(p["client"], p["server"]) for p in rail3] == [
        ("compute01", "compute02"),
        ("compute02", "compute03"),
        ("compute03", "compute04"),
        ("compute04", "compute01"),
    ]
    p = rail3[0]
    assert (p["client_hca"], p["server_hca"], p["port"], p["rdma_cm"]) == ("mlx5_3", "mlx5_3", 18518, False)
    assert p["server_address"] == plans["tier3"]["hosts"]["compute02"]["addresses"]["management"]
    # every NIC sends once and receives once
    for rail in range(8):
        on_rail = [q for q in pairs if q["rail"] == rail]
        assert sorted(q["client"] for q in on_rail) == sorted(q["server"] for q in on_rail)


def test_roce_pairs_use_rdma_cm_on_the_rail_address() -> None:
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    site["gpucluster_fabric"]["type"] = "roce"
    site["gpucluster_fabric"].pop("infiniband", None)
    plan = cluster_plan(site, groups)
    p = acceptance.ib_write_bw_pairs(plan)[9]
    assert p["rdma_cm"] is True
    assert p["server_address"] == plan["hosts"][p["server"]]["addresses"]["rails"][str(p["rail"])]


# ---------------------------------------------------------------- gates


def test_all_reduce_gate_uses_the_large_rows_not_the_average() -> None:
    c = gates.gate_all_reduce(
        "all_reduce_inter_node",
        ["a", "b"],
        _reg(_read("all_reduce_h100_2x8_multisize.txt")),
        installed=True,
        floor=200.0,
        no_floor="",
        expected_ranks=16,
    )
    assert c["status"] == "pass"
    assert c["measured"] == 219.51  # lower of out-of-place and in-place at 8 GiB; the average is 50.906
    assert "50.906 (not gated)" in c["reason"]


def test_all_reduce_below_floor_fails_with_the_numbers() -> None:
    c = gates.gate_all_reduce(
        "all_reduce_intra_node",
        ["compute02"],
        _reg(_read("all_reduce_h100_1node_low_busbw.txt")),
        installed=True,
        floor=460.0,
        no_floor="",
        drain=["compute02"],
    )
    assert (c["status"], c["measured"], c["floor"], c["unit"]) == ("fail", 299.51, 460.0, "GB/s")
    assert c["reason"].startswith("299.51 < 460")
    assert c["drain"] == ["compute02"]


def test_all_reduce_wrong_values_fail_even_above_floor() -> None:
    c = gates.gate_all_reduce(
        "all_reduce_intra_node",
        ["compute01"],
        _reg(_read("all_reduce_h100_1node_wrong.txt"), rc=1),
        installed=True,
        floor=460.0,
        no_floor="",
    )
    assert c["measured"] == 476.28 and c["status"] == "fail"
    assert "#wrong 12" in c["reason"] and "out of bounds values 12" in c["reason"]


def test_all_reduce_rank_count_mismatch_fails() -> None:
    c = gates.gate_all_reduce(
        "all_reduce_inter_node",
        ["a", "b", "c", "d"],
        _reg(_read("all_reduce_h100_2x8_multisize.txt")),
        installed=True,
        floor=100.0,
        no_floor="",
        expected_ranks=32,
    )
    assert c["status"] == "fail" and "16 ranks, expected 32" in c["reason"]


def test_all_reduce_without_a_floor_is_skipped_with_the_plan_reason() -> None:
    c = gates.gate_all_reduce(
        "all_reduce_intra_node",
        ["n"],
        _reg(_read("all_reduce_h200_1node_dossier.txt")),
        installed=True,
        floor=None,
        no_floor="no sourced single-node all_reduce threshold for l40s",
    )
    assert c["status"] == "skipped" and c["measured"] == 476.72
    assert c["reason"].startswith("no floor: no sourced single-node")


@pytest.mark.parametrize(
    ("run", "installed", "status", "reason"),
    [
        (None, False, "skipped", "not installed: all_reduce_perf"),
        (_reg("", rc=124), True, "fail", "timed out"),
        (_reg("", rc=127, stderr="timeout: failed to run command 'all_reduce_perf'"), True, "fail", "could not run"),
        (None, True, "fail", "no result"),
        ({"skipped": True, "skip_reason": "Conditional result was False"}, True, "skipped", "not run"),
        (_reg("", rc=1, stderr="srun: error: Unable to allocate resources"), True, "fail", "Unable to allocate"),
    ],
)
def test_all_reduce_run_outcomes(run: Any, installed: bool, status: str, reason: str) -> None:
    c = gates.gate_all_reduce("x", ["n"], run, installed=installed, floor=460.0, no_floor="")
    assert c["status"] == status and reason in c["reason"]
    assert c["status"] != "pass"


def test_ib_write_bw_gate() -> None:
    pair = {"rail": 3, "client": "c1", "server": "c2", "client_hca": "mlx5_3", "server_hca": "mlx5_3"}
    ok = gates.gate_ib_write_bw(
        pair, _reg(_read("ib_write_bw_ndr_rail0_ok.txt")), installed=True, floor=375.0, no_floor=""
    )
    assert (ok["name"], ok["status"], ok["measured"], ok["unit"]) == ("ib_write_bw_rail3", "pass", 391.63, "Gb/s")
    bad = gates.gate_ib_write_bw(
        pair, _reg(_read("ib_write_bw_ndr_rail3_degraded.txt")), installed=True, floor=375.0, no_floor=""
    )
    assert bad["status"] == "fail" and bad["reason"].startswith("196.41 < 375")
    assert "c1:mlx5_3 -> c2:mlx5_3" in bad["reason"] and bad["drain"] == ["c1", "c2"]
    gone = gates.gate_ib_write_bw(pair, None, installed=False, floor=375.0, no_floor="")
    assert gone["status"] == "skipped" and gone["reason"].startswith("not installed: ib_write_bw")


def test_fio_shared_sum_and_local_per_node() -> None:
    shared = {"name": "checkpoints", "path": "/shared/checkpoints", "scope": "shared", "gated": True}
    write = _reg(_read("fio_write_4jobs_group.json"))
    [c] = gates.gate_fio(shared, "write", {"a": (write, True), "b": (write, True)}, floor=20.0)
    assert c["measured"] == round(2 * 1.721, 3) and c["status"] == "fail" and c["nodes"] == ["a", "b"]
    assert "sum of 2 concurrent clients" in c["reason"] and c["drain"] == []
    [c] = gates.gate_fio(shared, "write", {"a": (write, True), "b": (write, True)}, floor=3.0)
    assert c["status"] == "pass"
    # one node without a result: incomplete is a failure, not a pass
    [c] = gates.gate_fio(shared, "write", {"a": (write, True), "b": (None, True)}, floor=1.0)
    assert c["status"] == "fail" and c["reason"].startswith("incomplete: b: no result")
    [c] = gates.gate_fio(shared, "write", {"a": (None, False), "b": (None, False)}, floor=1.0)
    assert c["status"] == "skipped" and c["reason"] == "not installed: fio"
    local = {"name": "local_scratch", "path": "/raid", "scope": "local", "gated": False}
    read = _reg(_read("fio_read_4jobs_group.json"))
    cs = gates.gate_fio(local, "read", {"a": (read, True), "b": (read, True)}, floor=40.0)
    assert [(c["nodes"], c["status"], c["measured"], c["floor"]) for c in cs] == [
        (["a"], "skipped", 1.109, None),
        (["b"], "skipped", 1.109, None),
    ]
    assert cs[0]["reason"].startswith("no floor: local scratch is not gated")


def test_fio_failure_outputs() -> None:
    local = {"name": "checkpoints", "path": "/raid/checkpoints", "scope": "local", "gated": True}
    err = _reg("", rc=1, stderr=_read("fio_missing_directory.stderr"))
    [c] = gates.gate_fio(local, "write", {"a": (err, True)}, floor=7.0)
    assert c["status"] == "fail" and "failed parsing directory" in c["reason"] and c["drain"] == ["a"]


def test_dcgm_gate() -> None:
    bad = gates.gate_dcgm("compute02", _reg(_read("dcgm_diag_r3_h100_memory_fail.json"), rc=226), installed=True)
    assert bad["status"] == "fail" and bad["measured"] == "5/6 passed"
    assert bad["reason"] == "failed: memory (GPU 5); warn: targeted_power"
    good = gates.gate_dcgm("compute01", _reg(_read("dcgm_diag_v3_real_pass.txt")), installed=True, level=1)
    assert (good["name"], good["status"], good["measured"]) == ("dcgm_diag_r1", "pass", "10/10 passed")
    gone = gates.gate_dcgm("compute01", None, installed=False)
    assert gone["status"] == "skipped" and gone["reason"] == "not installed: dcgmi"
    no_engine = _reg("Error: unable to establish a connection to the host engine", rc=1)
    broken = gates.gate_dcgm("c", no_engine, installed=True)
    assert broken["status"] == "fail" and "host engine" in broken["reason"]


# ---------------------------------------------------------------- ib_write_lat and the port error sweep

PERFQUERY = ROOT / "tests" / "data" / "perfquery"


def test_ib_write_lat_ring_on_its_own_ports(plans: dict[str, dict[str, Any]]) -> None:
    for tier in ("tier2", "tier3", "tier4"):
        tests = plans[tier]["validation"]["tests"]
        bw, lat = tests["ib_write_bw"], tests["ib_write_lat"]
        assert [(p["rail"], p["client"], p["server"]) for p in lat] == [
            (p["rail"], p["client"], p["server"]) for p in bw
        ]
        assert {p["port"] for p in lat}.isdisjoint({p["port"] for p in bw})
        assert all(p["port"] == acceptance.IB_LAT_BASE_PORT + p["rail"] for p in lat)
    assert plans["tier1"]["validation"]["tests"]["ib_write_lat"] == []  # one node: no pair


def test_port_sweep_covers_every_planned_compute_hca(plans: dict[str, dict[str, Any]]) -> None:
    for tier in ("tier2", "tier3", "tier4"):
        plan = plans[tier]
        ports = plan["validation"]["tests"]["port_counters"]
        cabled = {(h["host"], h["hca"]) for h in fabric_links.hcas(plan["fabric"]["cabling"])}
        assert {(p["host"], p["hca"]) for p in ports} == cabled
        assert {p["port"] for p in ports} == {1}
        assert not any(p["host"].startswith("head") for p in ports)  # the SM's ports are no compute rail
    assert plans["tier1"]["validation"]["tests"]["port_counters"] == []


def test_ib_write_lat_gate_on_real_runs() -> None:
    pair = {"rail": 0, "client": "c1", "server": "c2", "client_hca": "mlx5_0", "server_hca": "mlx5_0"}
    ok = gates.gate_ib_write_lat(pair, _reg(_read("ib_write_lat_hdr_mlx5_sizes.txt")), installed=True)
    assert (ok["status"], ok["measured"], ok["floor"], ok["unit"]) == ("pass", 1.87, gates.IB_LAT_CEILING_US, "us")
    assert ok["reason"].startswith("typical at 2 B, 99% 2.03 us, max 5.41 us, c1:mlx5_0 -> c2:mlx5_0")
    slow = gates.gate_ib_write_lat(pair, _reg(_read("ib_write_lat_hdr_mlx5_sizes.txt")), installed=True, ceiling=1.5)
    assert slow["status"] == "fail" and slow["reason"].startswith("1.87 > 1.5") and slow["drain"] == ["c1", "c2"]
    refused = gates.gate_ib_write_lat(pair, _reg(" Couldn't connect to 10.0.0.2:18615\n", rc=1), installed=True)
    assert refused["status"] == "fail" and refused["measured"] is None
    gone = gates.gate_ib_write_lat(pair, None, installed=False)
    assert gone["status"] == "skipped" and gone["reason"].startswith("not installed: ib_write_lat")


def test_port_error_gate_on_ibsim_counters() -> None:
    clean = gates.gate_port_errors("c1", "mlx5_0", 1, _reg((PERFQUERY / "ibsim-clean.txt").read_text()), installed=True)
    assert (clean["status"], clean["measured"]) == ("pass", "0 over") and clean["reason"] == "mlx5_0 port 1 (LID 2)"
    bad = gates.gate_port_errors("c2", "mlx5_3", 1, _reg((PERFQUERY / "ibsim-errors.txt").read_text()), installed=True)
    assert bad["status"] == "fail" and bad["measured"] == "2 over" and bad["drain"] == ["c2"]
    # LinkDownedCounter 3 and PortXmitDiscards 12 are within infiniband-diags' thresholds (10, 100)
    assert bad["reason"] == "SymbolErrorCounter 1234 > 10, PortRcvErrors 57 > 10; mlx5_3 port 1 (LID 13)"
    strict = gates.gate_port_errors(
        "c2",
        "mlx5_3",
        1,
        _reg((PERFQUERY / "ibsim-errors.txt").read_text()),
        installed=True,
        thresholds=dict.fromkeys(gates.PORT_ERROR_THRESHOLDS, 0),
    )
    assert strict["measured"] == "4 over"
    ext = gates.gate_port_errors(
        "c1", "mlx5_0", 1, _reg((PERFQUERY / "ibsim-extended.txt").read_text()), installed=True
    )
    assert ext["status"] == "fail" and "(extended counters only)" in ext["reason"]
    nodev = (PERFQUERY / "ibsim-no-such-ca.txt").read_text()
    failed = gates.gate_port_errors("c1", "mlx5_0", 1, _reg("", rc=255, stderr=nodev), installed=True)
    assert failed["status"] == "fail" and "Failed to open 'mlx5_0' port '1'" in failed["reason"]
    assert gates.gate_port_errors("c1", "mlx5_0", 1, None, installed=False)["status"] == "skipped"


def test_a_sweep_the_play_did_not_run_is_skipped_with_its_reason(plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["tier2"]
    why = "a lab container has no HCA (the lab reads perfquery on ibsim: molecule/shared/tests/test_opensm.py)"
    hosts = {h: {"tools": {"perfquery": True}, "runs": {"port_errors": {"skipped": True, "skip_reason": why}}}
             for h in ("compute01", "compute02")}  # fmt: skip
    ports = [c for c in acceptance.acceptance_checks(plan, hosts) if c["name"].startswith("port_errors_")]
    assert len(ports) == 16 and {(c["status"], c["reason"]) for c in ports} == {
        ("skipped", f"not run: {why} (mlx5_0 port 1)")
    } | {("skipped", f"not run: {why} (mlx5_{r} port 1)") for r in range(8)}


def test_thresholds_are_infiniband_diags_own() -> None:
    """The values are the ones Debian's infiniband-diags ships in its error_thresholds file (commented out)."""
    shipped = Path("/etc/infiniband-diags/error_thresholds")
    if not shipped.exists():
        pytest.skip("infiniband-diags not installed")
    values = dict(line.lstrip("#").strip().split("=") for line in shipped.read_text().splitlines() if "=" in line)
    assert {k: int(v) for k, v in values.items() if k != "PortXmitWait"} == gates.PORT_ERROR_THRESHOLDS


# ---------------------------------------------------------------- the whole tier


def _tier2_results(plan: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """tier2 from recorded outputs: compute01 healthy, compute02 slow NVLink, a failing GPU, rail 3 degraded."""
    tests = plan["validation"]["tests"]
    fio_targets = tests["fio"]
    hosts: dict[str, Any] = {}
    intra = {"compute01": "all_reduce_h200_1node_dossier.txt", "compute02": "all_reduce_h100_1node_low_busbw.txt"}
    for host in ("compute01", "compute02"):
        pairs = [p for p in tests["ib_write_bw"] if p["client"] == host]
        ib = [
            _reg(_read("ib_write_bw_ndr_rail3_degraded.txt" if p["rail"] == 3 else "ib_write_bw_ndr_rail0_ok.txt"))
            for p in pairs
        ]
        hosts[host] = {
            "tools": dict(TOOLS),
            "runs": {
                "all_reduce_intra_node": _reg(_read(intra[host])),
                "dcgm_diag": _reg(_read("dcgm_diag_v3_real_pass.txt"))
                if host == "compute01"
                else _reg(_read("dcgm_diag_r3_h100_memory_fail.json"), rc=226),
                "fio_write": _loop(fio_targets, [_reg(_read("fio_write_4jobs_group.json"))] * len(fio_targets)),
                "fio_read": _loop(fio_targets, [_reg(_read("fio_read_4jobs_group.json"))] * len(fio_targets)),
                "ib_write_bw": _loop(pairs, ib),
                "ib_write_lat": _loop(
                    lat := [p for p in tests["ib_write_lat"] if p["client"] == host],
                    [_reg(_read("ib_write_lat_hdr_mlx5_sizes.txt"))] * len(lat),
                ),
                "port_errors": _loop(
                    ports := [p for p in tests["port_counters"] if p["host"] == host],
                    [
                        _reg(
                            (
                                PERFQUERY / ("ibsim-errors.txt" if p["hca"] == "mlx5_3" else "ibsim-clean.txt")
                            ).read_text()
                        )
                        for p in ports
                    ],
                ),
            },
        }
    cluster = {
        "tools": {"srun": True},
        "runs": {"all_reduce_inter_node": _reg(_read("all_reduce_h100_2x8_multisize.txt"))},
    }
    return hosts, cluster


def test_tier2_below_floor_report_fails(plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["tier2"]
    hosts, cluster = _tier2_results(plan)
    checks = acceptance.acceptance_checks(plan, hosts, cluster, dcgm_level=3)
    by = {(c["name"], tuple(c["nodes"])): c for c in checks}

    intra1 = by[("all_reduce_intra_node", ("compute01",))]
    intra2 = by[("all_reduce_intra_node", ("compute02",))]
    assert (intra1["status"], intra1["measured"], intra1["floor"]) == ("pass", 476.72, 460.0)
    assert (intra2["status"], intra2["measured"]) == ("fail", 299.51)

    inter = by[("all_reduce_inter_node", ("compute01", "compute02"))]
    assert (inter["status"], inter["measured"], inter["floor"]) == ("fail", 219.51, 340.0)
    assert inter["drain"] == []  # a cluster-wide shortfall drains no node

    ib = _by_name(checks, "ib_write_bw_rail3")
    assert [c["status"] for c in ib] == ["fail", "fail"] and ib[0]["floor"] == 375.0
    assert all(c["status"] == "pass" for c in _by_name(checks, "ib_write_bw_rail0"))
    assert len([c for c in checks if c["name"].startswith("ib_write_bw_rail")]) == 16

    [w] = _by_name(checks, "fio_write_checkpoints")
    [r] = _by_name(checks, "fio_read_checkpoints")
    assert (w["status"], w["measured"], w["floor"]) == ("fail", 3.442, 20)
    assert (r["status"], r["measured"], r["floor"]) == ("fail", 2.218, 40)
    assert {c["status"] for c in _by_name(checks, "fio_write_local_scratch")} == {"skipped"}

    dcgm = {c["nodes"][0]: c for c in _by_name(checks, "dcgm_diag_r3")}
    assert dcgm["compute01"]["status"] == "pass" and dcgm["compute02"]["status"] == "fail"

    lat = [c for c in checks if c["name"].startswith("ib_write_lat_rail")]
    assert len(lat) == 16 and {(c["status"], c["measured"]) for c in lat} == {("pass", 1.87)}
    ports = [c for c in checks if c["name"].startswith("port_errors_")]
    assert len(ports) == 16
    assert {c["nodes"][0] for c in ports if c["status"] == "fail"} == {"compute01", "compute02"}
    assert {c["name"] for c in ports if c["status"] == "fail"} == {"port_errors_mlx5_3"}

    report = acceptance_report.acceptance_report(plan, checks)
    assert report["summary"]["result"] == "fail"
    # intra, inter, rail3 x2, fio write+read, dcgm, port errors on mlx5_3 x2
    assert report["summary"]["fail"] == 1 + 1 + 2 + 2 + 1 + 2
    assert "tests" not in report["floors"] and report["floors"]["storage_write_gbps"] == 20
    drain = {d["node"]: d["reason"] for d in report["drain"]}
    assert drain["compute02"] == "gpucluster-validate: all_reduce_intra_node 299.51 < 460 (+4 more)"
    assert drain["compute01"] == "gpucluster-validate: ib_write_bw_rail3 196.41 < 375 (+2 more)"

    md = acceptance_report.report_markdown(report)
    assert md.startswith("# Acceptance report: tier2 (tier2)\n")
    assert "Result: **fail**" in md
    assert "| all_reduce_inter_node | compute01, compute02 | 219.51 | 340 | GB/s | fail | 219.51 < 340;" in md
    assert "| fio_write_checkpoints | compute01, compute02 | 3.442 | 20 | GB/s | fail |" in md
    assert "- compute02: gpucluster-validate: all_reduce_intra_node 299.51 < 460 (+4 more)" in md
    assert "| port_errors_mlx5_3 | compute01 | 2 over | infiniband-diags error_thresholds |  | fail |" in md
    json.dumps(report)  # plain data


def test_no_tools_is_skipped_never_pass(plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["tier3"]
    hosts = {h: {"tools": {}, "runs": {}} for h in ("compute01", "compute02", "compute03", "compute04")}
    checks = acceptance.acceptance_checks(plan, hosts, {"tools": {"srun": True}, "runs": {}})
    assert {c["status"] for c in checks} == {"skipped"}
    assert all(c["reason"].startswith("not installed") for c in checks)
    [inter] = _by_name(checks, "all_reduce_inter_node")
    assert inter["reason"] == "not installed: all_reduce_perf on compute01, compute02, compute03, compute04"
    report = acceptance_report.acceptance_report(plan, checks)
    assert report["summary"]["result"] == "incomplete" and report["summary"]["pass"] == 0
    assert report["drain"] == []


def test_a_host_without_results_fails(plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["tier2"]
    hosts, cluster = _tier2_results(plan)
    del hosts["compute02"]
    checks = acceptance.acceptance_checks(plan, hosts, cluster)
    lost = [c for c in checks if c["nodes"] == ["compute02"]]
    assert lost and {c["status"] for c in lost} <= {"fail", "skipped"}
    assert {c["status"] for c in lost if c["name"] in ("all_reduce_intra_node", "dcgm_diag")} == {"fail"}
    [w] = _by_name(checks, "fio_write_checkpoints")
    assert w["status"] == "fail" and "incomplete" in w["reason"]


def test_ib_write_bw_missing_on_one_end(plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["tier2"]
    hosts, cluster = _tier2_results(plan)
    hosts["compute02"]["tools"]["ib_write_bw"] = False
    checks = [c for c in acceptance.acceptance_checks(plan, hosts, cluster) if c["name"].startswith("ib_write_bw")]
    assert {c["status"] for c in checks} == {"skipped"}
    assert checks[0]["reason"].startswith("not installed: ib_write_bw on compute02 (compute01:mlx5_0 -> compute02")


def test_tier1_single_node_local_storage(plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["tier1"]
    target = plan["validation"]["tests"]["fio"]
    hosts = {
        "dgx01": {
            "tools": {"fio": True},
            "runs": {
                "fio_write": _loop(target, [_reg(_read("fio_write_4jobs_group.json"))]),
                "fio_read": _loop(target, [_reg(_read("fio_read_4jobs_group.json"))]),
            },
        }
    }
    checks = acceptance.acceptance_checks(plan, hosts, {"tools": {"srun": False}})
    names = [c["name"] for c in checks]
    assert "all_reduce_inter_node" not in names
    [ib] = _by_name(checks, "ib_write_bw")
    assert ib["status"] == "skipped" and ib["reason"] == "no pairs: no compute fabric"
    [w] = _by_name(checks, "fio_write_checkpoints")
    assert (w["status"], w["measured"], w["floor"], w["drain"]) == ("fail", 1.721, 7, ["dgx01"])


# ---------------------------------------------------------------- the sbatch template and the playbook


def test_sbatch_template_renders_the_plan_nccl_env(plans: dict[str, dict[str, Any]]) -> None:
    jinja2 = pytest.importorskip("jinja2")
    import shlex

    env = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["quote"] = shlex.quote
    src = (ROOT / "roles" / "head" / "templates" / "nccl-allreduce.sbatch.j2").read_text()
    text = env.from_string(src).render(gpucluster_host_plan=plans["tier3"])
    assert text.startswith("#!/bin/bash\n")
    assert "#SBATCH --nodes=4\n" in text and "#SBATCH --ntasks-per-node=8\n" in text
    assert "export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1\n" in text
    assert "export NCCL_CROSS_NIC=0\n" in text
    assert '-b "${MIN_BYTES:-1073741824}" -e "${MAX_BYTES:-8589934592}" -f 2 -g 1' in text
    assert any(
        f["dest"] == "/usr/local/share/gpucluster/nccl-allreduce.sbatch"
        for f in files_by_host(plans["tier3"])["head01"]
    )
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0


PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def _validate(tmp_path: Path, *extra: str) -> tuple[dict[str, Any], dict[tuple[str, tuple[str, ...]], Any], str]:
    """playbooks/validate.yml on this machine: tier2, every host on a local connection, the
    storage paths under tmp, lab mode (fio really runs, the lab creates the paths)."""
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "tier2", inv)
    storage = inv / "group_vars" / "all" / "storage.yml"
    data = yaml.safe_load(storage.read_text())
    data["gpucluster_storage"]["paths"] = {k: str(tmp_path / "shared" / k) for k in data["gpucluster_storage"]["paths"]}
    data["gpucluster_storage"]["local_scratch"] = str(tmp_path / "raid")
    # the paths stay on the NFS mount point (checkpoints off the shared file system are refused: inventory/rules.py)
    for export in data["gpucluster_storage"]["nfs"]["exports"]:
        export["mount_point"] = str(tmp_path / "shared")
    storage.write_text(yaml.safe_dump(data))
    # the lab's settings (enabled, nfs_server_impl: ganesha) come from the lab's own overlay, the only
    # inventory source they are accepted from (plugins/plugin_utils/inventory/trust.py)
    (inv / "group_vars" / "all" / "zz_test.yml").write_text(yaml.safe_dump({"ansible_connection": "local"}))
    out = tmp_path / "report"
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    argv = [
        PLAYBOOK,
        "-i",
        str(inv),
        "-i",
        "lab/overlay",
        "playbooks/validate.yml",
        "-e",
        f"validate_report_root={out}",
    ]
    argv += ["-e", "validate_fio_size=8m"] + [a for kv in extra for a in ("-e", kv)]
    run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    report = json.loads((out / "tier2" / "report.json").read_text())
    by = {(c["name"], tuple(c["nodes"])): c for c in report["checks"]}
    return report, by, run.stdout


@pytest.mark.skipif(not shutil.which("fio"), reason="fio is not installed")
def test_validate_playbook_runs_fio_for_real(tmp_path: Path) -> None:
    """Only fio present: it really runs and storage fails the tier floors; every other tool is
    skipped as not installed; the report and the raw outputs are written."""
    absent = "/nonexistent"
    report, by, _ = _validate(
        tmp_path,
        f"validate_srun={absent}/srun validate_all_reduce_perf={absent}/all_reduce_perf",
        f"validate_ib_write_bw={absent}/ib_write_bw validate_dcgmi={absent}/dcgmi",
        f"validate_ib_write_lat={absent}/ib_write_lat validate_perfquery={absent}/perfquery",
    )
    w = by[("fio_write_checkpoints", ("compute01", "compute02"))]
    assert w["status"] == "fail" and w["measured"] > 0 and w["floor"] == 20
    assert "sum of 2 concurrent clients" in w["reason"]
    for name in ("all_reduce_intra_node", "dcgm_diag_r2"):
        assert by[(name, ("compute01",))]["status"] == "skipped"
        assert by[(name, ("compute01",))]["reason"].startswith("not installed")
    assert by[("all_reduce_inter_node", ("compute01", "compute02"))]["status"] == "skipped"
    assert {c["status"] for c in report["checks"] if c["name"].startswith("ib_write_bw")} == {"skipped"}
    for prefix in ("ib_write_lat", "port_errors"):
        assert {c["status"] for c in report["checks"] if c["name"].startswith(prefix)} == {"skipped"}
    assert by[("port_errors_mlx5_0", ("compute01",))]["reason"].startswith("not installed: perfquery")
    local = by[("fio_read_local_scratch", ("compute02",))]
    assert local["status"] == "skipped" and local["measured"] > 0
    assert report["summary"]["result"] == "fail" and report["lab"] is True
    out = tmp_path / "report" / "tier2"
    assert (out / "report.md").read_text().startswith("# Acceptance report: tier2 (tier2)")
    raw = sorted(p.name for p in (out / "raw" / "compute01").iterdir())
    assert raw == [
        "fio_read-checkpoints.out",
        "fio_read-local_scratch.out",
        "fio_write-checkpoints.out",
        "fio_write-local_scratch.out",
    ]
    # fio cleaned up after itself; the lab created the paths
    assert not any((tmp_path / "shared" / "checkpoints" / ".gpucluster-validate").iterdir())


_STAND_IN = """#!/bin/sh
# stand-in for {tool}: log the arguments, print a recorded output
echo "$0 $*" >> {log}
{body}
"""


@pytest.mark.skipif(not shutil.which("fio"), reason="fio is not installed")
def test_validate_playbook_with_stand_in_tools(tmp_path: Path) -> None:
    """all_reduce_perf, ib_write_bw, dcgmi, srun and scontrol replaced by scripts that replay the
    recorded outputs: every command line is built for real, the gates see the recorded numbers,
    and validate_drain_failed drains the failing nodes with the check as the reason."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "argv.log"
    bodies = {
        "all_reduce_perf": f'cat "{DATA}/all_reduce_h200_1node_dossier.txt"',
        "srun": f'cat "{DATA}/all_reduce_h100_2x8_multisize.txt"',
        "dcgmi": f'cat "{DATA}/dcgm_diag_r3_h100_memory_fail.json"; exit 226',
        # a client names the server address last; the server only prints its header
        "ib_write_bw": (
            'for a; do last="$a"; done\n'
            'case "$last" in *.*.*.*) ;; *) echo " WAITING (server)"; exit 0;; esac\n'
            f'case "$*" in *"-d mlx5_3 "*) cat "{DATA}/ib_write_bw_ndr_rail3_degraded.txt";; '
            f'*) cat "{DATA}/ib_write_bw_ndr_rail0_ok.txt";; esac'
        ),
        "ib_write_lat": (
            'for a; do last="$a"; done\n'
            'case "$last" in *.*.*.*) ;; *) echo " WAITING (server)"; exit 0;; esac\n'
            f'cat "{DATA}/ib_write_lat_hdr_mlx5_sizes.txt"'
        ),
        # recorded on ibsim: one port with errors (mlx5_3), the others clean
        "perfquery": (
            f'case "$*" in *"-C mlx5_3 "*) cat "{PERFQUERY}/ibsim-errors.txt";; '
            f'*) cat "{PERFQUERY}/ibsim-clean.txt";; esac'
        ),
        "scontrol": "exit 0",
    }
    paths = {}
    for tool, body in bodies.items():
        script = bin_dir / tool
        script.write_text(_STAND_IN.format(tool=tool, log=log, body=body))
        script.chmod(0o755)
        paths[tool] = str(script)
    report, by, _ = _validate(
        tmp_path,
        f"validate_all_reduce_perf={paths['all_reduce_perf']} validate_srun={paths['srun']}",
        f"validate_ib_write_bw={paths['ib_write_bw']} validate_dcgmi={paths['dcgmi']}",
        f"validate_scontrol={paths['scontrol']}",
        f"validate_ib_write_lat={paths['ib_write_lat']} validate_perfquery={paths['perfquery']}",
        "validate_port_sweep=true",  # the lab default is off: a container has no HCA
        "validate_ib_duration_s=1 validate_drain_failed=true validate_dcgm_level=3",
    )
    intra = by[("all_reduce_intra_node", ("compute01",))]
    assert (intra["status"], intra["measured"], intra["floor"]) == ("pass", 476.72, 460.0)
    inter = by[("all_reduce_inter_node", ("compute01", "compute02"))]
    assert (inter["status"], inter["measured"], inter["floor"]) == ("fail", 219.51, 340.0)
    ib = [c for c in report["checks"] if c["name"].startswith("ib_write_bw_rail")]
    assert len(ib) == 16
    assert {c["name"] for c in ib if c["status"] == "fail"} == {"ib_write_bw_rail3"}
    assert {c["measured"] for c in ib if c["status"] == "pass"} == {391.63}
    dcgm = by[("dcgm_diag_r3", ("compute02",))]
    assert dcgm["status"] == "fail" and dcgm["reason"].startswith("failed: memory (GPU 5)")
    assert {d["node"] for d in report["drain"]} == {"compute01", "compute02"}

    calls = log.read_text().splitlines()
    intra_call = f"{paths['all_reduce_perf']} -b 1073741824 -e 8589934592 -f 2 -g 8"
    assert calls.count(intra_call) == 2
    srun = next(c for c in calls if c.startswith(paths["srun"]))
    assert srun == (
        f"{paths['srun']} --nodes=2 --nodelist=compute[01-02] --ntasks-per-node=8 --gres=gpu:8 --mpi=pmix"
        f" --exclusive {paths['all_reduce_perf']} -b 1073741824 -e 8589934592 -f 2 -g 1"
    )
    # against the host engine's root-only socket (plan dcgm.hostengine)
    assert calls.count(f"{paths['dcgmi']} diag --host unix:///run/nvidia-dcgm/nv-hostengine -r 3 -j") == 2
    ib_calls = [c for c in calls if c.startswith(paths["ib_write_bw"])]
    clients = [c for c in ib_calls if c.split()[-1].count(".") == 3]  # the server's address comes last
    servers = [c for c in ib_calls if c not in clients]
    assert len(servers) == len(clients) == 16
    server = cluster_plan(*load_inventory("tier2"))["hosts"]["compute02"]["addresses"]["management"]
    assert f"{paths['ib_write_bw']} -d mlx5_3 -p 18518 -F --report_gbits -D 1 -s 1048576 {server}" in clients
    lat_calls = [c for c in calls if c.startswith(paths["ib_write_lat"])]
    lat_clients = [c for c in lat_calls if c.split()[-1].count(".") == 3]
    assert len(lat_clients) == len(lat_calls) - len(lat_clients) == 16
    assert f"{paths['ib_write_lat']} -d mlx5_3 -p 18618 -F -s 2 -n 1000 {server}" in lat_clients
    lat = [c for c in report["checks"] if c["name"].startswith("ib_write_lat_rail")]
    assert len(lat) == 16 and {(c["status"], c["measured"]) for c in lat} == {("pass", 1.87)}
    pq_calls = [c for c in calls if c.startswith(paths["perfquery"])]
    assert len(pq_calls) == 16 and f"{paths['perfquery']} -C mlx5_3 -P 1" in pq_calls
    ports = {(c["name"], c["nodes"][0]): c["status"] for c in report["checks"] if c["name"].startswith("port_errors")}
    assert len(ports) == 16 and {k for k, v in ports.items() if v == "fail"} == {
        ("port_errors_mlx5_3", "compute01"),
        ("port_errors_mlx5_3", "compute02"),
    }
    drains = sorted(c for c in calls if c.startswith(paths["scontrol"]))
    # each node: rail 3 as client and as server, dcgmi (the stand-in fails on both nodes), mlx5_3's counters
    assert drains == [
        f"{paths['scontrol']} update nodename={node} state=drain"
        " reason=gpucluster-validate: ib_write_bw_rail3 196.41 < 375 (+3 more)"
        for node in ("compute01", "compute02")
    ]


# ---------------------------------------------------------------- MIG nodes and the whole-GPU tests


def _mig_on_compute01(tier: str = "tier3") -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    policy = {**(site.get("gpucluster_gpu_policy") or {})}
    policy["mig"] = [{"nodes": ["compute01"], "gpus": "all", "profiles": ["3g.40gb", "3g.40gb"]}]
    site["gpucluster_gpu_policy"] = policy
    return cluster_plan(site, groups)


def test_mig_nodes_are_left_out_of_whole_gpu_all_reduce() -> None:
    plan = _mig_on_compute01()
    ar = plan["validation"]["tests"]["all_reduce"]
    compute = [h for h, v in plan["hosts"].items() if "compute" in v["roles"]]
    assert ar["excluded"] == {"compute01": acceptance.MIG_EXCLUDED}
    assert ar["nodes"] == len(compute) - 1 and ar["ranks"] == ar["nodes"] * ar["gpus_per_node"]
    assert "compute01" not in ar["hostlist"] and ar["inter_node"]
    checks = acceptance.acceptance_checks(plan, {})
    intra = [c["nodes"] for c in checks if c["name"] == "all_reduce_intra_node"]
    assert ["compute01"] not in intra and len(intra) == len(compute) - 1
    inter = next(c for c in checks if c["name"] == "all_reduce_inter_node")
    assert "compute01" not in inter["nodes"]
    assert any(c["name"] == "dcgm_diag" and c["nodes"] == ["compute01"] for c in checks)  # still checked
    report = acceptance_report.acceptance_report(plan, checks)
    assert report["all_reduce_nodes"]["excluded"] == {"compute01": acceptance.MIG_EXCLUDED}
    text = acceptance_report.report_markdown(report)
    assert f"tested on {len(compute) - 1} node(s)" in text and f"- compute01: {acceptance.MIG_EXCLUDED}" in text


def test_mig_example_tests_no_whole_gpu_all_reduce_and_says_why() -> None:
    plan = cluster_plan(*load_inventory("examples/tier2-mig"))
    ar = plan["validation"]["tests"]["all_reduce"]
    assert sorted(ar["excluded"]) == ["compute01", "compute02"]
    assert ar["nodes"] == 0 and not ar["inter_node"]
    assert not [c for c in acceptance.acceptance_checks(plan, {}) if c["name"].startswith("all_reduce")]


def test_without_mig_every_node_is_tested() -> None:
    plan = cluster_plan(*load_inventory("tier3"))
    ar = plan["validation"]["tests"]["all_reduce"]
    assert ar["excluded"] == {} and ar["hostlist"] == plan["cluster"]["compute_hostlist"]
    assert "Left out" not in acceptance_report.report_markdown(acceptance_report.acceptance_report(plan, []))
