"""ibnetdiscover -p parsing, link rates and the plan comparison (module_utils/ibfabric.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import ROOT, fabric, host_link, listed, parse_topology_conf

from ansible_collections.gpucluster.tiers.plugins.module_utils import ibfabric
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import cabling as fabric_mod
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.links import links

DATA = ROOT / "tests" / "data" / "ibnetdiscover"


def move_cable(cabling: dict[str, Any], host: str, rail: int, leaf: str, port: int) -> dict[str, Any]:
    host_link(cabling, host, rail)["b"] = {"node": leaf, "port": port}
    return cabling


def test_subnets_one_per_rail_without_spines() -> None:
    tier3 = ibfabric.subnets(fabric("tier3")["cabling"])
    assert [n["name"] for n in tier3] == [f"rail{r}" for r in range(8)]
    assert tier3[3]["sim_host"] == "compute01 mlx5_3" and tier3[3]["switches"] == ["leaf04"]
    assert ibfabric.subnets(fabric("tier3")["cabling"], "compute04")[0]["sim_host"] == "compute04 mlx5_0"
    (tier4,) = ibfabric.subnets(fabric("tier4")["cabling"])
    assert tier4["rails"] == list(range(8)) and len(tier4["switches"]) == 10  # 8 rail leaves + 2 spines
    assert len(ibfabric.subnets(fabric("tier2")["cabling"])) == 1
    assert ibfabric.subnets(fabric("tier1")["cabling"]) == []


def test_rates() -> None:
    assert ibfabric.speed_for(400, "4x") == "NDR" and ibfabric.speed_for(200, "4x") == "HDR"
    assert ibfabric.rate_value("4xHDR") == ibfabric.rate_value("HDR") == ibfabric.rate_value("200") == 200
    assert ibfabric.rate_value(400) == 400 and ibfabric.rate_value("1xNDR") == 100
    with pytest.raises(ValueError, match="not a link rate"):
        ibfabric.rate_value("fast")


def test_parse_recorded_ports_of_the_tier3_rails() -> None:
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "tier3.txt").read_text())
    assert len(ports) == 8 * (64 + 4)  # per rail: every leaf port, and the 4 HCAs' ports
    linked = [p for p in ports if p["remote"]]
    assert len(linked) == 8 * 4 * 2  # each host link seen from both ends
    ca = next(p for p in ports if p["desc"] == "compute02 mlx5_3")
    assert ca == {
        "type": "CA",
        "lid": 20,  # 8 leaves, then compute01's 8 HCAs, then compute02's
        "port": 1,
        "guid": ca["guid"],
        "width": "4x",
        "speed": "HDR",
        "rate_gbps": 200.0,
        "desc": "compute02 mlx5_3",
        "remote": {"type": "SW", "lid": 4, "port": 2, "guid": ca["remote"]["guid"], "desc": "leaf04"},
    }
    free = next(p for p in ports if p["desc"] == "leaf04" and p["port"] == 64)
    assert free["remote"] is None and free["type"] == "SW"


def test_parse_is_on_descriptions_and_skips_other_lines() -> None:
    # The format of a real NDR port (infiniband-diags prints "NDR" from the extended speed).
    text = (
        "ibwarn: [1234] some warning\n"
        "CA    12  1 0x946dae03006b1a2c 4x NDR - SW     3 17 0xfc6a1c0300a1b2c3 ( 'compute01 mlx5_0' - 'leaf01' )\n"
        "SW     3 18 0xfc6a1c0300a1b2c3 4x SDR                                    'leaf01'\n"
    )
    first, second = ibfabric.parse_ibnetdiscover_ports(text)
    assert first["rate_gbps"] == 400 and first["remote"]["port"] == 17 and first["remote"]["desc"] == "leaf01"
    assert second == {**second, "desc": "leaf01", "remote": None, "port": 18}


def test_tier3_as_recorded_matches_the_plan_at_hdr() -> None:
    planned = fabric("tier3", sm_ports=False)  # recorded before the plan cabled the head's SM ports
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "tier3.txt").read_text())
    report = ibfabric.compare(planned, ports, expected_rate="4xHDR")
    assert report["ok"], report["mismatches"]
    assert report["counts"]["discovered_hcas"] == report["counts"]["planned_hcas"] == 32
    assert report["topology"]["discovered"] == {
        "su01": {"nodes": [f"compute0{i}" for i in range(1, 5)], "switches": []}
    }
    # at the planned NDR rate every simulated HDR link is too slow
    assert len(ibfabric.compare(planned, ports)["slow_links"]) == 32


def test_recorded_miscabling_reports_each_fault_once() -> None:
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "tier3-miscabled.txt").read_text())
    report = ibfabric.compare(fabric("tier3", sm_ports=False), ports, expected_rate=200)
    assert report["mismatches"] == [
        "compute02 rail 3 (mlx5_3): on leaf05 port 5 (a leaf of rail 4), planned leaf04 port 2",
        "link compute03 mlx5_6 port 1 - leaf07 port 3: 1x HDR (50 Gb/s), planned 4x at 200 Gb/s",
    ]


def test_missing_host_is_missing_from_topology_conf() -> None:
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "tier3.txt").read_text())
    ports = [
        p
        for p in ports
        if not p["desc"].startswith("compute04") and "compute04" not in (p["remote"] or {}).get("desc", "")
    ]
    report = ibfabric.compare(fabric("tier3", sm_ports=False), ports, expected_rate="HDR")
    assert [(e["host"], e["rail"]) for e in report["missing_hcas"]] == [("compute04", r) for r in range(8)]
    assert report["topology"]["mismatches"] == [{"switch": "su01", "missing": ["compute04"], "extra": []}]
    assert "topology.conf SwitchName=su01: missing compute04 (discovered vs planned)" in report["mismatches"]
    # a node left out on purpose
    kept = ibfabric.compare(fabric("tier3", sm_ports=False), ports, expected_rate="HDR", ignore=["compute04 *"])
    assert kept["missing_hcas"] == []


def test_extra_hca_and_switch() -> None:
    ports = ibfabric.parse_ibnetdiscover_ports(
        (DATA / "tier3.txt").read_text()
        + "CA    99  1 0x0000000000900001 4x HDR - SW    90  7 0x0000000000900000 ( 'head01 mlx5_0' - 'leaf99' )\n"
    )
    report = ibfabric.compare(fabric("tier3", sm_ports=False), ports, expected_rate="HDR")
    assert report["extra_switches"] == ["leaf99"]
    assert report["extra_hcas"] == [{"node": "head01 mlx5_0", "node_port": 1, "actual": {"leaf": "leaf99", "port": 7}}]
    assert len(report["mismatches"]) == 2


def synthetic_ports(cabling: dict[str, Any]) -> list[dict[str, Any]]:
    """Ports as parse_ibnetdiscover_ports gives them for a cabling at 4x HDR (no simulator)."""

    def end(e: dict[str, Any]) -> dict[str, Any]:
        desc = ibfabric.hca_desc(e["node"], e["hca"]) if e.get("hca") else e["node"]
        return {"type": "CA" if e.get("hca") else "SW", "lid": 0, "port": e["port"], "guid": "0x0", "desc": desc}

    out = []
    for link in ibfabric.all_links(cabling):  # the subnet manager's ports too
        a, b = end(link["a"]), end(link["b"])
        for near, far in ((a, b), (b, a)):
            out.append({**near, "width": "4x", "speed": "HDR", "rate_gbps": 200.0, "remote": far})
    return out


def test_the_subnet_managers_ports_are_planned_and_checked() -> None:
    """The head's SM ports (one per rail subnet on tier3) are expected like any HCA, but are no
    Slurm node: a fabric without them reports each port missing, and topology.conf stays the same."""
    planned = fabric("tier3")
    assert [(x["hca"], x["subnet"]) for x in planned["cabling"]["sm_hcas"]] == [
        (f"mlx5_{r}", f"rail{r}") for r in range(8)
    ]
    assert ibfabric.compare(planned, synthetic_ports(planned["cabling"]), expected_rate="HDR")["ok"]
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "tier3.txt").read_text())  # recorded without them
    report = ibfabric.compare(planned, ports, expected_rate="HDR")
    assert report["mismatches"] == [
        f"head01 rail {r} (mlx5_{r}): not discovered, planned on leaf0{r + 1} port 5" for r in range(8)
    ]
    assert report["topology"]["mismatches"] == []


def two_unit_fabric() -> dict[str, Any]:
    """64 hosts in two scalable units, spines per rail plane (how tier4 grows)."""
    cabling = fabric_mod.expected_cabling(
        topology="fat_tree",
        compute_hosts=[f"gpu{i:03d}" for i in range(1, 65)],
        rail_hcas=[f"mlx5_{r}" for r in range(8)],
        switch_radix=64,
        spines=4,
        spine_scope="rail",
    )
    return {"cabling": cabling, "slurm_topology": fabric_mod.slurm_topology(cabling)}


def test_topology_conf_of_two_units_as_discovered() -> None:
    planned = two_unit_fabric()
    assert ibfabric.compare(planned, synthetic_ports(planned["cabling"]), expected_rate="HDR")["ok"]
    actual = move_cable(copy.deepcopy(planned["cabling"]), "gpu001", 0, "leaf09", 40)  # su02's rail-0 leaf
    report = ibfabric.compare(planned, synthetic_ports(actual), expected_rate="HDR")
    assert [(e["host"], e["actual"]["leaf"]) for e in report["wrong_leaf"]] == [("gpu001", "leaf09")]
    assert report["topology"]["mismatches"] == [{"switch": "su02", "missing": [], "extra": ["gpu001"]}]
    assert len(report["mismatches"]) == 2
    # su02 cut off from the spines: the spines' switch of switches loses it
    actual = listed(copy.deepcopy(planned["cabling"]))
    su02 = set(planned["cabling"]["scalable_units"][1]["leaves"])
    actual["links"] = [x for x in actual["links"] if not (x["kind"] == "uplink" and x["a"]["node"] in su02)]
    report = ibfabric.compare(planned, synthetic_ports(actual), expected_rate="HDR")
    assert len(report["missing_uplinks"]) == 8 * 32
    assert report["topology"]["mismatches"] == [{"switch": "spines", "missing": ["su02"], "extra": []}]


def three_tier_fabric() -> dict[str, Any]:
    """20 hosts x 2 rails on 8-port switches: 5 SUs of 4 hosts outgrow one two-tier tree (8 leaves under a
    spine), so pods of 2 SUs (4 leaves, 4 spines each) under core switches."""
    cabling = fabric_mod.expected_cabling(
        topology="fat_tree",
        compute_hosts=[f"gpu{i:02d}" for i in range(1, 21)],
        rail_hcas=["mlx5_0", "mlx5_1"],
        switch_radix=8,
    )
    return {"cabling": cabling, "slurm_topology": fabric_mod.slurm_topology(cabling)}


def test_the_plans_topology_reads_as_its_topology_conf() -> None:
    """fabric_check reads the plan's switches (data); they say what the rendered topology.conf says."""
    for planned in (two_unit_fabric(), three_tier_fabric(), fabric("tier3"), fabric("tier4")):
        switches = planned["slurm_topology"]
        text = fabric_mod.topology_conf_text(switches)
        assert ibfabric.planned_topology(switches) == parse_topology_conf(text)
    assert ibfabric.planned_topology(three_tier_fabric()["slurm_topology"])["pod02"] == {
        "nodes": [],
        "switches": ["su03", "su04"],
    }


def test_three_tier_topology_conf_as_discovered() -> None:
    planned = three_tier_fabric()
    sz = planned["cabling"]["sizing"]
    assert (sz["tiers"], sz["pods"], sz["spines"], sz["cores"]) == (3, 3, 12, 8)
    assert planned["slurm_topology"][-1] == {"name": "core", "kind": "core", "switches": "pod[01-03]"}
    assert ibfabric.compare(planned, synthetic_ports(planned["cabling"]), expected_rate="HDR")["ok"]
    # pod02 cut off from the core switches: the core's switch of switches loses it, nothing else
    actual = listed(copy.deepcopy(planned["cabling"]))
    pod02 = {s["name"] for s in actual["switches"] if s.get("pod") == "pod02"}
    actual["links"] = [x for x in actual["links"] if not (x["kind"] == "core" and x["a"]["node"] in pod02)]
    report = ibfabric.compare(planned, synthetic_ports(actual), expected_rate="HDR")
    cut = sum(1 for x in links(planned["cabling"]) if x["kind"] == "core" and x["a"]["node"] in pod02)
    assert len(report["missing_uplinks"]) == cut == 16  # 4 pod spines x 4 links up (the 4 leaves' links down)
    assert report["topology"]["mismatches"] == [{"switch": "core", "missing": ["pod02"], "extra": []}]


def test_same_leaf_other_port_and_extra_uplink() -> None:
    planned = fabric("tier4")
    actual = move_cable(copy.deepcopy(planned["cabling"]), "compute05", 2, "leaf03", 20)
    actual["links"].append(
        {"a": {"node": "leaf01", "port": 30}, "b": {"node": "spine01", "port": 64}, "kind": "uplink"}
    )
    report = ibfabric.compare(planned, synthetic_ports(actual), expected_rate="HDR")
    assert [(e["host"], e["rail"], e["expected"], e["actual"]) for e in report["wrong_port"]] == [
        ("compute05", 2, {"leaf": "leaf03", "port": 5}, {"leaf": "leaf03", "port": 20})
    ]
    assert report["extra_uplinks"] == [{"a": "leaf01", "a_port": 30, "b": "spine01", "b_port": 64}]
    assert report["mismatches"] == [
        "compute05 rail 2 (mlx5_2): on leaf03 port 20, planned port 5",
        "uplink leaf01 port 30 - spine01 port 64: not in the plan",
    ]
