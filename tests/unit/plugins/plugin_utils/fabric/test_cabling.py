"""Expected cabling and Slurm topology (dossier 8.2) for the tier fabrics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.cabling import (
    expected_cabling,
    slurm_topology_conf,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError

HCAS = [f"mlx5_{i}" for i in range(8)]


def computes(n: int) -> list[str]:
    return [f"compute{i:02d}" for i in range(1, n + 1)]


def _link(cabling: dict, host: str, rail: int) -> dict:
    return next(x for x in cabling["links"] if x["a"]["node"] == host and x["rail"] == rail and x["kind"] == "host")


def test_tier3_rail_optimized() -> None:
    c = expected_cabling(topology="rail_optimized", compute_hosts=computes(4), rail_hcas=HCAS, switch_radix=64)
    assert [s["name"] for s in c["switches"]] == [f"leaf{i:02d}" for i in range(1, 9)]
    assert len(c["links"]) == 32
    link = _link(c, "compute02", 3)
    assert link["a"]["hca"] == "mlx5_3" and link["b"] == {"node": "leaf04", "port": 2}
    assert slurm_topology_conf(c).splitlines()[-1] == "SwitchName=su01 Nodes=compute[01-04]"


def test_tier4_fat_tree() -> None:
    c = expected_cabling(topology="fat_tree", compute_hosts=computes(8), rail_hcas=HCAS, switch_radix=64, spines=4)
    leaves = [s for s in c["switches"] if s["kind"] == "leaf"]
    spines = [s for s in c["switches"] if s["kind"] == "spine"]
    assert len(leaves) == 8 and len(spines) == 4
    host_links = [x for x in c["links"] if x["kind"] == "host"]
    uplinks = [x for x in c["links"] if x["kind"] == "uplink"]
    assert len(host_links) == 64
    assert len(uplinks) == 8 * 32  # half of each leaf's 64 ports face the spines
    per_spine = {s["name"]: sum(1 for x in uplinks if x["b"]["node"] == s["name"]) for s in spines}
    assert set(per_spine.values()) == {64}  # 8 leaves x 8 links fill each 64-port spine
    ports = [(x["b"]["node"], x["b"]["port"]) for x in uplinks]
    assert len(ports) == len(set(ports))


def test_fat_tree_with_several_units_meets_at_the_spines() -> None:
    c = expected_cabling(
        topology="fat_tree", compute_hosts=computes(64), rail_hcas=HCAS, switch_radix=64, spines=4, spine_scope="rail"
    )
    conf = slurm_topology_conf(c)
    assert "SwitchName=su01 Nodes=compute[01-32]" in conf
    assert conf.splitlines()[-1] == "SwitchName=spines Switches=su[01-02]"


def test_single_switch_and_none() -> None:
    c = expected_cabling(topology="single_switch", compute_hosts=computes(2), rail_hcas=HCAS, switch_radix=64)
    assert len(c["links"]) == 16 and _link(c, "compute02", 0)["b"]["port"] == 9
    assert "SwitchName=ib-sw01 Nodes=compute[01-02]" in slurm_topology_conf(c)
    assert slurm_topology_conf(expected_cabling(topology="none", compute_hosts=["dgx01"], rail_hcas=HCAS)) == ""


def test_errors_name_the_field() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_fabric\.topology.*fat_tree"):
        expected_cabling(topology="rail_optimized", compute_hosts=computes(65), rail_hcas=HCAS, switch_radix=64)
    with pytest.raises(PlanError, match=r"gpucluster_fabric\.spines"):
        expected_cabling(topology="fat_tree", compute_hosts=computes(8), rail_hcas=HCAS, switch_radix=64, spines=3)
    with pytest.raises(PlanError, match=r"gpucluster_fabric\.spines.*third tier"):
        expected_cabling(topology="fat_tree", compute_hosts=computes(4096), rail_hcas=HCAS, switch_radix=64, spines=4)


@given(n=st.integers(1, 40), pad=st.integers(1, 4))
def test_hostlist_round_trip(n: int, pad: int) -> None:
    names = [f"node{i:0{pad}d}" for i in range(1, n + 1) if i % 3]
    assert sorted(hostlist.expand(hostlist.compress(names))) == sorted(set(names))


def test_hostlist_examples() -> None:
    assert hostlist.compress(["compute03", "compute01", "compute02"]) == "compute[01-03]"
    assert hostlist.compress(["a1", "a3", "b2"]) == "a[1,3],b2"
    assert hostlist.expand("/dev/nvidia[0-3]") == [f"/dev/nvidia{i}" for i in range(4)]
