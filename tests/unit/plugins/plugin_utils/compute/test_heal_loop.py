"""The head's self-healing loop (roles/head/files/gpucluster-heal) and the node's active check
(roles/compute/files/gpucluster-activecheck), loaded as modules.

Inputs: recorded tool output (tests/data/acceptance: nccl-tests, perftest, dcgmi), `scontrol show node
--oneliner` in the recorded Slurm layout (tests/data/healing), and the plan's healing section
(the tier4 plan's, plugins/plugin_utils/compute/healing.py).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    ROOT,
    cluster_plan,
    load_inventory,
    load_script,
    render_role_template,
    render_role_template_with_filters,
)

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import healing
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host


def load_with_dataclasses(path: Path, name: str) -> Any:
    """load_script, registered in sys.modules first (dataclasses look their module up there)."""
    loader = SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


heal = load_with_dataclasses(ROOT / "roles" / "head" / "files" / "gpucluster-heal", "gpucluster_heal")
ac = load_script(ROOT / "roles" / "compute" / "files" / "gpucluster-activecheck", "gpucluster_activecheck")
hc = load_script(ROOT / "roles" / "compute" / "files" / "gpucluster-healthcheck", "gpucluster_healthcheck_a")
DATA = ROOT / "tests" / "data"
NOW = 1_800_000_000.0


@pytest.fixture(scope="module")
def tier4() -> dict[str, Any]:
    return cluster_plan(*load_inventory("tier4"))


@pytest.fixture
def cfg(tier4: dict[str, Any]) -> dict[str, Any]:
    """The tier4 plan's healing section (what the head role renders to /etc/gpucluster/heal.json)."""
    return copy.deepcopy(tier4["healing"])


@pytest.fixture
def nodes() -> list[Any]:
    return heal.parse_nodes((DATA / "healing" / "scontrol-show-node-oneliner.txt").read_text())


# ---------------------------------------------------------------- parsers


def test_nodes_from_scontrol(nodes: list[Any]) -> None:
    by = {n.name: n for n in nodes}
    assert by["compute02"].reason == "operator: replace DIMM" and by["compute02"].drained
    assert by["compute03"].reason == "gpucluster: gpu3 xid 79"
    assert by["compute01"].idle and not by["compute06"].idle and not by["compute03"].idle
    recorded = heal.parse_nodes((DATA / "slurm" / "scontrol-show-node-d-oneliner-after-handback.txt").read_text())
    assert any(n.drained and n.reason == "operator: replace DIMM" for n in recorded)


def test_classes_by_xid_recovery_action(cfg: dict[str, Any]) -> None:
    classes = cfg["remediation"]["classes"]
    assert heal.classify("gpucluster: gpu3 xid 79", "gpucluster:", classes)[:2] == ("xid", "reboot")
    assert heal.classify("gpucluster: gpu0 xid 48", "gpucluster:", classes)[:2] == ("xid", "gpu_reset")
    assert heal.classify("gpucluster: gpu0 xid 13", "gpucluster:", classes)[:2] == ("xid", "none")
    assert heal.classify("gpucluster: gpu0 xid 999", "gpucluster:", classes)[:2] == ("xid", "replace")
    assert heal.classify("gpucluster: check allreduce 312.4 GB/s < floor 460 GB/s", "gpucluster:", classes)[:2] == (
        "check",
        "reboot",
    )
    assert heal.classify("gpucluster: something new", "gpucluster:", classes)[:2] == ("unknown", "replace")


# ---------------------------------------------------------------- remediation policy


def test_operator_drains_are_never_touched(cfg: dict[str, Any], nodes: list[Any]) -> None:
    steps, waiting = heal.plan_remediation(nodes, {}, cfg, NOW)
    touched = {s.node for s in steps} | set(waiting)
    assert "compute02" not in touched
    assert {s.node: s.action for s in steps} == {"compute03": "reboot", "compute04": "reboot"}


def test_never_more_than_nodes_at_once_the_rest_waits(cfg: dict[str, Any], nodes: list[Any]) -> None:
    state = {"remediating": {"compute09": {"step": "reboot"}}}
    steps, waiting = heal.plan_remediation(nodes, state, cfg, NOW)
    assert [s.node for s in steps] == ["compute03"] and set(waiting) == {"compute04", "compute05"}
    cfg["remediation"]["nodes_at_once"] = 1
    steps, waiting = heal.plan_remediation(nodes, copy.deepcopy(state), cfg, NOW)
    assert steps == [] and len(waiting) == 3


def test_retries_within_the_window_then_replace(cfg: dict[str, Any], nodes: list[Any]) -> None:
    day = 86400
    state: dict[str, Any] = {"tries": {"compute03": {"xid": [NOW - 2 * day, NOW - day]}}}
    steps, _ = heal.plan_remediation(nodes, state, cfg, NOW)
    rep = next(s for s in steps if s.node == "compute03")
    assert rep.action == "replace" and rep.commands[0][-1].startswith("reason=gpucluster: replace: Replace compute03")
    old = {"tries": {"compute03": {"xid": [NOW - 30 * day, NOW - 20 * day]}}}  # outside window_s: a new try
    steps, _ = heal.plan_remediation(nodes, old, cfg, NOW)
    assert next(s for s in steps if s.node == "compute03").action == "reboot"


def test_a_replace_drain_is_final(cfg: dict[str, Any]) -> None:
    node = heal.Node("compute07", "IDLE+DRAIN", "gpucluster: replace: Replace compute07: gpu1 xid 79")
    assert heal.plan_remediation([node], {}, cfg, NOW) == ([], [])


def test_reboot_then_validate_then_resume(cfg: dict[str, Any]) -> None:
    work = {"class": "xid", "action": "reboot", "step": "reboot", "since": NOW, "try": 1}
    rebooting = heal.Node("compute05", "IDLE+DRAIN+REBOOT_ISSUED", "gpucluster: reboot: gpu1 xid 79")
    assert heal.advance(rebooting, work, (None, None), cfg, NOW + 60) == ("wait", None)
    back = heal.Node("compute05", "IDLE+DRAIN", "gpucluster: reboot: gpu1 xid 79")
    outcome, step = heal.advance(back, work, (None, None), cfg, NOW + 120)
    assert outcome == "validate" and step.event == "validate"
    assert heal.advance(rebooting, work, (None, None), cfg, NOW + 1801)[0] == "replace"
    valid = {**work, "step": "validate", "job": "41"}
    assert heal.advance(back, valid, ("RUNNING", None), cfg, NOW + 200) == ("wait", None)
    outcome, step = heal.advance(back, valid, ("COMPLETED", {"result": "pass"}), cfg, NOW + 300)
    assert outcome == "done" and step.event == "resume"
    assert heal.advance(back, valid, ("FAILED", {"drain": "gpucluster: check dcgm r2 failed: pcie"}), cfg, NOW)[0] == (
        "failed"
    )


def test_validation_commands_reserve_the_node_for_root(cfg: dict[str, Any]) -> None:
    create, resume = heal.validate_commands(cfg, "compute03")
    assert "reservationname=gpucluster-heal-compute03" in create and "users=root" in create
    assert "flags=maint,ignore_jobs" in create
    assert f"duration={-(-cfg['remediation']['validate_timeout_s'] // 60)}" in create
    assert resume == ["scontrol", "update", "nodename=compute03", "state=resume"]
    job = heal.sbatch(cfg, "compute03", "gpucluster-heal-compute03", reset=True)
    assert "--reservation=gpucluster-heal-compute03" in job and job[-1].startswith("--wrap=nvidia-smi -r && ")


# ---------------------------------------------------------------- active check schedule


def test_checks_only_idle_nodes_within_the_limit(cfg: dict[str, Any], nodes: list[Any]) -> None:
    more = [*nodes, heal.Node("compute07", "IDLE", None), heal.Node("compute08", "IDLE", None)]
    due = heal.plan_checks(more, {}, cfg, NOW)
    assert due == ["compute01", "compute07"]  # nodes_at_once 2; compute06 runs a job, the others are drained
    state = {"checks": {"compute01": {"job": "7"}, "compute07": {"last": NOW - 60}}}
    assert heal.plan_checks(more, state, cfg, NOW) == ["compute08"]
    cfg["active"]["enabled"] = False
    assert heal.plan_checks(more, {}, cfg, NOW) == []


def test_check_job_uses_the_maintenance_qos_and_the_budgets(cfg: dict[str, Any]) -> None:
    job = heal.sbatch(cfg, "compute01")
    assert "--qos=gpucluster-check" in job and "--nodelist=compute01" in job and "--exclusive" in job
    budgets = sum(c["budget_s"] for c in cfg["active"]["checks"].values() if c["enabled"])
    assert f"--time={-(-budgets // 60)}" in job
    assert job[-1] == "--wrap=/usr/local/sbin/gpucluster-healthcheck --mode active"


# ---------------------------------------------------------------- dry run, history, metrics


def run_loop(tmp_path: Path, cfg: dict[str, Any], dry_run: bool, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    cfg = {**cfg, "state_dir": str(tmp_path / "state"), "history": str(tmp_path / "h.jsonl")}
    cfg["metrics"] = str(tmp_path / "heal.prom")
    calls: list[list[str]] = []
    text = (DATA / "healing" / "scontrol-show-node-oneliner.txt").read_text()

    def fake(cmd: list[str]) -> Any:
        calls.append(cmd)
        out = text if cmd[:3] == ["scontrol", "show", "node"] else ("42\n" if cmd[0] == "sbatch" else "")
        return heal.subprocess.CompletedProcess(cmd, 0, out, "")

    monkeypatch.setattr(heal, "_run", fake)
    heal.Loop(cfg, dry_run, NOW).once()
    return calls


def test_dry_run_lists_the_actions_and_runs_none(
    cfg: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = run_loop(tmp_path, cfg, True, monkeypatch)
    out = capsys.readouterr().out
    assert calls == [["scontrol", "show", "node", "--oneliner"]]
    assert not (tmp_path / "state").exists() and not (tmp_path / "h.jsonl").exists()
    remediate = [json.loads(x) for x in out.splitlines() if x.startswith("{") and '"remediate"' in x]
    assert [e["node"] for e in remediate] == ["compute03", "compute04"] and all(e["dry_run"] for e in remediate)
    assert "waiting: compute05" in out
    assert "would run: scontrol reboot 'reason=gpucluster: reboot: gpu3 xid 79' compute03" in out


def test_a_run_writes_history_state_and_metrics(
    cfg: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = run_loop(tmp_path, cfg, False, monkeypatch)
    assert ["scontrol", "reboot", "reason=gpucluster: reboot: gpu3 xid 79", "compute03"] in calls
    assert not any("compute02" in " ".join(c) for c in calls)  # the operator's drain
    events = [json.loads(x) for x in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert [(e["node"], e["event"]) for e in events if e["node"] == "compute03"] == [
        ("compute03", "drain"),
        ("compute03", "remediate"),
        ("compute03", "reboot"),
    ]
    assert set(events[0]) == {"time", "node", "event", "class", "detail", "action", "try", "dry_run", "by"}
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    assert state["remediating"]["compute03"]["step"] == "reboot" and state["checks"]["compute01"]["job"] == "42"
    prom = (tmp_path / "heal.prom").read_text()
    assert 'gpucluster_heal_node_state{node="compute03",state="remediating"} 1' in prom
    assert f"gpucluster_heal_last_run_timestamp_seconds {int(NOW)}" in prom
    # a restarted loop resumes: the next run does not reboot compute03 again
    calls = run_loop(tmp_path, cfg, False, monkeypatch)
    assert not any(c[:2] == ["scontrol", "reboot"] for c in calls)


def test_metrics_equal_the_engines(cfg: dict[str, Any]) -> None:
    assert heal.METRICS == healing.METRICS
    assert sorted(heal.METRICS) == cfg["metric_names"]


def test_job_state_and_result_from_scontrol() -> None:
    line = (
        "JobId=42 JobName=gpucluster-check-compute01 JobState=COMPLETED Reason=None"
        ' Comment={"node":"compute01","result":"pass"} StdErr=/dev/null'
    )
    assert heal.parse_job(line) == ("COMPLETED", {"node": "compute01", "result": "pass"})
    assert heal.parse_sacct_state("CANCELLED by 0\n") == "CANCELLED"


# ---------------------------------------------------------------- the active check


def test_allreduce_gate_on_recorded_output() -> None:
    ok = ac.parse_all_reduce((DATA / "acceptance" / "all_reduce_h200_1node_dossier.txt").read_text())
    assert ok == pytest.approx(477.416)
    low = ac.parse_all_reduce((DATA / "acceptance" / "all_reduce_h100_1node_low_busbw.txt").read_text())
    spec = {"floor": 460.0, "unit": "GB/s"}
    res = ac.gate("allreduce", low, spec)
    assert res["result"] == "fail" and res["why"] == f"check allreduce {low:g} GB/s < floor 460 GB/s"
    with pytest.raises(ValueError):
        ac.parse_all_reduce((DATA / "acceptance" / "all_reduce_h100_1node_wrong.txt").read_text())


def test_allreduce_agrees_with_the_validation_parser() -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import parsers

    for name in ("all_reduce_h200_1node_dossier.txt", "all_reduce_h100_1node_low_busbw.txt"):
        text = (DATA / "acceptance" / name).read_text()
        assert ac.parse_all_reduce(text) == parsers.parse_all_reduce(text)["avg_busbw"]
    for name in ("ib_write_bw_ndr_rail0_ok.txt", "ib_write_bw_ndr_rail3_degraded.txt"):
        text = (DATA / "acceptance" / name).read_text()
        assert ac.parse_ib_write_bw(text) == parsers.parse_ib_write_bw(text)["bw_avg_gbps"]


def test_dcgm_and_ib_gates() -> None:
    assert ac.parse_dcgm_diag((DATA / "acceptance" / "dcgm_diag_v3_real_pass.txt").read_text()) == []
    assert ac.parse_dcgm_diag((DATA / "acceptance" / "dcgm_diag_r3_h100_memory_fail.json").read_text())
    bw = ac.parse_ib_write_bw((DATA / "acceptance" / "ib_write_bw_ndr_rail0_ok.txt").read_text())
    assert ac.gate("ib_write_bw", bw, {"floor": 380.0, "unit": "Gb/s"})["result"] == "pass"


def test_a_missing_tool_is_never_a_pass(cfg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    cfg["active"]["checks"]["storage_read"]["enabled"] = False
    args = ac._parser().parse_args([])
    results = ac.run_checks(args, cfg["active"], "compute01")
    assert {r["check"]: r["result"] for r in results} == {
        "allreduce": "not installed",
        "dcgm": "not installed",
    }  # ib_write_bw: planned off (a two-node test, healing.IB_WRITE_BW_OFF)
    assert ac.overall(results) == "incomplete" and ac.reason_of("gpucluster:", results) is None


def test_a_failed_check_drains_with_the_contract_reason(tmp_path: Path, cfg: dict[str, Any]) -> None:
    cfg["active"]["checks"]["storage_read"]["enabled"] = False
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    log = tmp_path / "calls"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(
        f'#!/bin/sh\necho "$@" >> {log}\n[ "$1" = show ] && echo "NodeName=compute01 State=IDLE"\nexit 0\n'
    )
    scontrol.chmod(0o755)
    args = [
        "--config", str(tmp_path / "cfg.json"), "--health-config", str(tmp_path / "none.json"), "--node", "compute01",
        "--scontrol", str(scontrol),
        "--allreduce-output", str(DATA / "acceptance" / "all_reduce_h100_1node_low_busbw.txt"),
        "--dcgm-output", str(DATA / "acceptance" / "dcgm_diag_v3_real_pass.txt"),
    ]  # fmt: skip
    assert ac.main(args) == 1
    drain = [x for x in log.read_text().splitlines() if x.startswith("update")]
    assert len(drain) == 1 and "reason=gpucluster: check allreduce " in drain[0] and "< floor 460 GB/s" in drain[0]
    assert ac.drain_action("IDLE+DRAIN", "operator: fan", "gpucluster: check x", "gpucluster:") is None


def test_healthcheck_hands_the_active_mode_over() -> None:
    assert hc.active_argv(["--mode", "active", "--node", "n1"]) == ["--node", "n1"]
    assert hc.active_argv(["--mode=active"]) == []
    assert hc.active_argv(["--mode", "epilog"]) is None


def test_storage_read_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ac, "PROBE_BYTES", 2 * ac.BLOCK)
    res = ac.run_storage_read({"path": str(tmp_path), "floor": 0.0, "unit": "GB/s"}, "compute01", None)
    assert res["result"] == "pass" and res["value"] > 0
    assert (tmp_path / "gpucluster-activecheck-compute01.probe").stat().st_size == 2 * ac.BLOCK
    missing = ac.run_storage_read({"path": str(tmp_path / "no"), "floor": 1.0}, "compute01", None)
    assert missing["result"] == "fail" and missing["why"].startswith("check storage_read failed: ")


# ---------------------------------------------------------------- roles


def test_slurm_conf_reboots_through_the_real_program(tier4: dict[str, Any]) -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import settings

    conf = render_role_template("slurm", "slurm.conf.j2", tier4, "head01")
    assert "\nRebootProgram=/usr/sbin/reboot\n" in conf
    timeout = int(conf.split("\nResumeTimeout=")[1].split()[0])
    assert timeout == settings.RESUME_TIMEOUT_S == healing.REBOOT_TIMEOUT_RANGE_S[1]
    assert timeout >= tier4["healing"]["remediation"]["reboot_timeout_s"]  # the loop decides first


def test_the_head_runs_the_loop_every_interval_as_root(tier4: dict[str, Any]) -> None:
    head = tier4["slurm"]["controller"]
    service = render_role_template("head", "gpucluster-heal.service.j2", tier4, head)
    timer = render_role_template("head", "gpucluster-heal.timer.j2", tier4, head)
    assert f"ExecStart={tier4['healing']['program']} --config /etc/gpucluster/heal.json" in service
    assert "User=" not in service
    assert f"OnUnitActiveSec={tier4['healing']['remediation']['interval_s']}s" in timer
    heal_json = render_role_template_with_filters("head", "heal.json.j2", tier4, head)
    assert json.loads(heal_json) == json.loads(json.dumps(tier4["healing"]))
    dests = {f["dest"] for f in files_by_host(tier4)[head]}
    assert {"/usr/local/sbin/gpucluster-heal", "/etc/gpucluster/heal.json"} <= dests
    assert {"/etc/systemd/system/gpucluster-heal.service", "/etc/systemd/system/gpucluster-heal.timer"} <= dests
    node = {f["dest"] for f in files_by_host(tier4)["compute01"]}
    assert {"/usr/local/sbin/gpucluster-activecheck", "/etc/gpucluster/activecheck.json"} <= node
    assert (
        ac.DEFAULT_CONFIG == "/etc/gpucluster/activecheck.json" and heal.DEFAULT_CONFIG == "/etc/gpucluster/heal.json"
    )
    assert Path(tier4["healing"]["active"]["program"]).with_name(hc.ACTIVE_PROGRAM) == Path(
        "/usr/local/sbin/gpucluster-activecheck"
    )
