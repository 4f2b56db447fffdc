"""The subnet manager as the head runs it, on the planned fabric simulated by ibsim.

The real opensm reads the head's own /etc/opensm/opensm.conf and partitions.conf (as the fabric
role wrote them in the head01 container) and runs, one instance per planned subnet, on the head's
SM port of that subnet (plan: fabric.cabling.sm_hcas, cabled by fabric_host.sm_cabling), the way
Debian's opensm@<port GUID>.service does. ibsim and opensm run on the lab host (a container has no
umad device); tools/lab/ibsim_check.py run_sm_check starts and stops them by PID. Every planned CA
port (the compute nodes' rails and the head's SM ports) must reach ACTIVE, be a full member of the
planned partition, and each subnet's SM must be master at the planned priority.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"


def _lab_tool() -> Any:
    spec = importlib.util.spec_from_file_location("ibsim_check", ROOT / "tools" / "lab" / "ibsim_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_opensm_from_the_heads_files_brings_every_planned_port_active(
    hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    opensm = plan["fabric_host"]["opensm"]
    if opensm is None:
        fab = plan["fabric"]
        pytest.skip(f"no subnet manager on the hosts (fabric {fab['type']}, {fab['subnet_manager']})")
    missing = [t for t in ("ibsim", "opensm", "smpquery", "sminfo", "saquery") if not shutil.which(t)]
    assert not missing and os.path.exists(UMAD2SIM), f"lab host lacks {missing or UMAD2SIM} (make deps)"
    head = hosts[opensm["host"]]
    conf = head.file("/etc/opensm/opensm.conf").content_string
    partitions = head.file(opensm["partition_config_file"]).content_string
    result = _lab_tool().run_sm_check(plan["fabric"], opensm_conf=conf, partitions_conf=partitions, timeout=20)
    subnets = plan["fabric_host"]["opensm"]["subnets"]
    assert [s["name"] for s in result["subnets"]] == subnets, result
    assert [s["sm_port"] for s in result["subnets"]] == [p["desc"] for p in opensm["sm_ports"]]
    assert result["not_active"] == [] and result["missing"] == [] and result["no_partition"] == [], result
    assert sum(s["ca_ports"] for s in result["subnets"]) == result["planned_ca_ports"]
    for subnet in result["subnets"]:
        assert subnet["sm_state"] == "SMINFO_MASTER" and subnet["sm_priority"] == opensm["sm_priority"], subnet
        assert subnet["ipoib_group"] == {"pkey": "0xffff", "sl": plan["fabric"]["infiniband"]["service_level"] or 0}
    assert result["ok"], result
