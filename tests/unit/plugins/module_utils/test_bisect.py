"""Bisection (module_utils/bisect.py): the slow node and its cable, in at most ceil(log2 n) rounds."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, fabric
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils import bisect
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import parsers

FLOOR = 340.0
NIC_FLOOR = 375.0
DATA = ROOT / "tests" / "data" / "acceptance"


def cabling(sus: int, nodes_per_su: int, rails: int, rail_optimized: bool, ports: int = 64) -> dict[str, Any]:
    """A planned cabling: ``sus`` scalable units of ``nodes_per_su`` nodes, ``rails`` HCAs each; one leaf per rail
    per SU (rail-optimized) or one leaf per SU holding every rail (a plain leaf)."""
    links = []
    number = 0
    for su in range(sus):
        for i in range(nodes_per_su):
            number += 1
            node = f"node{number:03d}"
            for rail in range(rails):
                leaf = f"leaf{su * rails + rail + 1:02d}" if rail_optimized else f"leaf{su + 1:02d}"
                port = i + 1 if rail_optimized else i * rails + rail + 1
                links.append(
                    {"a": {"node": node, "hca": f"mlx5_{rail}", "port": 1}, "b": {"node": leaf, "port": port}}
                    | {"rail": rail, "kind": "host"}
                )
    return {"links": links}


def model(slow: set[str], slow_rail: dict[str, int]) -> Any:
    """Figures as the hardware would give them: an all_reduce is below the floor when a slow node is in it;
    a slow node's rail writes below the NIC floor."""

    def measure(tests: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for test in tests:
            if test["kind"] == "all_reduce":
                out[test["id"]] = 220.0 if slow & set(test["nodes"]) else 380.0
            elif test["kind"] == "ib_write_bw":
                out[test["id"]] = {
                    r["rail"]: 196.4
                    if slow_rail.get(test["node"]) == r["rail"] or slow_rail.get(test["peer"]) == r["rail"]
                    else 391.6
                    for r in test["rails"]
                }
        return out

    return measure


def test_tier4_names_compute06_and_its_cable_in_three_rounds() -> None:
    cab = fabric("tier4")["cabling"]
    nodes = [f"compute{i:02d}" for i in range(1, 9)]
    state = bisect.run(bisect.new_state(nodes, cab, FLOOR, NIC_FLOOR), model({"compute06"}, {"compute06": 2}))
    result = bisect.verdict(state)
    assert result is not None and result["kind"] == bisect.FOUND
    assert result["node"] == "compute06" and result["rail"] == 2 and result["hca"] == "mlx5_2"
    assert result["cable"] == "compute06 mlx5_2 port 1 <-> leaf03 port 6"
    assert result["rounds"] == 3 == len(state.rounds)
    assert [len(r["suspects"]) for r in state.rounds] == [8, 4, 2]
    assert [t["kind"] for t in state.rounds[-1]["tests"]] == ["ib_write_bw", "ib_write_bw"]
    # the pair round measures against nodes already found good, a different one for each suspect
    peers = [t["peer"] for t in state.rounds[-1]["tests"]]
    assert len(set(peers)) == 2 and not set(peers) & {"compute05", "compute06"}
    md = bisect.report_markdown("tier4", state.to_dict())
    assert "compute06 mlx5_2 port 1 <-> leaf03 port 6" in md and "| 3 | ib_write_bw rail 2 |" in md


def leaves(groups: dict[str, list[str]]) -> dict[str, list[bisect.Port]]:
    links = [
        {"a": {"node": name, "hca": "mlx5_0", "port": 1}, "b": {"node": leaf, "port": port}, "rail": 0, "kind": "host"}
        for leaf, names in groups.items()
        for port, name in enumerate(names, 1)
    ]
    return bisect.topology({"links": links})


def test_halves_follow_the_leaves_while_that_keeps_the_round_bound() -> None:
    # two leaves of four: the leaf boundary is the middle
    topo = leaves({"leafA": ["n1", "n2", "n3", "n4"], "leafB": ["n5", "n6", "n7", "n8"]})
    assert bisect.split(sorted(topo), topo) == (["n1", "n2", "n3", "n4"], ["n5", "n6", "n7", "n8"])
    # 3 + 3 on two leaves and 2 on a third: 8 nodes allow halves of 4 at most, no boundary gives 4 + 4:
    # the cut falls inside leafB
    topo = leaves({"leafA": ["n1", "n2", "n3"], "leafB": ["n4", "n5", "n6"], "leafC": ["n7", "n8"]})
    assert bisect.split(sorted(topo), topo) == (["n1", "n2", "n3", "n4"], ["n5", "n6", "n7", "n8"])
    # 4 + 2 on two leaves: 6 nodes take 3 rounds with halves up to 4, so the leaf boundary stands
    topo = leaves({"leafA": ["n1", "n2", "n3", "n4"], "leafB": ["n5", "n6"]})
    assert bisect.split(sorted(topo), topo) == (["n1", "n2", "n3", "n4"], ["n5", "n6"])
    # 5 + 3: the larger half would exceed 4: the cut falls inside leafA
    topo = leaves({"leafA": ["n1", "n2", "n3", "n4", "n5"], "leafB": ["n6", "n7", "n8"]})
    assert bisect.split(sorted(topo), topo) == (["n1", "n2", "n3", "n4"], ["n5", "n6", "n7", "n8"])


@settings(max_examples=300, deadline=None)
@given(
    sus=st.integers(1, 4),
    per_su=st.integers(1, 9),
    rails=st.integers(1, 8),
    rail_optimized=st.booleans(),
    pick=st.integers(0, 10_000),
    rail_pick=st.integers(0, 7),
    extra=st.integers(0, 2),
)
def test_any_shape_any_single_slow_node_is_named_within_the_bound(
    sus: int, per_su: int, rails: int, rail_optimized: bool, pick: int, rail_pick: int, extra: int
) -> None:
    cab = cabling(sus, per_su, rails, rail_optimized)
    topo = bisect.topology(cab)
    everyone = sorted(topo)
    nodes = everyone[: max(2, len(everyone) - extra)]
    reference = everyone[len(nodes) :]
    if len(nodes) < 2 or (len(nodes) == 2 and not reference):
        return
    slow = nodes[pick % len(nodes)]
    rail = rail_pick % rails
    state = bisect.run(bisect.new_state(nodes, cab, FLOOR, NIC_FLOOR, reference=reference), model({slow}, {slow: rail}))
    result = bisect.verdict(state)
    assert result is not None and result["kind"] == bisect.FOUND, result
    assert (result["node"], result["rail"]) == (slow, rail)
    port = next(p for p in topo[slow] if p.rail == rail)
    assert result["cable"] == f"{slow} mlx5_{rail} port 1 <-> {port.switch} port {port.switch_port}"
    assert len(state.rounds) <= max(1, math.ceil(math.log2(len(nodes))))
    # a node measured good is never the one named, and never a suspect again
    assert slow not in state.good


@settings(max_examples=200, deadline=None)
@given(n=st.integers(4, 40), a=st.integers(0, 10_000), b=st.integers(0, 10_000), rails=st.integers(1, 8))
def test_two_slow_nodes_are_said_to_be_more_than_one_suspect(n: int, a: int, b: int, rails: int) -> None:
    cab = cabling(1, n, rails, True)
    nodes = sorted(bisect.topology(cab))
    first, second = nodes[a % n], nodes[b % n]
    if first == second:
        return
    state = bisect.run(
        bisect.new_state(nodes, cab, FLOOR, NIC_FLOOR), model({first, second}, {first: 0, second: rails - 1})
    )
    result = bisect.verdict(state)
    assert result is not None and result["kind"] == bisect.MULTIPLE, result
    assert "more than one suspect" in result["text"]
    assert len(state.rounds) <= math.ceil(math.log2(n))


@given(n=st.integers(4, 40))
def test_no_slow_half_says_the_slowness_is_elsewhere(n: int) -> None:
    cab = cabling(1, n, 2, True)
    nodes = sorted(bisect.topology(cab))
    state = bisect.run(bisect.new_state(nodes, cab, FLOOR, NIC_FLOOR), model(set(), {}))
    result = bisect.verdict(state)
    assert result is not None and result["kind"] == bisect.NONE and len(state.rounds) == 1
    assert result["text"].startswith("no single node below the floor") and "not one node or cable" in result["text"]


def test_a_slow_pair_with_every_rail_at_line_rate_is_not_a_cable() -> None:
    cab = fabric("tier4")["cabling"]
    nodes = [f"compute{i:02d}" for i in range(1, 9)]
    state = bisect.run(bisect.new_state(nodes, cab, FLOOR, NIC_FLOOR), model({"compute03"}, {}))
    result = bisect.verdict(state)
    assert result is not None and result["kind"] == bisect.NO_LINK and result["rounds"] == 3
    assert "compute03" in result["text"] and "not a cable" in result["text"]


def test_three_nodes_without_a_reference_infer_the_lone_half() -> None:
    # no node known good to pair the lone third node with: its half is inferred from the other's
    cab = cabling(1, 3, 2, True)
    state = bisect.run(bisect.new_state(sorted(bisect.topology(cab)), cab, FLOOR, NIC_FLOOR), model(set(), {}))
    result = bisect.verdict(state)
    assert result is not None and result["kind"] == bisect.NO_LINK and state.rounds[0]["inferred"] == ["node003"]


def test_a_test_that_did_not_run_stops_with_its_reason() -> None:
    cab = fabric("tier4")["cabling"]
    state = bisect.new_state([f"compute{i:02d}" for i in range(1, 9)], cab, FLOOR, NIC_FLOOR)
    tests = bisect.next_round(state)
    bisect.record(state, tests, {tests[0]["id"]: 380.0, f"error:{tests[1]['id']}": "srun: rc 1"})
    result = bisect.verdict(state)
    assert result is not None and result["kind"] == bisect.ERROR and "srun: rc 1" in result["text"]
    assert bisect.next_round(state) == []


def test_three_nodes_pair_a_lone_half_with_a_reference_or_infer_it() -> None:
    cab = cabling(1, 4, 2, True)
    nodes = ["node001", "node002", "node003"]
    with_ref = bisect.new_state(nodes, cab, FLOOR, NIC_FLOOR, reference=["node004"])
    assert [t["nodes"] for t in bisect.next_round(with_ref)] == [["node001", "node002"], ["node003", "node004"]]
    alone = bisect.new_state(nodes, cab, FLOOR, NIC_FLOOR)
    assert [t["kind"] for t in bisect.next_round(alone)] == ["all_reduce", "inferred"]
    bisect.run(alone, model({"node003"}, {"node003": 1}))
    result = bisect.verdict(alone)
    assert result is not None and result["node"] == "node003" and "inferred" in result["text"]


@pytest.mark.parametrize(
    ("nodes", "reference", "message"),
    [
        (["compute01"], [], "at least two nodes"),
        (["compute01", "compute02"], [], "no other node to measure them against"),
        (
            ["compute01", "compute99"],
            ["compute03"],
            "not in the cabling plan (fabric.cabling.scalable_units): compute99",
        ),
    ],
)
def test_bad_input_is_refused_with_the_reason(nodes: list[str], reference: list[str], message: str) -> None:
    with pytest.raises(bisect.BisectError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bisect.new_state(nodes, fabric("tier4")["cabling"], FLOOR, NIC_FLOOR, reference=reference)


@pytest.mark.parametrize("path", sorted(DATA.glob("all_reduce_*.txt")), ids=lambda p: p.name)
def test_the_module_reads_the_all_reduce_figure_the_acceptance_gate_reads(path: Path) -> None:
    text = path.read_text()
    gate = 8 * 2**30
    rows = parsers.gate_rows(parsers.parse_all_reduce(text), gate)
    expected = min(min(r["out_of_place"]["busbw"], r["in_place"]["busbw"]) for r in rows)
    assert bisect.all_reduce_busbw(text, gate) == expected


@pytest.mark.parametrize("path", sorted(DATA.glob("ib_write_bw_*.txt")), ids=lambda p: p.name)
def test_the_module_reads_the_ib_write_bw_figure_the_acceptance_gate_reads(path: Path) -> None:
    text = path.read_text()
    assert bisect.ib_write_bw_gbps(text) == parsers.parse_ib_write_bw(text)["bw_avg_gbps"]


def test_output_without_a_result_has_no_figure() -> None:
    assert bisect.all_reduce_busbw("srun: error: Unable to create step\n", 1) is None
    assert bisect.ib_write_bw_gbps(" Couldn't connect to 10.0.0.1:18515\n") is None
