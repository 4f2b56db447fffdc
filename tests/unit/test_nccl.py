"""NCCL settings (dossier 2: NCCL docs [N1] and source [N2]; 7.2 RoCE ToS arithmetic)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.module_utils.nccl import (
    nccl_conf,
    nccl_conf_text,
    nccl_topology_xml,
    roce_traffic_class,
)

HCAS = [f"mlx5_{i}" for i in range(8)]
BASE = dict(topology="rail_optimized", compute_hcas=HCAS, socket_ifname="eno1", nodes=4)


def test_roce_dscp_26_is_tc_106() -> None:
    """dossier 7.2: ToS = DSCP x 4 + ECN; 106 = 26 x 4 + 2 (ECT(0)); 104 without ECT."""
    assert roce_traffic_class(26) == 106
    assert roce_traffic_class(26, ecn=False) == 104
    with pytest.raises(PlanError, match=r"gpucluster_fabric\.roce\.dscp.*64"):
        roce_traffic_class(64)


def test_infiniband_uses_exact_names() -> None:
    """dossier 2.1: without '=' mlx5_1 also matches mlx5_10..19; storage HCAs are never listed."""
    conf = nccl_conf(fabric_type="infiniband", **BASE)
    assert conf["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_{i}:1" for i in range(8))
    assert conf["NCCL_SOCKET_IFNAME"] == "=eno1"
    assert conf["NCCL_CROSS_NIC"] == "0"
    assert "NCCL_IB_TC" not in conf and "NCCL_IB_GID_INDEX" not in conf
    assert conf["NCCL_DEBUG"] == "WARN"


def test_roce_sets_traffic_class_and_only_a_pinned_gid() -> None:
    conf = nccl_conf(fabric_type="roce", roce={"dscp": 26}, **BASE)
    assert conf["NCCL_IB_TC"] == "106"
    assert "NCCL_IB_GID_INDEX" not in conf  # NCCL >= 2.21 selects the RoCEv2 GID itself
    assert nccl_conf(fabric_type="roce", roce={"dscp": 26, "gid_index": 3}, **BASE)["NCCL_IB_GID_INDEX"] == "3"


def test_tcp_and_none() -> None:
    conf = nccl_conf(fabric_type="tcp", **BASE)
    assert conf["NCCL_IB_DISABLE"] == "1"
    assert int(conf["NCCL_SOCKET_NTHREADS"]) * int(conf["NCCL_NSOCKS_PERTHREAD"]) <= 64
    assert nccl_conf(fabric_type="none", **BASE) == {}


def test_no_debug_only_variables_and_large_fabric_timeout() -> None:
    for ftype in ("infiniband", "roce", "tcp"):
        conf = nccl_conf(fabric_type=ftype, **BASE)
        assert not {"NCCL_ALGO", "NCCL_PROTO", "NCCL_IB_QPS_PER_CONNECTION"} & set(conf)
    assert nccl_conf(fabric_type="infiniband", **{**BASE, "nodes": 512})["NCCL_IB_TIMEOUT"] == "22"


def test_bad_hca_list() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_node\.nics"):
        nccl_conf(fabric_type="infiniband", **{**BASE, "compute_hcas": ["mlx5_0", "mlx5_0"]})
    with pytest.raises(PlanError, match=r"gpucluster_fabric\.type"):
        nccl_conf(fabric_type="omnipath", **BASE)


def test_conf_text_is_key_value_lines() -> None:
    text = nccl_conf_text({"NCCL_DEBUG": "WARN"})
    assert text.endswith("NCCL_DEBUG=WARN\n")
    assert all(line.startswith("#") or "=" in line for line in text.splitlines())


def test_topology_xml_pairs_gpus_and_nics_per_numa_node() -> None:
    gpus = [
        {"index": i, "pci_bus": f"0000:{0x10 + i:02x}:00.0", "numa_node": i // 4, "nic": f"mlx5_{i}"} for i in range(8)
    ]
    nics = [
        {"name": f"mlx5_{i}", "purpose": "compute", "pci_bus": f"0000:{0x30 + i:02x}:00.0", "numa_node": i // 4}
        for i in range(8)
    ] + [{"name": "eno1", "purpose": "management"}]
    root = ET.fromstring(nccl_topology_xml(gpus=gpus, nics=nics))
    assert root.tag == "system" and root.get("version") == "1"
    cpus = root.findall("cpu")
    assert [c.get("numaid") for c in cpus] == ["0", "1"]
    for cpu in cpus:
        classes = [p.get("class") for p in cpu.findall("pci")]
        assert classes.count("0x030200") == 4 and classes.count("0x020700") == 4
    with pytest.raises(PlanError, match=r"gpucluster_node\.gpus\[0\]\.pci_bus"):
        nccl_topology_xml(gpus=[{**gpus[0], "pci_bus": "18:00.0"}], nics=nics)
