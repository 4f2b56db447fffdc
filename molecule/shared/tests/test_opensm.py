"""The subnet manager as the head runs it, on the planned fabric simulated by ibsim.

The real opensm reads the head's own /etc/opensm/opensm.conf and partitions.conf (as the fabric
role wrote them in the head01 container) and runs, one instance per planned subnet, on the head's
SM port of that subnet (plan: fabric.cabling.sm_hcas, cabled by fabric_host.sm_cabling), the way
Debian's opensm@<port GUID>.service does. ibsim and opensm run on the lab host (a container has no
umad device); tools/lab/ibsim_check.py run_sm_check starts and stops them by PID. Every planned CA
port (the compute nodes' rails and the head's SM ports) must reach ACTIVE, be a full member of the
planned partition, and each subnet's SM must be master at the planned priority.

The validate play's port error sweep runs here too, on the same simulated fabric: the real perfquery
reads every planned compute HCA port's PortCounters (plan.validation.tests.port_counters), and the
validate gate (plugin_utils/validation/gates.py) reads its output: every port is there, with its LID,
and none is above infiniband-diags' error thresholds.
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


def test_perfquery_sweep_reads_every_planned_port_on_ibsim(plan: dict[str, Any], tmp_path: Path) -> None:
    ports = (plan.get("validation", {}).get("tests") or {}).get("port_counters") or []
    if not ports:
        pytest.skip(f"no InfiniBand compute ports to sweep (fabric {plan['fabric']['type']})")
    missing = [t for t in ("ibsim", "perfquery") if not shutil.which(t)]
    assert not missing and os.path.exists(UMAD2SIM), f"lab host lacks {missing or UMAD2SIM} (make deps)"
    lab = _lab_tool()  # puts the collection on sys.path when run from the repository
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import ibsim
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import gates

    sim = lab.Simulation(plan["fabric"]["cabling"], tmp_path, timeout=10)
    checks, lids = [], set()
    try:
        sim.start()
        for p in ibsim.perfquery_ports(ports):
            done = lab._run(p["argv"], sim.client_env(p["sim_host"]), tmp_path, 10)
            run = {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
            checks.append(gates.gate_port_errors(p["host"], p["hca"], p["port"], run, installed=True))
            lids.add(checks[-1]["reason"].rsplit("LID ", 1)[-1])
    finally:
        sim.stop()
    assert [c["status"] for c in checks] == ["pass"] * len(ports), [c for c in checks if c["status"] != "pass"]
    assert {c["measured"] for c in checks} == {"0 over"}
    assert len(lids) == len(ports)  # every planned port answered from its own LID
