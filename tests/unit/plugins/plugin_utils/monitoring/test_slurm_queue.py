"""The head's Slurm queue exporter: the script (roles/head/files/gpucluster-slurm-metrics, loaded as a
module) on recorded Slurm 22.05 output, its atomic write, its units, and the plan's settings
(plugins/plugin_utils/monitoring/slurm_queue.py)."""

from __future__ import annotations

import copy
import os
import re
import stat
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, cluster_plan, load_inventory, load_script, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import slurm_queue
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

SCRIPT = ROOT / "roles" / "head" / "files" / "gpucluster-slurm-metrics"

# squeue --noheader --all --array --format=%T|%P|%r (Slurm 22.05): array tasks one row each, a
# multi-partition pending job lists its partitions comma-separated
SQUEUE = """RUNNING|gpu|None
RUNNING|gpu|None
PENDING|gpu|Resources
PENDING|gpu|Priority
PENDING|gpu|Priority
PENDING|gpu,debug|QOSMaxGRESPerUser
COMPLETING|gpu|None
"""
# sinfo --noheader --Node --format=%N|%T: node02 is in two partitions (listed twice, counted once)
SINFO_NODES = """node01|allocated
node02|mixed
node02|mixed
node03|idle
node04|drained
node05|down*
node06|idle~
"""
SINFO_PARTITIONS = "gpu\ndebug\n"
# scontrol show node --oneliner (abridged to the fields read; real lines carry ~40 fields)
SCONTROL = """\
NodeName=node01 CfgTRES=cpu=224,mem=2000G,billing=224,gres/gpu=8 AllocTRES=cpu=224,gres/gpu=8 State=ALLOCATED
NodeName=node02 CfgTRES=cpu=224,mem=2000G,billing=224,gres/gpu=8 AllocTRES=cpu=16,gres/gpu=2 State=MIXED
NodeName=node03 CfgTRES=cpu=224,mem=2000G,billing=224,gres/gpu:h100=8 AllocTRES= State=IDLE
NodeName=node04 CfgTRES=cpu=224,mem=2000G,billing=224 AllocTRES= State=IDLE+DRAIN
"""


sm = load_script(SCRIPT, "gpucluster_slurm_metrics")


@cache
def _plan(tier: str) -> dict[str, Any]:
    return cluster_plan(*load_inventory(tier))


def _series(text: str) -> dict[str, float]:
    """``{'name{labels}': value}`` of an exposition text (comments dropped)."""
    rows = [line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#")]
    return {k: float(v) for k, v in rows}


def test_squeue_by_state_partition_and_reason() -> None:
    jobs, reasons = sm.parse_squeue(SQUEUE)
    assert jobs[("RUNNING", "gpu")] == 2 and jobs[("PENDING", "gpu")] == 3 and jobs[("COMPLETING", "gpu")] == 1
    assert jobs[("PENDING", "gpu,debug")] == 1
    assert reasons == {"Resources": 1, "Priority": 2, "QOSMaxGRESPerUser": 1}


def test_sinfo_counts_each_node_once_without_flags() -> None:
    states, not_responding, names = sm.parse_sinfo(SINFO_NODES)
    assert states == {"allocated": 1, "mixed": 1, "idle": 2, "drained": 1, "down": 1}
    assert sum(states.values()) == len(names) == 6
    assert not_responding == 1


def test_gpus_from_tres() -> None:
    assert sm.tres_gpus("cpu=2,mem=1G,gres/gpu=8") == 8
    assert sm.tres_gpus("cpu=2,gres/gpu:h100=4,gres/gpu:a100=2") == 6  # typed only: their sum
    assert sm.tres_gpus("cpu=2,gres/gpu=8,gres/gpu:h100=8") == 8  # untyped wins, no double count
    assert sm.tres_gpus("cpu=2,mem=1G") == 0 and sm.tres_gpus("") == 0
    assert sm.parse_scontrol_nodes(SCONTROL) == (24, 10)


def test_bad_rows_are_refused() -> None:
    with pytest.raises(sm.SlurmError, match="squeue"):
        sm.parse_squeue("RUNNING gpu None\n")
    with pytest.raises(sm.SlurmError, match="sinfo"):
        sm.parse_sinfo("|idle\n")


def test_exposition_has_every_metric_with_help_type_and_zero_filled_states() -> None:
    text = sm.exposition(sm.samples_from(SQUEUE, SINFO_NODES, SINFO_PARTITIONS, SCONTROL))
    series = _series(text)
    assert series['gpucluster_slurm_jobs{partition="gpu",state="running"}'] == 2
    assert series['gpucluster_slurm_jobs{partition="gpu,debug",state="pending"}'] == 1
    assert series['gpucluster_slurm_jobs{partition="debug",state="running"}'] == 0  # zero-filled
    assert series['gpucluster_slurm_pending_jobs{reason="Priority"}'] == 2
    assert series['gpucluster_slurm_nodes{state="idle"}'] == 2
    assert series["gpucluster_slurm_gpus_total"] == 24 and series["gpucluster_slurm_gpus_allocated"] == 10
    assert series["gpucluster_slurm_exporter_success"] == 1
    names = {re.split(r"[{ ]", k)[0] for k in series}
    assert names == set(sm.METRICS)
    for name, (kind, _help) in sm.METRICS.items():
        assert f"# TYPE {name} {kind}\n" in text and f"# HELP {name} " in text


def test_label_values_are_escaped() -> None:
    text = sm.exposition({"gpucluster_slurm_pending_jobs": [({"reason": 'a"b\\c'}, 1)]})
    assert 'gpucluster_slurm_pending_jobs{reason="a\\"b\\\\c"} 1' in text


def test_main_writes_atomically_and_reports_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "gpucluster_slurm.prom"
    outputs = {"squeue": SQUEUE, "sinfo": SINFO_NODES, "scontrol": SCONTROL}

    def fake_run(argv: list[str]) -> str:
        return SINFO_PARTITIONS if "--format=%R" in argv else outputs[argv[0]]

    monkeypatch.setattr(sm, "run", fake_run)
    assert sm.main(["--output", str(out)]) == 0
    assert _series(out.read_text())["gpucluster_slurm_gpus_total"] == 24
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == [out.name]  # no temporary file left behind

    def failing(argv: list[str]) -> str:
        raise sm.SlurmError("squeue: exit 1: slurm_load_jobs error: Unable to contact slurm controller")

    monkeypatch.setattr(sm, "run", failing)
    assert sm.main(["--output", str(out)]) == 1
    assert _series(out.read_text()) == {"gpucluster_slurm_exporter_success": 0.0}  # no stale queue numbers
    assert os.listdir(tmp_path) == [out.name]


def test_run_turns_a_missing_command_into_a_slurm_error() -> None:
    with pytest.raises(sm.SlurmError, match="no-such-slurm-command"):
        sm.run(["no-such-slurm-command"])


def test_engine_reads_the_scripts_metric_definition() -> None:
    assert slurm_queue.exporter_metrics() == {name: text for name, (_kind, text) in sm.METRICS.items()}


def test_plan_runs_the_exporter_on_slurm_clusters_only() -> None:
    plan = _plan("tier2")
    queue = plan["monitoring"]["slurm_queue"]
    assert queue["output"] == sm.DEFAULT_OUTPUT == slurm_queue.OUTPUT
    # its own folder, a link of the same name in node-exporter's textfile folder (root's)
    assert queue["output"] == f"{queue['output_dir']}/gpucluster_slurm.prom" and queue["output"].endswith(".prom")
    assert queue["link"] == f"{slurm_queue.TEXTFILE_DIR}/gpucluster_slurm.prom"
    assert not queue["output_dir"].startswith(slurm_queue.TEXTFILE_DIR)
    assert queue["user"] == "slurm"  # SlurmUser: sees every job under PrivateData, never root
    assert queue["interval"] == plan["monitoring"]["scrape_interval"]
    assert queue["metrics"] == sorted(sm.METRICS)
    kube = copy.deepcopy(plan)
    kube["cluster"]["scheduler"] = "kubernetes"
    assert slurm_queue.slurm_queue_plan(kube) is None


def test_units_run_the_planned_program_every_scrape_interval() -> None:
    plan = _plan("tier2")
    head = plan["cluster"]["head"]
    queue = plan["monitoring"]["slurm_queue"]
    service = render_role_template("head", "gpucluster-slurm-metrics.service.j2", plan, head)
    timer = render_role_template("head", "gpucluster-slurm-metrics.timer.j2", plan, head)
    assert f"ExecStart={queue['program']} --output {queue['output']}\n" in service
    assert "Type=oneshot" in service
    # never root: Slurm's unprivileged SlurmUser, a read-only system but its own folder
    assert f"User={queue['user']}\n" in service and f"Group={queue['user']}\n" in service
    assert "ProtectSystem=strict\n" in service and f"ReadWritePaths={queue['output_dir']}\n" in service
    assert "User=root" not in service
    assert f"OnUnitActiveSec={queue['interval']}\n" in timer and "WantedBy=timers.target" in timer
    files = {f["dest"] for f in files_by_host(plan)[head]}
    assert {
        "/etc/systemd/system/gpucluster-slurm-metrics.service",
        "/etc/systemd/system/gpucluster-slurm-metrics.timer",
    } <= files
