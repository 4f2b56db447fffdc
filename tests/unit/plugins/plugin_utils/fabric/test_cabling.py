"""Expected cabling, fat-tree sizing and Slurm topology (dossier 8.2) for the tier fabrics and published designs."""

from __future__ import annotations

import math

import pytest
from conftest import parse_topology_conf
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.cabling import (
    expected_cabling,
    hosts_per_leaf,
    radix_for,
    slurm_topology,
    topology_conf_text,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError

HCAS = [f"mlx5_{i}" for i in range(8)]


def slurm_topology_conf(cabling: dict) -> str:
    """topology.conf as the slurm role renders it: the plan's switches (data) through the filter's text."""
    return topology_conf_text(slurm_topology(cabling))


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
    assert slurm_topology(c) == [{"name": "su01", "kind": "su", "nodes": "compute[01-04]"}]
    assert slurm_topology_conf(c).splitlines()[-1] == "SwitchName=su01 Nodes=compute[01-04]"


def _count(c: dict, kind: str, what: str = "switches") -> int:
    return sum(1 for x in c[what] if x["kind"] == kind)


def _fat(n: int, **kw: object) -> dict:
    return expected_cabling(topology="fat_tree", compute_hosts=computes(n), rail_hcas=HCAS, **kw)  # type: ignore[arg-type]


def test_tier4_fat_tree_has_as_many_uplinks_as_host_links() -> None:
    """8 nodes x 8 rails: each leaf carries 8 hosts, so 8 uplinks (non-blocking), 4 to each of the 2 spines
    the site's redundancy minimum asks for (one 64-port spine would carry all 64)."""
    c = _fat(8, switch_radix=64)
    assert (_count(c, "leaf"), _count(c, "spine")) == (8, 2)
    assert (_count(c, "host", "links"), _count(c, "uplink", "links")) == (64, 64)
    assert c["sizing"] == {
        "tiers": 2, "switch_radix": 64, "oversubscription": 1, "hosts_per_leaf": 32, "scalable_units": 1,
        "spine_groups": 1, "spines_per_group": 2, "pods": 0, "sus_per_pod": 0, "cores_per_group": 0,
        "leaves": 8, "spines": 2, "cores": 0, "host_links": 64, "uplinks": 64, "core_links": 0,
    }  # fmt: skip
    uplinks = [x for x in c["links"] if x["kind"] == "uplink"]
    pairs: dict[tuple[str, str], int] = {}
    for x in uplinks:
        pairs[(x["a"]["node"], x["b"]["node"])] = pairs.get((x["a"]["node"], x["b"]["node"]), 0) + 1
    assert set(pairs.values()) == {4} and len(pairs) == 16
    # uplinks sit above the SU's 32 host ports, alternating spines; spine ports from 1
    leaf01 = sorted((x["a"]["port"], x["b"]["node"]) for x in uplinks if x["a"]["node"] == "leaf01")
    assert leaf01[:3] == [(33, "spine01"), (34, "spine02"), (35, "spine01")]
    assert max(x["b"]["port"] for x in uplinks) == 32
    assert _fat(8, switch_radix=64, min_spines=1)["sizing"]["spines"] == 1  # one 64-port spine carries 64
    assert _fat(8, switch_radix=64, spines=4)["sizing"]["uplinks"] == 64  # the site's own count: 2 to each


def test_forty_nodes_get_the_uplinks_their_hosts_need() -> None:
    """The issue's 40-node site: 2 SUs (32 + 8 hosts per leaf), 8 x 32 + 8 x 8 = 320 uplinks (not 512)."""
    sz = _fat(40, switch_radix=64)["sizing"]
    assert (sz["host_links"], sz["uplinks"], sz["scalable_units"]) == (320, 320, 2)
    # 320 uplinks need 5 spines of 64 ports; a full leaf's 32 uplinks spread evenly over 8
    assert sz["spines"] == 8


@pytest.mark.parametrize(
    ("sus", "leaves", "spines", "uplinks"),
    [(1, 8, 4, 256), (2, 16, 8, 512), (3, 24, 16, 768), (4, 32, 16, 1024)],
)
def test_dgx_superpod_h100_compute_fabric(sus: int, leaves: int, spines: int, uplinks: int) -> None:
    """NVIDIA DGX SuperPOD H100 RA, Table 4 (docs/sources.md [C4]): SUs of 32 host ports per rail leaf
    (31 DGX + the UFM), QM9700 64-port leaves and spines, non-blocking: leaf, spine and spine-leaf cable
    counts for 1 to 4 SUs. 3 SUs take 16 spines, not 12: a leaf's 32 uplinks spread evenly over 16."""
    sz = _fat(32 * sus, switch_radix=64)["sizing"]
    assert (sz["tiers"], sz["leaves"], sz["spines"], sz["uplinks"]) == (2, leaves, spines, uplinks)
    assert sz["host_links"] == 32 * sus * 8


@pytest.mark.parametrize(
    ("sus", "leaves", "spines", "cores", "cables"),
    [(2, 16, 8, 0, 512), (4, 32, 16, 0, 1024), (8, 64, 32, 0, 2048), (16, 128, 128, 64, 4096),
     (32, 256, 256, 128, 8192), (64, 512, 512, 256, 16384)],
)  # fmt: skip
def test_dgx_superpod_b200_compute_fabric(sus: int, leaves: int, spines: int, cores: int, cables: int) -> None:
    """NVIDIA DGX SuperPOD B200 RA, switch and cable counts ([C7]): two tiers up to 8 SUs, three tiers
    (leaf, spine, core) from 16 SUs, with as many spine-core as node-leaf cables."""
    c = _fat(32 * sus, switch_radix=64)
    sz = c["sizing"]
    assert (sz["leaves"], sz["spines"], sz["cores"]) == (leaves, spines, cores)
    assert sz["host_links"] == sz["uplinks"] == cables
    assert sz["core_links"] == (cables if cores else 0)
    assert sz["tiers"] == (3 if cores else 2)


def test_16384_nodes_plan_as_a_three_tier_fat_tree() -> None:
    """16,384 nodes x 8 rails with 128-port switches: past one two-tier tree (128 leaves x 64 hosts), so
    pods of 8 SUs (64 leaves, 64 spines) under 1,024 core switches; topology.conf nests SUs in pods."""
    c = _fat(16384, switch_radix=128)
    sz = c["sizing"]
    assert (sz["tiers"], sz["pods"], sz["sus_per_pod"], sz["scalable_units"]) == (3, 32, 8, 256)
    assert (sz["leaves"], sz["spines"], sz["cores"]) == (2048, 2048, 1024)
    assert sz["host_links"] == sz["uplinks"] == sz["core_links"] == 131072
    conf = slurm_topology_conf(c).splitlines()
    assert "SwitchName=pod01 Switches=su[001-008]" in conf
    assert conf[-1] == "SwitchName=core Switches=pod[01-32]"
    assert c["scalable_units"][8]["pod"] == "pod02"
    # the plan holds a line of data a switch (256 SUs, 32 pods, the core), not a name a node
    switches = slurm_topology(c)
    assert len(switches) == 256 + 32 + 1 and switches[-1] == {"name": "core", "kind": "core", "switches": "pod[01-32]"}
    assert conf.index("# Three tiers: the SUs of a pod meet at its spines, the pods at the core switches.") == 258


def test_oversubscription_puts_more_hosts_on_a_leaf() -> None:
    """2:1 and 3:1 (host ports : uplinks): 42 + 21 and 48 + 16 ports of a 64-port leaf."""
    assert [hosts_per_leaf(64, o) for o in (1, 2, 3)] == [32, 42, 48]
    sz = _fat(96, switch_radix=64, oversubscription=3)["sizing"]
    assert (sz["scalable_units"], sz["hosts_per_leaf"], sz["oversubscription"]) == (2, 48, 3)
    assert sz["uplinks"] == 16 * 16  # 16 leaves x 48 / 3
    assert sz["host_links"] == 3 * sz["uplinks"]


def test_fat_tree_with_several_units_meets_at_the_spines() -> None:
    c = _fat(64, switch_radix=64, spines=4, spine_scope="rail")
    conf = slurm_topology_conf(c)
    assert "SwitchName=su01 Nodes=compute[01-32]" in conf
    assert conf.splitlines()[-1] == "SwitchName=spines Switches=su[01-02]"
    assert c["sizing"]["spine_groups"] == 8 and c["sizing"]["spines"] == 32


def test_single_switch_and_none() -> None:
    c = expected_cabling(topology="single_switch", compute_hosts=computes(2), rail_hcas=HCAS, switch_radix=64)
    assert len(c["links"]) == 16 and _link(c, "compute02", 0)["b"]["port"] == 9
    assert "SwitchName=ib-sw01 Nodes=compute[01-02]" in slurm_topology_conf(c)
    assert slurm_topology(c) == [{"name": "ib-sw01", "kind": "switch", "nodes": "compute[01-02]"}]
    none = expected_cabling(topology="none", compute_hosts=["dgx01"], rail_hcas=HCAS)
    assert slurm_topology(none) == [] and slurm_topology_conf(none) == ""


def test_topology_conf_text_of_a_hand_built_topology() -> None:
    """A line a switch, in the data's order, under the header; the three-tier note before the first pod."""
    switches = [
        {"name": "su1", "kind": "su", "nodes": "gpu[01-02]"},
        {"name": "su2", "kind": "su", "nodes": "gpu[03-04],gpu07"},
        {"name": "podA", "kind": "pod", "switches": "su1"},
        {"name": "podB", "kind": "pod", "switches": "su2"},
        {"name": "core", "kind": "core", "switches": "podA,podB"},
    ]
    assert topology_conf_text(switches) == (
        "# Managed by gpucluster.tiers: Slurm topology/tree from the fabric plan.\n"
        "# Each scalable unit (its hosts and all their rail leaves) is one logical switch.\n"
        "SwitchName=su1 Nodes=gpu[01-02]\n"
        "SwitchName=su2 Nodes=gpu[03-04],gpu07\n"
        "# Three tiers: the SUs of a pod meet at its spines, the pods at the core switches.\n"
        "SwitchName=podA Switches=su1\n"
        "SwitchName=podB Switches=su2\n"
        "SwitchName=core Switches=podA,podB\n"
    )
    assert topology_conf_text([]) == ""


@pytest.mark.parametrize(
    ("switches", "where"),
    [
        ("SwitchName=su01 Nodes=compute01", "fabric.slurm_topology"),
        ([{"name": "su01", "kind": "rack", "nodes": "compute01"}], r"fabric\.slurm_topology\[0\]"),
        ([{"name": "su01", "kind": "su", "nodes": "a"}, {"name": "spines", "kind": "spines"}], r"slurm_topology\[1\]"),
        ([{"kind": "su", "nodes": "compute01"}], r"slurm_topology\[0\].*a kind \(switch, su, spines, pod, core\)"),
    ],
)
def test_topology_conf_text_refuses_what_is_not_a_topology(switches: object, where: str) -> None:
    with pytest.raises(PlanError, match=where):
        topology_conf_text(switches)  # type: ignore[arg-type]


def test_errors_name_the_field() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_fabric\.topology.*fat_tree"):
        expected_cabling(topology="rail_optimized", compute_hosts=computes(65), rail_hcas=HCAS, switch_radix=64)
    # one spine cannot carry 4 SUs' 1,024 uplinks; the message names the fewest that can
    with pytest.raises(PlanError, match=r"'gpucluster_fabric\.spines': value 1 .*the fewest is 16"):
        _fat(128, switch_radix=64, spines=1)
    with pytest.raises(PlanError, match=r"'gpucluster_fabric\.spines': value 4 .*three-tier"):
        _fat(4096, switch_radix=64, spines=4)
    with pytest.raises(PlanError, match=r"'gpucluster_fabric\.oversubscription': value 0\.5"):
        _fat(8, oversubscription=0.5)
    with pytest.raises(PlanError, match=r"'gpucluster_fabric\.min_spines': value 40 .*32"):
        _fat(8, min_spines=40)
    with pytest.raises(PlanError, match=r"'gpucluster_fabric\.spine_scope': value 'pod'"):
        _fat(8, spine_scope="pod")
    # 8 rail leaves per SU do not fit a pod of 8-port spines (4 ports down): spine_scope rail
    with pytest.raises(PlanError, match=r"'gpucluster_fabric\.spine_scope': value 'shared' .*rail"):
        _fat(80, switch_radix=8)
    # past three tiers: 8-port switches hold 8 x 4 x 4 = 128 hosts per rail plane
    with pytest.raises(PlanError, match=r"'groups\.compute'.*at most three tiers.*128 hosts"):
        _fat(129, switch_radix=8, spine_scope="rail")
    assert _fat(128, switch_radix=8, spine_scope="rail")["sizing"]["tiers"] == 3


def test_switch_radix_from_the_catalog() -> None:
    """The fabric type's default switch at the link rate, or the named switch_model (catalog.yml)."""
    assert radix_for({}, "infiniband", 400) == 64  # QM9700, NDR
    assert radix_for({}, "infiniband", 800) == 144  # Q3400, XDR
    assert radix_for({}, "roce", 400) == 128  # SN5600, 51.2 Tb/s
    assert radix_for({}, "roce", 800) == 64
    assert radix_for({"switch_model": "qm9700"}, "infiniband", 200) == 128
    assert radix_for({"switch_radix": 40}, "infiniband", 400) == 40  # the inventory wins
    with pytest.raises(
        PlanError, match=r"'gpucluster_fabric\.switch_model': value 'qm8700' .*one of q3400, qm9700, sn5600"
    ):
        radix_for({"switch_model": "qm8700"}, "infiniband", 400)
    with pytest.raises(
        PlanError, match=r"'gpucluster_fabric\.link_rate_gbps': value 800 .*qm9700 has ports for: 200, 400"
    ):
        radix_for({"switch_model": "qm9700"}, "infiniband", 800)
    with pytest.raises(PlanError, match=r"'gpucluster_fabric\.switch_radix'.*100 Gb/s"):
        radix_for({}, "infiniband", 100)


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.integers(1, 300),
    rails=st.integers(1, 8),
    radix=st.sampled_from([8, 12, 16, 32, 64]),
    over=st.sampled_from([1, 1.5, 2, 3]),
    scope=st.sampled_from(["shared", "rail"]),
    minimum=st.integers(1, 3),
)
def test_every_fat_tree_is_a_valid_clos(
    nodes: int, rails: int, radix: int, over: float, scope: str, minimum: int
) -> None:
    """For any size: no port used twice or above the radix; every leaf has the uplinks its hosts need at
    the oversubscription (and fewer than one more per spine); every leaf reaches every spine of its group
    (pod) with the same number of links; a pod spine has as many links up as down."""
    hcas = [f"mlx5_{r}" for r in range(rails)]
    try:
        c = expected_cabling(
            topology="fat_tree", compute_hosts=computes(nodes), rail_hcas=hcas, switch_radix=radix,
            oversubscription=over, min_spines=minimum, spine_scope=scope,
        )  # fmt: skip
    except PlanError as err:
        assert err.field in ("gpucluster_fabric.min_spines", "gpucluster_fabric.spine_scope", "groups.compute")
        return
    kinds = {s["name"]: s for s in c["switches"]}
    ports: set[tuple[str, int]] = set()
    hosts: dict[str, int] = {}
    up: dict[str, dict[str, int]] = {}
    down: dict[str, int] = {}
    for x in c["links"]:
        for end in (x["a"], x["b"]):
            if "hca" not in end:
                assert 1 <= end["port"] <= radix
                assert (end["node"], end["port"]) not in ports
                ports.add((end["node"], end["port"]))
        if x["kind"] == "host":
            hosts[x["b"]["node"]] = hosts.get(x["b"]["node"], 0) + 1
        else:
            up.setdefault(x["a"]["node"], {})
            up[x["a"]["node"]][x["b"]["node"]] = up[x["a"]["node"]].get(x["b"]["node"], 0) + 1
            down[x["b"]["node"]] = down.get(x["b"]["node"], 0) + 1
    sz = c["sizing"]
    spines = sz["spines_per_group"]
    for name, sw in kinds.items():
        if sw["kind"] == "leaf":
            need = max(1, math.ceil(hosts.get(name, 0) / over - 1e-9))
            links = sum(up[name].values())
            assert need <= links < need + spines
            assert len(up[name]) == spines and len(set(up[name].values())) == 1
            assert all(kinds[s]["rail"] == (sw["rail"] if scope == "rail" else None) for s in up[name])
        if sw["kind"] == "spine" and sz["tiers"] == 3:
            assert sum(up[name].values()) >= down[name] and len(set(up[name].values())) == 1
    assert sz["tiers"] in (2, 3)
    # the design's counts are the lists' counts, and the count-only plan (the cost model's) has the same
    counted = {k: sum(1 for x in c["links"] if x["kind"] == k) for k in ("host", "uplink", "core")}
    assert (sz["host_links"], sz["uplinks"], sz["core_links"]) == (counted["host"], counted["uplink"], counted["core"])
    assert (sz["leaves"], sz["spines"], sz["cores"]) == tuple(
        sum(1 for s in c["switches"] if s["kind"] == k) for k in ("leaf", "spine", "core")
    )
    bare = expected_cabling(
        topology="fat_tree", compute_hosts=computes(nodes), rail_hcas=hcas, switch_radix=radix,
        oversubscription=over, min_spines=minimum, spine_scope=scope, links=False,
    )  # fmt: skip
    # the design alone (the plan's): the same switches and sizing, its cables generated in the same order
    assert bare["sizing"] == sz and "links" not in bare and "hcas" not in bare
    assert list(fabric_links.links(bare)) == c["links"] and list(fabric_links.hcas(bare)) == c["hcas"]
    assert fabric_links.link_count(bare) == len(c["links"]) and fabric_links.hca_count(bare) == len(c["hcas"])


@given(n=st.integers(1, 40), pad=st.integers(1, 4))
def test_hostlist_round_trip(n: int, pad: int) -> None:
    names = [f"node{i:0{pad}d}" for i in range(1, n + 1) if i % 3]
    assert sorted(hostlist.expand(hostlist.compress(names))) == sorted(set(names))


def test_hostlist_examples() -> None:
    assert hostlist.compress(["compute03", "compute01", "compute02"]) == "compute[01-03]"
    assert hostlist.compress(["a1", "a3", "b2"]) == "a[1,3],b2"
    assert hostlist.expand("/dev/nvidia[0-3]") == [f"/dev/nvidia{i}" for i in range(4)]


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 200), rails=st.integers(1, 4), radix=st.sampled_from([8, 16, 32, 64]))
def test_the_topology_data_says_what_its_topology_conf_says(nodes: int, rails: int, radix: int) -> None:
    """For any fat tree: every compute node is in exactly one switch of nodes, every switch of switches names
    switches of the topology, and topology.conf (the filter's text) reads back as the same switches."""
    from ansible_collections.gpucluster.tiers.plugins.module_utils import ibfabric

    hcas = [f"mlx5_{r}" for r in range(rails)]
    try:
        c = expected_cabling(topology="fat_tree", compute_hosts=computes(nodes), rail_hcas=hcas, switch_radix=radix)
    except PlanError:
        return  # a size the radix cannot reach (another test checks that message)
    switches = slurm_topology(c)
    planned = ibfabric.planned_topology(switches)
    assert planned == parse_topology_conf(topology_conf_text(switches))
    placed = [node for sw in planned.values() for node in sw["nodes"]]
    assert sorted(placed) == sorted(computes(nodes))
    assert all(set(sw["switches"]) <= set(planned) for sw in planned.values())
