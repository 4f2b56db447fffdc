"""The GPU parsers, the health check and the audit on a real H100's recorded output.

tests/data/nvidia-smi/h100-sxm-580/ (its README): one NVIDIA H100 80GB HBM3 (SXM5), driver 580.159.04,
passed through to a virtual machine without its NVSwitch board: one GPU, `nvidia-smi nvlink -s` prints
nothing, `-q` says Fabric State N/A. What a whole HGX node shows differs, so each test says which
config it holds the GPU to: one GPU without NVSwitch (healthy), or tier1's 8-GPU HGX node (drained,
audited as missing 7 GPUs and every NVLink).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from conftest import ROOT, cluster_plan, load_inventory, load_script

from ansible_collections.gpucluster.tiers.plugins.module_utils import audit_probe, gpu
from ansible_collections.gpucluster.tiers.plugins.modules import audit_facts, gpu_facts
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.checks.gpu import gpu_findings

REC = ROOT / "tests" / "data" / "nvidia-smi" / "h100-sxm-580"
QUERY = REC / "nvidia-smi-query-gpu.csv"
TEMPERATURE = REC / "nvidia-smi-q-temperature.txt"
SMI_Q = REC / "nvidia-smi-q.txt"
NVLINK = REC / "nvidia-smi-nvlink-s.txt"

hc = load_script(ROOT / "roles" / "compute" / "files" / "gpucluster-healthcheck", "gpucluster_healthcheck")


@pytest.fixture(scope="module")
def tier1() -> dict[str, Any]:
    return cluster_plan(*load_inventory("tier1"))  # one HGX H100 node: 8 GPUs, NVSwitch, 18 NVLinks each


def test_recorded_files_are_what_the_readme_says() -> None:
    assert NVLINK.read_text() == ""  # no NVSwitch board: nvidia-smi nvlink -s lists no GPU
    assert QUERY.read_text().count("\n") == 1 and "Fabric" in SMI_Q.read_text()


# ---------------------------------------------------------------- gpu_facts, module_utils/gpu.py


def test_query_and_temperature_parse() -> None:
    (row,) = gpu.parse_query_csv(QUERY.read_text())
    assert (row.index, row.name, row.pci_bus_id) == (0, "NVIDIA H100 80GB HBM3", "00000000:00:06.0")
    assert (row.max_sm_mhz, row.max_mem_mhz) == (1980, 2619)
    assert (row.power_min_w, row.power_default_w, row.power_max_w) == (200.0, 700.0, 700.0)
    assert (row.temperature_c, row.ecc_uncorrected_volatile) == (38, 0)
    driver, (thermal,) = gpu.parse_temperature(TEMPERATURE.read_text())
    assert driver == "580.159.04"
    assert thermal.form == "tlimit" and thermal.pci_bus_id == row.pci_bus_id


def test_gpu_facts_module_holds_tier1s_clocks_and_power(
    tier1: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """tier1 plans -lgc 1980, -lmc 2619 and -pl 700 (its clocks.apply_args): within this GPU's range."""
    assert {"-lgc 1980,1980", "-lmc 2619,2619", "-pl 700"} <= set(tier1["gpu"]["clocks"]["apply_args"])
    args = {
        "query_output": QUERY.read_text(),
        "temperature_output": TEMPERATURE.read_text(),
        "plan_gpu": tier1["gpu"],
        "_ansible_check_mode": True,
    }
    with patch_module_args(args), pytest.raises(SystemExit):
        gpu_facts.main()
    out = json.loads(capsys.readouterr().out)
    facts = out["ansible_facts"]["gpucluster_gpus"]
    assert "failed" not in out and out["changed"] is False and out["mismatches"] == []
    assert facts["gpu_present"] is True and facts["count"] == 1 and facts["driver_version"] == "580.159.04"
    assert facts["gpus"][0]["thermal"]["form"] == "tlimit"


def test_a_power_limit_above_the_recorded_gpus_maximum_is_a_mismatch(tier1: dict[str, Any]) -> None:
    plan_gpu = copy.deepcopy(tier1["gpu"])
    plan_gpu["clocks"]["power_limit_w"] = 800
    facts = gpu.merge_facts(gpu.parse_query_csv(QUERY.read_text()), [])
    got = gpu.check_plan_against_hardware(plan_gpu, facts)
    assert any("800" in m and "700" in m for m in got), got


# ---------------------------------------------------------------- the health check


def _one_gpu_config(tier1: dict[str, Any]) -> dict[str, Any]:
    """tier1's health config for a node of one GPU without NVSwitch (what the recorded machine is)."""
    cfg = copy.deepcopy(tier1["health"])
    cfg["gpu"].update(count=1, fabric_state=False, nvlink_links=None)
    return cfg


def _run_check(tmp_path: Path, cfg: dict[str, Any]) -> tuple[int, list[list[str]]]:
    node = next(iter(cfg["nodes"]))
    config = tmp_path / "healthcheck.json"
    config.write_text(json.dumps(cfg))
    calls = tmp_path / "calls.jsonl"
    show = tmp_path / "show.txt"
    show.write_text(f"NodeName={node} Arch=x86_64 CoresPerSocket=1\n   State=IDLE ThreadsPerCore=1\n")
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"if sys.argv[1] == 'show': sys.stdout.write(open({str(show)!r}).read())\n"
    )
    scontrol.chmod(0o755)
    rc = hc.main(
        [
            "--config", str(config), "--node", node, "--scontrol", str(scontrol),
            "--nvidia-smi-output", str(QUERY), "--nvidia-smi-q-output", str(SMI_Q), "--nvlink-output", str(NVLINK),
            "--ib-sysfs", str(tmp_path / "infiniband"), "--coolant", str(tmp_path / "coolant.json"),
            "--state-dir", str(tmp_path / "state"), "--sys-module", str(tmp_path / "module"),
        ]
    )  # fmt: skip
    lines = calls.read_text().splitlines() if calls.exists() else []
    return rc, [c for c in map(json.loads, lines) if c[0] == "update"]


def test_health_check_one_gpu_without_nvswitch_is_healthy(tmp_path: Path, tier1: dict[str, Any]) -> None:
    assert _run_check(tmp_path, _one_gpu_config(tier1)) == (0, [])


def test_health_check_tier1_drains_the_lone_gpu(tmp_path: Path, tier1: dict[str, Any]) -> None:
    rc, updates = _run_check(tmp_path, tier1["health"])
    assert rc == 1 and len(updates) == 1
    reason = updates[0][-1]
    assert reason.startswith("reason=gpucluster: 1/8 gpus")
    assert "gpu0 fabric N/A" in reason
    # NVLink: nothing listed, so 0 of the 8 GPUs (the reason keeps the first problems; the full list:)
    problems = hc.check_nvlinks(18, hc.parse_nvlink_status(NVLINK.read_text()), 8)
    assert problems == ["nvlink 0/8 gpus listed"]


# ---------------------------------------------------------------- audit_facts and the audit engine


#: the applied-settings row audit_facts asks for (audit_probe.APPLIED_FIELDS), with the recorded GPU's
#: values as its `nvidia-smi -q` prints them (Bus Id, Current Power Limit, Persistence Mode, MIG Mode
#: Current, Driver Version, VBIOS Version): the probe did not record this query's CSV
APPLIED_ROW = "0, 00000000:00:06.0, NVIDIA H100 80GB HBM3, 700.00, Enabled, Disabled, 580.159.04, 96.00.DA.00.0C\n"


PARAMS = {"files": [], "services": [], "gpu": True, "hca": False, "fabric_manager": False, "nft_table": "",
          "slurm_nodes": False, "job_env_nodes": "", "layouts": None}  # fmt: skip


class _Probe:
    """audit_facts' Probe on the recorded GPU: its `nvlink -s` (empty) and its applied settings."""

    def run(self, tool: str, args: list[str]) -> tuple[str, str, str | None]:
        if tool == "nvidia-smi" and args == audit_probe.NVLINK_ARGS:
            return "ok", NVLINK.read_text(), None
        if tool == "nvidia-smi" and args == audit_probe.APPLIED_ARGS:
            return "ok", APPLIED_ROW, None
        return "absent", "", f"{tool} not found in PATH"


def test_audit_facts_reads_no_nvlink_on_the_recorded_gpu() -> None:
    gpu_facts_ = audit_facts.collect(PARAMS, _Probe())["gpu"]
    assert gpu_facts_["state"] == "ok" and gpu_facts_["nvlink_state"] == "ok"
    assert gpu_facts_["gpus"][0]["power_limit_w"] == 700 and gpu_facts_["gpus"][0]["driver_version"] == "580.159.04"
    assert gpu_facts_["nvlink"] == []
    assert audit_probe.parse_nvlink_status(NVLINK.read_text()) == {}


def test_audit_counts_every_unlisted_planned_gpu_as_0_links(tier1: dict[str, Any]) -> None:
    """The facts audit_facts returns on the recorded GPU, audited against tier1's HGX node."""
    gpu_fact = {"state": "ok", "reason": None, "nvlink_state": "ok", "nvlink": [], "gpus": [{"index": 0}]}
    found = gpu_findings(tier1, "dgx01", gpu_fact, unchecked := [])
    assert unchecked == []
    nvlink = [f for f in found if f.check == "nvlink"]
    assert [f.subject for f in nvlink] == [f"GPU {i}" for i in range(8)]
    assert all(f.cls == "hardware" and f.severity == "critical" for f in nvlink)
    assert all((f.planned, f.found) == (18, 0) for f in nvlink)
    assert "nvidia-fabricmanager" in nvlink[0].fix and "drain dgx01" in nvlink[0].fix
    assert {f.check for f in found} == {"nvlink", "gpu_count"}


def test_audit_counts_a_gpu_missing_from_a_partial_listing(tier1: dict[str, Any]) -> None:
    listed = [{"index": i, "links": 18, "active": 18} for i in range(8) if i != 5]
    gpus = [{"index": i} for i in range(8)]
    gpu_fact = {"state": "ok", "reason": None, "nvlink_state": "ok", "nvlink": listed, "gpus": gpus}
    found = gpu_findings(tier1, "dgx01", gpu_fact, [])
    assert [(f.check, f.subject, f.found) for f in found] == [("nvlink", "GPU 5", 0)]


def test_audit_records_an_unreadable_nvlink_listing(tier1: dict[str, Any]) -> None:
    gpus = [{"index": i} for i in range(8)]
    reason = "nvidia-smi nvlink -s failed (rc 3): not supported"
    gpu_fact = {"state": "ok", "nvlink_state": "error", "nvlink_reason": reason, "nvlink": [], "gpus": gpus}
    unchecked: list[dict[str, str]] = []
    assert gpu_findings(tier1, "dgx01", gpu_fact, unchecked) == []
    assert unchecked == [{"host": "dgx01", "check": "nvlink", "reason": reason}]


def test_audit_of_a_healthy_listing_finds_nothing(tier1: dict[str, Any]) -> None:
    listed = [{"index": i, "links": 18, "active": 18} for i in range(8)]
    gpu_fact = {"state": "ok", "nvlink_state": "ok", "nvlink": listed, "gpus": [{"index": i} for i in range(8)]}
    assert gpu_findings(tier1, "dgx01", gpu_fact, []) == []
