"""Parsers of what the audit reads on a host (plugins/module_utils/audit_probe.py).

nvidia-smi --query-gpu rows and ibstat/nvlink samples in tests/data/audit are synthetic, written in the
tools' documented formats (nvidia-smi(1) --query-gpu with csv,noheader,nounits; ``nvidia-smi nvlink -s``;
infiniband-diags ibstat); the scontrol sample is the recorded one of tests/data/slurm."""

from __future__ import annotations

import pytest
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.module_utils import audit_probe

DATA = ROOT / "tests" / "data"


def test_gpu_applied_rows() -> None:
    text = (
        "0, 00000000:19:00.0, NVIDIA H100 80GB HBM3, 700.00, Enabled, Disabled, 550.54.15, 96.00.89.00.01\n"
        "1, 00000000:3B:00.0, NVIDIA H100 80GB HBM3, 500.00, Disabled, [N/A], 550.54.15, 96.00.89.00.01\n"
    )
    gpus = audit_probe.parse_gpu_applied(text)
    assert gpus[0] == {
        "index": 0,
        "pci_bus_id": "00000000:19:00.0",
        "name": "NVIDIA H100 80GB HBM3",
        "power_limit_w": 700,
        "persistence": True,
        "mig": False,
        "driver_version": "550.54.15",
        "vbios_version": "96.00.89.00.01",
    }
    assert (gpus[1]["power_limit_w"], gpus[1]["persistence"], gpus[1]["mig"]) == (500, False, None)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("0, 00000000:19:00.0, H100, 700\n", "expected 8 fields"),
        ("x, 00000000:19:00.0, H100, 700, Enabled, Disabled, 550, 96\n", "GPU row"),
        ("0, 00000000:19:00.0, H100, 700, Maybe, Disabled, 550, 96\n", "not Enabled/Disabled"),
    ],
)
def test_gpu_applied_refuses_other_output(text: str, match: str) -> None:
    with pytest.raises(audit_probe.ProbeParseError, match=match):
        audit_probe.parse_gpu_applied(text)


def test_nvlink_status_counts_active_links() -> None:
    links = audit_probe.parse_nvlink_status((DATA / "audit" / "nvidia-smi-nvlink-s.txt").read_text())
    assert links == {0: {"links": 4, "active": 3}, 1: {"links": 4, "active": 4}}


def test_ibstat_ports() -> None:
    ports = audit_probe.parse_ibstat((DATA / "audit" / "ibstat.txt").read_text())
    assert [(p["ca"], p["port"], p["state"], p["rate_gbps"], p["firmware"]) for p in ports] == [
        ("mlx5_0", 1, "Active", 400.0, "28.39.1002"),
        ("mlx5_1", 1, "Down", 10.0, "28.39.1002"),
    ]
    assert ports[0]["port_guid"] == "0xa088c20300d1e2f0"
    assert ports[1]["physical_state"] == "Polling"


def test_fabricmanager_version() -> None:
    assert audit_probe.parse_fabricmanager_version("Fabric Manager version is : 550.54.15\n") == "550.54.15"
    assert audit_probe.parse_fabricmanager_version("usage: nv-fabricmanager [options]") is None


def test_scontrol_nodes_recorded() -> None:
    text = (DATA / "slurm" / "scontrol-show-node-d-oneliner-registered.txt").read_text()
    nodes = audit_probe.parse_scontrol_nodes(text)
    assert sorted(nodes) == [f"compute0{i}" for i in range(1, 9)]
    assert nodes["compute01"] == {
        "gres": "gpu:h100:8",
        "features": "h100,infiniband,su01,dlc",
        "state": "IDLE",
        "reason": None,
    }
    assert nodes["compute02"]["state"] == "IDLE+DRAIN"
    assert nodes["compute02"]["reason"] == "operator: replace DIMM"
