"""The audit_facts module: read-only in every mode, an absent tool is a state, not a failure."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.modules import audit_facts

DATA = ROOT / "tests" / "data"


def run_module(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        audit_facts.main()
    return json.loads(capsys.readouterr().out)


def test_files_checksums_in_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "slurm.conf"
    f.write_bytes(b"ClusterName=tier1\n")
    out = run_module({"files": [str(f), str(tmp_path / "absent")], "_ansible_check_mode": True}, capsys)
    assert out["changed"] is False and "failed" not in out
    assert out["audit"]["files"] == {
        str(f): hashlib.sha256(b"ClusterName=tier1\n").hexdigest(),
        str(tmp_path / "absent"): None,
    }
    assert f.read_bytes() == b"ClusterName=tier1\n"
    assert out["audit"]["gpu"]["state"] == "skipped"


def test_relative_paths_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_module({"files": ["etc/hosts"]}, capsys)
    assert out["failed"] is True and "etc/hosts" in out["msg"]


class FakeProbe:
    """Tools by name: (state, output); a tool not listed is absent."""

    def __init__(self, tools: dict[str, tuple[str, str]]) -> None:
        self.tools = tools
        self.calls: list[tuple[str, list[str]]] = []

    def run(self, tool: str, args: list[str]) -> tuple[str, str, str | None]:
        self.calls.append((tool, args))
        key = f"{tool} {' '.join(args)}".strip()
        for name, (state, text) in self.tools.items():
            if key.startswith(name):
                return state, text, None if state == "ok" else f"{tool} failed"
        return "absent", "", f"{tool} not found in PATH"


PARAMS = {
    "files": [],
    "services": ["slurmd", "munge"],
    "gpu": True,
    "hca": True,
    "fabric_manager": True,
    "nft_table": "gpucluster",
    "slurm_nodes": True,
}


def test_collect_absent_tools_are_states() -> None:
    out = audit_facts.collect(PARAMS, FakeProbe({}))
    assert out["gpu"]["state"] == out["hca"]["state"] == out["fabric_manager"]["state"] == "absent"
    assert out["gpu"]["reason"] == "nvidia-smi not found in PATH"
    assert out["firewall"] == {"state": "absent", "reason": "nft not found in PATH", "table_loaded": False}
    assert out["services"]["slurmd"] == {"active": "unknown", "enabled": "unknown"}


def test_collect_reads_every_probe() -> None:
    probe = FakeProbe(
        {
            "systemctl show": (
                "ok",
                "Id=slurmd.service\nActiveState=active\nUnitFileState=enabled\n\n"
                "Id=munge.service\nActiveState=failed\nUnitFileState=enabled\n",
            ),
            "nvidia-smi nvlink": ("ok", (DATA / "audit" / "nvidia-smi-nvlink-s.txt").read_text()),
            "nvidia-smi --query-gpu": (
                "ok",
                "0, 00000000:19:00.0, NVIDIA H100 80GB HBM3, 700.00, Enabled, Disabled, 550.54.15, 96.00.89.00.01\n",
            ),
            "ibstat": ("ok", (DATA / "audit" / "ibstat.txt").read_text()),
            "nv-fabricmanager": ("ok", "Fabric Manager version is : 550.54.15\n"),
            "nft list": ("error", ""),  # the table is not loaded: nft fails
            "scontrol": ("ok", (DATA / "slurm" / "scontrol-show-node-d-oneliner-registered.txt").read_text()),
        }
    )
    out = audit_facts.collect(PARAMS, probe)
    assert out["services"] == {
        "slurmd": {"active": "active", "enabled": "enabled"},
        "munge": {"active": "failed", "enabled": "enabled"},
    }
    assert out["gpu"]["gpus"][0]["power_limit_w"] == 700
    assert out["gpu"]["nvlink"][0] == {"index": 0, "links": 4, "active": 3}
    assert [p["state"] for p in out["hca"]["ports"]] == ["Active", "Down"]
    assert out["fabric_manager"]["version"] == "550.54.15"
    assert out["firewall"]["table_loaded"] is False and out["firewall"]["state"] == "ok"
    assert out["slurm"]["nodes"]["compute02"]["state"] == "IDLE+DRAIN"
    # every tool call only reads
    assert (
        "systemctl",
        ["show", "-p", "Id,ActiveState,UnitFileState", "slurmd.service", "munge.service"],
    ) in probe.calls
    assert all(tool != "scontrol" or args == ["-o", "show", "node"] for tool, args in probe.calls)


def test_collect_job_env_with_one_srun_from_the_head() -> None:
    probe = FakeProbe(
        {"srun": ("ok", "0: SLURMD_NODENAME=compute01\n1: SLURMD_NODENAME=compute02\n1: NCCL_DEBUG=INFO\n")}
    )
    out = audit_facts.collect({**PARAMS, "job_env_nodes": "compute[01-02]", "job_env_wait": 5}, probe)
    assert out["job_env"] == {
        "state": "ok",
        "reason": None,
        "nodes": {"compute01": {}, "compute02": {"NCCL_DEBUG": "INFO"}},
    }
    (call,) = [args for tool, args in probe.calls if tool == "srun"]
    assert "--immediate=5" in call and "--nodelist=compute[01-02]" in call and "--export=NONE" in call


def test_collect_job_env_busy_nodes_or_no_slurm_are_states() -> None:
    busy = audit_facts.collect({**PARAMS, "job_env_nodes": "compute[01-02]"}, FakeProbe({"srun": ("error", "")}))
    assert busy["job_env"] == {"state": "error", "reason": "srun failed", "nodes": {}}
    assert audit_facts.collect({**PARAMS, "job_env_nodes": "x"}, FakeProbe({}))["job_env"]["state"] == "absent"
    assert audit_facts.collect(PARAMS, FakeProbe({}))["job_env"] == {"state": "skipped", "reason": None}


def test_collect_lustre_layouts_on_one_client(tmp_path: Path) -> None:
    ckpt, data, gone = tmp_path / "checkpoints", tmp_path / "datasets", tmp_path / "home"
    ckpt.mkdir()
    data.mkdir()
    probe = FakeProbe(
        {
            f"lfs getstripe -d --yaml {ckpt}": ("ok", (DATA / "lfs" / "checkpoints_tier3.yaml").read_text()),
            f"lfs getstripe -d --yaml {data}": ("error", ""),
        }
    )
    layouts = {"kind": "lustre", "mount": "/", "dirs": [str(ckpt), str(data), str(gone)]}
    out = audit_facts.collect({**PARAMS, "layouts": layouts}, probe)["layouts"]
    assert (out["state"], out["kind"]) == ("ok", "lustre")
    assert [c["stripe_count"] for c in out["dirs"][str(ckpt)]["layout"]] == [1, 4, 8]
    assert out["dirs"][str(data)] == {"state": "error", "reason": "lfs failed", "layout": None}
    assert out["dirs"][str(gone)] == {"state": "missing", "reason": "no such directory", "layout": None}
    lfs = [args for tool, args in probe.calls if tool == "lfs"]
    assert len(lfs) == 2 and all(args[:3] == ["getstripe", "-d", "--yaml"] for args in lfs)


def test_collect_layouts_tool_absent_or_not_mounted_are_states(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    absent = audit_facts.collect(
        {**PARAMS, "layouts": {"kind": "beegfs", "mount": "/", "dirs": [str(tmp_path / "d")]}}, FakeProbe({})
    )["layouts"]
    assert (absent["state"], absent["reason"]) == ("absent", "beegfs-ctl not found in PATH")
    unmounted = audit_facts.collect(
        {**PARAMS, "layouts": {"kind": "lustre", "mount": str(tmp_path), "dirs": [str(tmp_path / "d")]}},
        FakeProbe({}),
    )["layouts"]
    assert (unmounted["state"], unmounted["reason"]) == ("error", f"{tmp_path} is not mounted on this host")


def test_collect_beegfs_pattern(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    probe = FakeProbe(
        {"beegfs-ctl --getentryinfo": ("ok", (DATA / "audit" / "beegfs-getentryinfo-dir.txt").read_text())}
    )
    out = audit_facts.collect(
        {**PARAMS, "layouts": {"kind": "beegfs", "mount": "/", "dirs": [str(tmp_path / "d")]}}, probe
    )["layouts"]
    assert out["dirs"][str(tmp_path / "d")]["layout"]["chunksize"] == 1 << 20


def test_module_refuses_relative_layout_dirs(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_module({"layouts": {"kind": "lustre", "mount": "/lustre", "dirs": ["lustre/x"]}}, capsys)
    assert out["failed"] is True and "lustre/x" in out["msg"]
