"""NCCL settings (dossier 2: NCCL docs [N1] and source [N2]; 7.2 RoCE ToS arithmetic).

The topology decision (docs/tiers.md, "NCCL topology"): no NCCL_TOPO_FILE unless the site opts in with
``gpucluster_node.nccl_topology: file``; then the file carries the PCIe switch tree, each GPU under the
same switch as its NIC, as NCCL's own dumps and Azure's topo files do.
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import (
    PCIE_LINK_SPEED,
    nccl_conf,
    nccl_conf_text,
    nccl_topology,
    roce_traffic_class,
    topology_xml_text,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import NCCL_TOPO_FILE, files_by_host

HCAS = [f"mlx5_{i}" for i in range(8)]


def nccl_topology_xml(**kwargs: Any) -> str:
    """The topology file of a node: the plan's tree (nccl_topology) as the filter writes it."""
    return topology_xml_text(nccl_topology(**kwargs))


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


def test_topo_file_only_when_given() -> None:
    assert "NCCL_TOPO_FILE" not in nccl_conf(fabric_type="infiniband", **BASE)
    conf = nccl_conf(fabric_type="infiniband", topo_file="/etc/nccl/topo.xml", **BASE)
    assert conf["NCCL_TOPO_FILE"] == "/etc/nccl/topo.xml"


# --- the reference tiers: NCCL detects the PCI tree itself ------------------------------------------------


@pytest.mark.parametrize("tier", ["tier2", "tier3", "tier4"])
def test_reference_tiers_write_no_topology_file(tier: str) -> None:
    plan = cluster_plan(*load_inventory(tier))
    nccl = plan["nccl"]
    assert nccl["enabled"] and nccl["topology"] == "detect"
    assert nccl["topo_file"] is None and nccl["topology_tree"] is None
    assert "NCCL_TOPO_FILE" not in nccl["conf"] and "NCCL_TOPO_FILE" not in nccl_conf_text(nccl["conf"])
    assert "sysfs" in nccl["topology_reason"] and "\n" not in nccl["topology_reason"]
    for host, files in files_by_host(plan).items():
        assert NCCL_TOPO_FILE not in [f["dest"] for f in files], host


def test_tier1_has_no_nccl_settings_even_when_a_file_is_asked_for() -> None:
    site, groups = load_inventory("tier1")
    site["gpucluster_node"]["nccl_topology"] = "file"
    nccl = cluster_plan(site, groups)["nccl"]
    assert nccl["enabled"] is False and nccl["topo_file"] is None and nccl["topology"] == "file"
    assert "no multi-node fabric" in nccl["topology_reason"]


# --- a site that opts in: a faithful switch tree ----------------------------------------------------------


def _opted_in(site: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, list[str]]]:
    base, groups = load_inventory("tier3")
    site = copy.deepcopy(site or base)
    site["gpucluster_node"]["nccl_topology"] = "file"
    return site, groups


def _switch_of(root: ET.Element, busid: str) -> ET.Element:
    """The <pci class=0x060400> element that holds the device with ``busid``."""
    for switch in root.iter("pci"):
        if switch.get("class") == "0x060400" and any(c.get("busid") == busid for c in switch.findall("pci")):
            return switch
    raise AssertionError(f"{busid} is not under a PCIe switch")


def test_tier3_opt_in_places_each_gpu_under_its_nics_switch() -> None:
    site, groups = _opted_in()
    plan = cluster_plan(site, groups)
    nccl = plan["nccl"]
    assert nccl["topology"] == "file" and nccl["topo_file"] == NCCL_TOPO_FILE == "/etc/nccl/topo.xml"
    assert nccl["conf"]["NCCL_TOPO_FILE"] == NCCL_TOPO_FILE
    root = ET.fromstring(topology_xml_text(nccl["topology_tree"]))
    assert root.tag == "system" and root.get("version") == "1"
    assert [c.get("numaid") for c in root.findall("cpu")] == ["0", "1"]
    # every <pci> directly under a <cpu> is a switch; devices sit below switches only
    for cpu in root.findall("cpu"):
        assert {p.get("class") for p in cpu.findall("pci")} == {"0x060400"}
    nic_bus = {n["name"]: n.get("pci_bus") for n in site["gpucluster_node"]["nics"]}
    for gpu in site["gpucluster_node"]["gpus"]:
        switch = _switch_of(root, gpu["pci_bus"])
        assert switch.get("busid") == gpu["pcie_switch"]
        gpu_el = next(p for p in switch.findall("pci") if p.get("busid") == gpu["pci_bus"])
        assert gpu_el.get("class") == "0x030200"
        # the paired NIC is under the same switch element, found by its RDMA name as NCCL finds it
        nets = [p for p in switch.findall("pci") if p.find("nic/net") is not None]
        assert [p.find("nic/net").get("name") for p in nets] == [gpu["nic"]]
        assert nets[0].get("busid") == nic_bus[gpu["nic"]] and nets[0].get("class") == "0x020700"
        # and the switch hangs off the GPU's NUMA node
        cpu = next(c for c in root.findall("cpu") if switch in list(c))
        assert cpu.get("numaid") == str(gpu["numa_node"])
    # only compute NICs: storage (mlx5_8/9) and management NICs are not NCCL's (NCCL_IB_HCA)
    names = sorted(n.get("name") for n in root.iter("net"))
    assert names == [f"mlx5_{i}" for i in range(8)]
    for pci in root.iter("pci"):
        assert pci.get("link_speed") in PCIE_LINK_SPEED.values() and pci.get("link_width") == "16"
    # the file is on every compute node and nowhere else; the role template renders the plan's text
    for host, files in files_by_host(plan).items():
        has = NCCL_TOPO_FILE in [f["dest"] for f in files]
        assert has == ("compute" in plan["hosts"][host]["roles"]), host
    assert render_role_template("compute", "nccl-topo.xml.j2", plan, "compute01") == topology_xml_text(
        nccl["topology_tree"]
    )


def test_link_speed_is_a_string_nccl_parses() -> None:
    """NCCL topo.cc kvDictPciGen knows "32.0 GT/s PCIe"; "32.0 GT/s" alone would fall back to Gen3 (60)."""
    assert PCIE_LINK_SPEED[5] == "32.0 GT/s PCIe"
    site, groups = _opted_in()
    site["gpucluster_node"]["pcie_gen"] = 4
    root = ET.fromstring(topology_xml_text(cluster_plan(site, groups)["nccl"]["topology_tree"]))
    assert {p.get("link_speed") for p in root.iter("pci")} == {"16.0 GT/s PCIe"}


def test_roce_nics_are_ethernet_class() -> None:
    site, groups = _opted_in()
    site["gpucluster_fabric"] = {**site["gpucluster_fabric"], "type": "roce"}
    site["gpucluster_fabric"].pop("infiniband", None)
    site["gpucluster_fabric"].pop("subnet_manager", None)
    root = ET.fromstring(topology_xml_text(cluster_plan(site, groups)["nccl"]["topology_tree"]))
    classes = {p.get("class") for p in root.iter("pci") if p.find("nic") is not None}
    assert classes == {"0x020000"}


# --- bad inputs name the field -----------------------------------------------------------------------------


def _plan_error(site: dict[str, Any], groups: dict[str, list[str]]) -> PlanError:
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    return err.value


def test_opt_in_without_pcie_switch() -> None:
    site, groups = _opted_in()
    del site["gpucluster_node"]["gpus"][2]["pcie_switch"]
    err = _plan_error(site, groups)
    assert err.field == "gpucluster_node.gpus[2].pcie_switch" and "nccl_topology is file" in err.allowed
    site, groups = _opted_in()
    del site["gpucluster_node"]["nics"][5]["pcie_switch"]
    assert _plan_error(site, groups).field == "gpucluster_node.nics[5].pcie_switch"
    site, groups = _opted_in()
    del site["gpucluster_node"]["nics"][0]["pci_bus"]
    assert _plan_error(site, groups).field == "gpucluster_node.nics[0].pci_bus"


def test_detect_needs_no_pcie_switch() -> None:
    site, groups = load_inventory("tier3")
    for item in site["gpucluster_node"]["gpus"] + site["gpucluster_node"]["nics"]:
        item.pop("pcie_switch", None)
    assert cluster_plan(site, groups)["nccl"]["topo_file"] is None


def test_gpu_and_its_nic_on_different_switches() -> None:
    site, groups = _opted_in()
    site["gpucluster_node"]["gpus"][3]["pcie_switch"] = site["gpucluster_node"]["gpus"][2]["pcie_switch"]
    err = _plan_error(site, groups)
    assert err.field == "gpucluster_node.gpus[3].pcie_switch"
    assert "mlx5_3" in err.allowed and "gpucluster_node.nics[3].pcie_switch" in err.allowed


def test_malformed_bus_and_unknown_choice() -> None:
    site, groups = _opted_in()
    site["gpucluster_node"]["gpus"][0]["pcie_switch"] = "18:00.0"
    err = _plan_error(site, groups)
    assert err.field == "gpucluster_node.gpus[0].pcie_switch" and err.value == "18:00.0"
    site, groups = _opted_in()
    site["gpucluster_node"]["nics"][1]["pcie_switch"] = "switch-1"
    assert _plan_error(site, groups).field == "gpucluster_node.nics[1].pcie_switch"
    site, groups = _opted_in()
    site["gpucluster_node"]["nccl_topology"] = "auto"
    err = _plan_error(site, groups)
    assert err.field == "gpucluster_node.nccl_topology" and "detect" in err.allowed
    site, groups = _opted_in()
    site["gpucluster_node"]["pcie_gen"] = 7
    assert _plan_error(site, groups).field == "gpucluster_node.pcie_gen"


def test_file_needs_an_rdma_fabric() -> None:
    site, groups = _opted_in()
    site["gpucluster_fabric"] = {**site["gpucluster_fabric"], "type": "tcp"}
    site["gpucluster_fabric"].pop("infiniband", None)  # refused on another fabric itself (inventory/rules.py)
    assert _plan_error(site, groups).field == "gpucluster_node.nccl_topology"


GPUS = [
    {"index": i, "pci_bus": f"0000:{0x1b + 0x10 * i:02x}:00.0", "numa_node": i // 2, "nic": f"mlx5_{i}",
     "pcie_switch": f"0000:{0x18 + 0x10 * i:02x}:00.0"}
    for i in range(4)
]  # fmt: skip
NICS = [
    {"name": f"mlx5_{i}", "purpose": "compute", "pci_bus": f"0000:{0x1a + 0x10 * i:02x}:00.0",
     "pcie_switch": f"0000:{0x18 + 0x10 * i:02x}:00.0"}
    for i in range(4)
] + [{"name": "eno1", "purpose": "management"}]  # fmt: skip


def test_nic_numa_comes_from_its_switch_and_switch_tree_is_checked() -> None:
    root = ET.fromstring(nccl_topology_xml(gpus=GPUS, nics=NICS))  # NICs without numa_node
    for cpu in root.findall("cpu"):
        assert len(cpu.findall("pci/pci/nic/net")) == 2 and len(cpu.findall("pci/pci")) == 4
    # one switch, two NUMA nodes
    nics = copy.deepcopy(NICS)
    nics[0]["numa_node"] = 1
    with pytest.raises(PlanError, match=r"gpucluster_node\.nics\[0\]\.numa_node"):
        nccl_topology_xml(gpus=GPUS, nics=nics)
    # a switch address that is also a device's address
    gpus = copy.deepcopy(GPUS)
    gpus[1]["pci_bus"] = GPUS[0]["pcie_switch"]
    with pytest.raises(PlanError, match=r"gpucluster_node\.gpus\[1\]\.pci_bus"):
        nccl_topology_xml(gpus=gpus, nics=NICS)
    # a compute NIC with no GPU on its NUMA node (NCCL fills a <cpu> through the GPUs under it)
    nics = [*copy.deepcopy(NICS), {"name": "mlx5_9", "purpose": "compute", "pci_bus": "0000:f1:00.0",
                                   "pcie_switch": "0000:f0:00.0", "numa_node": 3}]  # fmt: skip
    with pytest.raises(PlanError, match=r"gpucluster_node\.nics\[5\]\.numa_node"):
        nccl_topology_xml(gpus=GPUS, nics=nics)
    with pytest.raises(PlanError, match=r"gpucluster_node\.gpus"):
        nccl_topology_xml(gpus=[], nics=NICS)


def test_xml_escapes_names() -> None:
    nics = copy.deepcopy(NICS)
    nics[0]["name"] = 'mlx5_"0&'
    gpus = copy.deepcopy(GPUS)
    gpus[0]["nic"] = nics[0]["name"]
    root = ET.fromstring(nccl_topology_xml(gpus=gpus, nics=nics))
    assert 'mlx5_"0&' in [n.get("name") for n in root.iter("net")]


def test_conf_text_orders_the_keys_itself() -> None:
    """nccl.conf's lines follow CONF_ORDER whatever the mapping's order (plan.json sorts keys); an
    unknown key comes last, by name."""
    conf = nccl_conf(
        fabric_type="roce", topology="rail_optimized", compute_hcas=["mlx5_0"], socket_ifname="eno1", nodes=300,
        roce={"dscp": 26, "gid_index": 3},
    )  # fmt: skip
    text = nccl_conf_text(conf)
    assert nccl_conf_text(dict(sorted(conf.items()))) == text
    assert text.splitlines()[2:] == [f"{k}={v}" for k, v in conf.items()]
    assert nccl_conf_text({"NCCL_ZZ": "1", "NCCL_AA": "2", "NCCL_DEBUG": "WARN"}).splitlines()[2:] == [
        "NCCL_DEBUG=WARN",
        "NCCL_AA=2",
        "NCCL_ZZ=1",
    ]
