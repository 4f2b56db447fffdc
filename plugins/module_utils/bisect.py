"""Find the one slow node or link behind a slow multi-node all_reduce by bisection.

Pure (no I/O), shared by the ``fabric_bisect`` module on the head and the unit tests; Python 3.10,
standard library only.

The search is a state machine over plain data:

- :func:`new_state` takes the suspect nodes (a job's or an operator's node set), the plan's cabling
  (``plan["fabric"]["cabling"]``: ``links`` of kind ``host``, each node HCA port to a leaf port on
  one rail), the inter-node all_reduce floor (GB/s busbw) and the per-NIC floor (Gb/s);
- :func:`next_round` says which tests to run: all_reduce on each half while more than two nodes
  are suspect, then ``ib_write_bw`` on every rail between each remaining suspect and a node known
  good (the pair round);
- :func:`record` takes the figures and narrows the suspects (or settles the verdict);
- :func:`verdict` is the answer once settled: the node, its rail and the cable from the cabling
  plan (``compute05 mlx5_2 port 1 <-> leaf03 port 5``), or why no single node can be named.

Halves follow the planned leaves: nodes cabled to the same leaves (a leaf on a fat tree, a
scalable unit on a rail-optimized fabric) stay together as long as a split at that boundary keeps
the larger half within ``2 ** (ceil(log2 n) - 1)`` nodes, so that the rounds never exceed
``ceil(log2 n)``, the pair round included (8 nodes: 8 -> 4 -> 2 -> the pair round = 3 rounds).
Otherwise the split falls inside one group. A half of one node runs with a node already measured
good (an all_reduce needs two nodes to cross the fabric); in the first round there is none yet, and
such a half (three suspects only) is paired with a reference node when one is given, else it is
inferred from its sibling's result (the verdict says so).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import fabric_links

#: verdict kinds
FOUND = "found"  # one node (and rail, cable) named
MULTIPLE = "multiple"  # more than one suspect: two halves (or two nodes of the pair) below the floor
NONE = "none"  # no half below the floor: the slowness is not a single node's
NO_LINK = "no_link"  # the last suspect(s) ran slow in all_reduce but every rail met the NIC floor
ERROR = "error"  # a test could not run or its output could not be read


class BisectError(ValueError):
    """The input cannot be bisected (too few nodes, a node the cabling lacks)."""


@dataclass(frozen=True)
class Port:
    """One planned host cable: a node's HCA port on one rail to a leaf port."""

    node: str
    rail: int
    hca: str
    hca_port: int
    switch: str
    switch_port: int

    def cable(self) -> str:
        return f"{self.node} {self.hca} port {self.hca_port} <-> {self.switch} port {self.switch_port}"


def topology(cabling: dict[str, Any] | None) -> dict[str, list[Port]]:
    """Each node's planned host cables, by rail (the links of kind ``host`` of the cabling's design,
    module_utils/fabric_links.py)."""
    out: dict[str, list[Port]] = {}
    for link in fabric_links.links(cabling or {}):
        rail = link["rail"]
        if link.get("kind") != "host" or rail is None:  # a host link is on a rail
            continue
        a, b = link["a"], link["b"]
        out.setdefault(a["node"], []).append(
            Port(a["node"], int(rail), a["hca"], int(a.get("port", 1)), b["node"], int(b["port"]))
        )
    for ports in out.values():
        ports.sort(key=lambda p: (p.rail, p.hca))
    return out


def _natural(name: str) -> tuple[Any, ...]:
    parts: list[Any] = []
    digits = ""
    text = ""
    for ch in name:
        if ch.isdigit():
            if text:
                parts.append((1, text))
                text = ""
            digits += ch
        else:
            if digits:
                parts.append((0, int(digits)))
                digits = ""
            text += ch
    if digits:
        parts.append((0, int(digits)))
    if text:
        parts.append((1, text))
    return tuple(parts)


def leaf_groups(nodes: list[str], topo: dict[str, list[Port]]) -> list[list[str]]:
    """The nodes grouped by the leaves they are cabled to, in cabling order (leaf, port)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for node in nodes:
        key = tuple(sorted({p.switch for p in topo.get(node, [])}))
        groups.setdefault(key, []).append(node)

    def first_port(node: str) -> tuple[Any, ...]:
        ports = topo.get(node, [])
        return (_natural(ports[0].switch), ports[0].switch_port) if ports else ((), 0)

    ordered = [sorted(g, key=lambda n: (first_port(n), _natural(n))) for g in groups.values()]
    return sorted(ordered, key=lambda g: (first_port(g[0]), _natural(g[0])))


def rounds_bound(n: int) -> int:
    """The most rounds bisection takes for ``n`` suspects with one slow node, the pair round included."""
    return max(1, math.ceil(math.log2(n))) if n > 1 else 1


def split(nodes: list[str], topo: dict[str, list[Port]]) -> tuple[list[str], list[str]]:
    """Two halves: at a leaf-group boundary when that keeps the larger within the round bound, else inside a group."""
    n = len(nodes)
    cap = 2 ** (rounds_bound(n) - 1)
    groups = leaf_groups(nodes, topo)
    flat = [node for g in groups for node in g]
    best: int | None = None
    size = 0
    for g in groups[:-1]:
        size += len(g)
        if n - cap <= size <= cap and (best is None or abs(2 * size - n) < abs(2 * best - n)):
            best = size
    cut = best if best is not None else (n + 1) // 2
    return flat[:cut], flat[cut:]


@dataclass
class State:
    """The search so far (plain data: :meth:`to_dict` is what the module returns)."""

    nodes: list[str]
    suspects: list[str]
    floor: float
    nic_floor: float
    cabling: dict[str, Any]
    good: list[str] = field(default_factory=list)
    reference: list[str] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    max_rounds: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("cabling")
        return out


def new_state(
    nodes: list[str],
    cabling: dict[str, Any] | None,
    floor: float,
    nic_floor: float,
    reference: list[str] | None = None,
    max_rounds: int | None = None,
) -> State:
    """The start of a search over ``nodes`` (at least two; every node must be in the cabling when it has links)."""
    unique = sorted(dict.fromkeys(nodes), key=_natural)
    if len(unique) < 2:
        raise BisectError(f"bisection needs at least two nodes (an inter-node all_reduce); got {unique}")
    if floor <= 0 or nic_floor <= 0:
        raise BisectError(f"floors must be positive: all_reduce {floor} GB/s, ib_write_bw {nic_floor} Gb/s")
    topo = topology(cabling)
    if topo:
        missing = [n for n in unique if n not in topo]
        if missing:
            raise BisectError(f"nodes not in the cabling plan (fabric.cabling.scalable_units): {', '.join(missing)}")
    refs = [r for r in sorted(dict.fromkeys(reference or []), key=_natural) if r not in unique]
    if len(unique) == 2 and not refs:
        raise BisectError(
            f"two nodes ({', '.join(unique)}) and no other node to measure them against: give a reference node"
        )
    return State(
        nodes=unique,
        suspects=list(unique),
        floor=float(floor),
        nic_floor=float(nic_floor),
        cabling=cabling or {},
        reference=refs,
        max_rounds=max_rounds,
    )


def _pair_tests(state: State, number: int) -> list[dict[str, Any]]:
    topo = topology(state.cabling)
    peers = state.good or state.reference
    tests = []
    for i, node in enumerate(state.suspects):
        peer = peers[i % len(peers)]
        peer_ports = {p.rail: p for p in topo.get(peer, [])}
        rails = [
            {"rail": p.rail, "hca": p.hca, "peer_hca": peer_ports[p.rail].hca}
            for p in topo.get(node, [])
            if p.rail in peer_ports
        ]
        tests.append(
            {
                "id": f"r{number}-{node}",
                "kind": "ib_write_bw",
                "node": node,
                "peer": peer,
                "nodes": [node, peer],
                "suspects": [node],
                "rails": rails,
            }
        )
    return tests


def next_round(state: State) -> list[dict[str, Any]]:
    """The tests of the next round ([] once the verdict is settled).

    all_reduce test: ``{"id", "kind": "all_reduce", "nodes", "suspects"}`` (``nodes`` may add one good
    node to a single suspect); an inferred half: ``kind "inferred"`` (nothing to run). Pair round:
    ``{"id", "kind": "ib_write_bw", "node", "peer", "nodes", "suspects", "rails": [{"rail", "hca",
    "peer_hca"}]}``: ``node`` writes to ``peer`` on every rail, one rail after the other."""
    if state.result is not None:
        return []
    number = len(state.rounds) + 1
    if len(state.suspects) <= 2:
        return _pair_tests(state, number)
    tests = []
    pads = state.good or state.reference
    for tag, half in zip("ab", split(state.suspects, topology(state.cabling)), strict=True):
        test: dict[str, Any] = {
            "id": f"r{number}-{tag}",
            "kind": "all_reduce",
            "nodes": list(half),
            "suspects": list(half),
        }
        if len(half) == 1:
            if pads:
                test["nodes"] = sorted([half[0], pads[0]], key=_natural)
            else:
                test["kind"] = "inferred"
        tests.append(test)
    return tests


def _settle(state: State, kind: str, text: str, **extra: Any) -> None:
    state.result = {"kind": kind, "text": text, "rounds": len(state.rounds), **extra}


def record(state: State, tests: list[dict[str, Any]], results: dict[str, Any]) -> State:
    """Record a round's figures and narrow the suspects (the state is changed in place and returned).

    ``results``: per test id, the all_reduce busbw in GB/s, or for ib_write_bw a dict rail -> Gb/s;
    None (or a missing id, a missing rail) where the test could not run or be read. ``"error:<id>"``
    keys may carry why."""
    figures: dict[str, Any] = {}
    round_: dict[str, Any] = {"round": len(state.rounds) + 1, "suspects": list(state.suspects), "tests": []}
    for test in tests:
        entry = dict(test)
        value = results.get(test["id"])
        entry["figure"] = value
        if results.get(f"error:{test['id']}"):
            entry["error"] = results[f"error:{test['id']}"]
        figures[test["id"]] = value
        round_["tests"].append(entry)
    state.rounds.append(round_)
    if any(t["kind"] == "ib_write_bw" for t in tests):
        _record_pair(state, tests, figures)
    else:
        _record_halves(state, tests, figures)
    round_["after"] = list(state.suspects)
    if state.result is None and state.max_rounds is not None and len(state.rounds) >= state.max_rounds:
        _settle(
            state,
            ERROR,
            f"stopped after {len(state.rounds)} round(s) (max_rounds); suspects {', '.join(state.suspects)}",
        )
    return state


def _failed(state: State, test: dict[str, Any], what: str) -> None:
    entry = next(t for t in state.rounds[-1]["tests"] if t["id"] == test["id"])
    why = entry.get("error") or "no figure"
    _settle(state, ERROR, f"round {len(state.rounds)}: {what} on {', '.join(test['nodes'])} did not run ({why})")


def _record_halves(state: State, tests: list[dict[str, Any]], figures: dict[str, Any]) -> None:
    slow: list[dict[str, Any]] = []
    fast: list[dict[str, Any]] = []
    inferred: list[dict[str, Any]] = []
    for test in tests:
        if test["kind"] == "inferred":
            inferred.append(test)
            continue
        value = figures.get(test["id"])
        if value is None:
            _failed(state, test, "all_reduce")
            return
        (slow if value < state.floor else fast).append(test)
    for test in fast:
        state.good.extend(n for n in test["suspects"] if n not in state.good)
    if len(slow) > 1:
        parts = "; ".join(f"{', '.join(t['suspects'])}: {figures[t['id']]:g} GB/s" for t in slow)
        _settle(
            state,
            MULTIPLE,
            f"more than one suspect: both halves ran below the floor {state.floor:g} GB/s ({parts});"
            " bisection finds one slow node: check each half on its own",
            suspects=[n for t in slow for n in t["suspects"]],
        )
        return
    if slow:
        state.suspects = list(slow[0]["suspects"])
        for test in inferred:  # not run: presumed good under the one-slow-node premise (a peer of last resort)
            state.reference.extend(n for n in test["suspects"] if n not in state.reference)
        return
    if inferred:
        state.suspects = list(inferred[0]["suspects"])
        state.rounds[-1]["inferred"] = list(state.suspects)
        return
    figures_text = ", ".join(f"{', '.join(t['suspects'])}: {figures[t['id']]:g} GB/s" for t in fast)
    where = "the whole node set" if len(state.rounds) == 1 else f"{', '.join(state.rounds[-1]['suspects'])} together"
    _settle(
        state,
        NONE,
        f"no single node below the floor: every half met {state.floor:g} GB/s ({figures_text}); the slowness "
        f"needs {where} (the spine or uplinks, congestion from other jobs, NCCL settings of the job),"
        " not one node or cable",
        suspects=[],
    )


def _record_pair(state: State, tests: list[dict[str, Any]], figures: dict[str, Any]) -> None:
    topo = topology(state.cabling)
    below: dict[str, list[dict[str, Any]]] = {}
    for test in tests:
        value = figures.get(test["id"]) or {}
        for rail in test["rails"]:
            gbps = value.get(rail["rail"], value.get(str(rail["rail"])))
            if gbps is None:
                _failed(
                    state, test, f"ib_write_bw rail {rail['rail']} ({rail['hca']} -> {test['peer']} {rail['peer_hca']})"
                )
                return
            if gbps < state.nic_floor:
                port = next(p for p in topo[test["node"]] if p.rail == rail["rail"])
                below.setdefault(test["node"], []).append(
                    {
                        "rail": rail["rail"],
                        "hca": rail["hca"],
                        "gbps": gbps,
                        "peer": test["peer"],
                        "cable": port.cable(),
                    }
                )
    if len(below) > 1:
        parts = "; ".join(f"{node} rail {', '.join(str(x['rail']) for x in rails)}" for node, rails in below.items())
        _settle(
            state,
            MULTIPLE,
            f"more than one suspect: ib_write_bw below {state.nic_floor:g} Gb/s on {parts}",
            suspects=sorted(below, key=_natural),
            links=[x for rails in below.values() for x in rails],
        )
        return
    if below:
        node, rails = next(iter(below.items()))
        worst = min(rails, key=lambda x: x["gbps"])
        cables = "; ".join(f"{x['cable']} ({x['gbps']:g} Gb/s)" for x in rails)
        inferred = any(r.get("inferred") for r in state.rounds)
        _settle(
            state,
            FOUND,
            f"{node}: rail {worst['rail']} writes {worst['gbps']:g} Gb/s to {worst['peer']},"
            f" below {state.nic_floor:g} Gb/s; cable {cables}" + (" (one half inferred, not run)" if inferred else ""),
            node=node,
            rail=worst["rail"],
            hca=worst["hca"],
            cable=worst["cable"],
            links=rails,
            suspects=[node],
        )
        return
    _settle(
        state,
        NO_LINK,
        f"{', '.join(state.suspects)}: every rail met {state.nic_floor:g} Gb/s against a good node; the all_reduce "
        "slowness is inside the node(s) (GPU, NVLink, PCIe: run the single-node all_reduce and dcgmi diag there),"
        " not a cable",
        suspects=list(state.suspects),
    )


def verdict(state: State) -> dict[str, Any] | None:
    """The settled answer (None while rounds remain): ``kind`` (found|multiple|none|no_link|error), ``text``,
    ``rounds``; with ``found`` also ``node``, ``rail``, ``hca``, ``cable`` and ``links`` (every rail below)."""
    return state.result


def run(state: State, measure: Any) -> State:
    """Drive the search to its verdict with ``measure(tests) -> results`` (the module's Slurm runner, a model)."""
    while state.result is None:
        tests = next_round(state)
        record(state, tests, measure(tests))
    return state


# ------------------------------------------------------------------ figures from the tools' output
# The module on the head reads the same two figures the acceptance gates read (the controller's
# plugin_utils/validation/parsers.py, which module_utils may not import); a unit test checks both
# readers agree on every recorded output in tests/data/acceptance.


def all_reduce_busbw(text: str, gate_bytes: int) -> float | None:
    """nccl-tests all_reduce_perf: the lowest busbw (out-of-place or in-place) of the rows at or above
    ``gate_bytes`` (the largest row if none reaches it), GB/s; None without a result row."""
    rows: list[tuple[int, float]] = []
    for line in (text or "").splitlines():
        cols = line.split()
        if len(cols) < 13 or line.lstrip().startswith("#") or not cols[0].isdigit() or not cols[1].isdigit():
            continue
        try:
            rows.append((int(cols[0]), min(float(cols[7]), float(cols[11]))))
        except ValueError:
            continue
    if not rows:
        return None
    large = [bw for size, bw in rows if size >= gate_bytes]
    return min(large) if large else max(rows)[1]


def ib_write_bw_gbps(text: str) -> float | None:
    """perftest ib_write_bw (client): BW average of the largest message in Gb/s (MB/sec converted:
    perftest's MB is MiB); None without a result table."""
    unit = None
    rows: list[tuple[int, float]] = []
    for line in (text or "").splitlines():
        if unit is None:
            if "#bytes" in line and "BW average[" in line:
                unit = "Gb" if "BW average[Gb/sec]" in line else "MB"
            continue
        cols = line.split()
        if len(cols) >= 5 and cols[0].isdigit() and cols[1].isdigit():
            try:
                rows.append((int(cols[0]), float(cols[3])))
            except ValueError:
                continue
    if not rows:
        return None
    value = max(rows)[1]
    return round(value if unit == "Gb" else value * 2**20 * 8 / 1e9, 2)


def report_markdown(cluster: str, state: dict[str, Any]) -> str:
    """report.md of a search (``State.to_dict()`` as the module returns it)."""
    result = state.get("result") or {}
    lines = [
        f"# Bisection of {cluster}",
        "",
        f"Nodes: {', '.join(state['nodes'])} ({len(state['nodes'])}); all_reduce floor {state['floor']:g} GB/s busbw,"
        f" ib_write_bw floor {state['nic_floor']:g} Gb/s.",
        "",
        f"**Verdict ({result.get('kind', 'pending')}, {len(state['rounds'])} round(s)):**"
        f" {result.get('text', 'not settled')}",
        "",
    ]
    if result.get("cable"):
        lines += [f"Cable: `{result['cable']}`", ""]
    lines += ["| round | test | nodes | figure | below the floor |", "|---|---|---|---|---|"]
    for rnd in state["rounds"]:
        for test in rnd["tests"]:
            fig = test.get("figure")
            if test["kind"] == "ib_write_bw":
                for rail in test["rails"]:
                    gbps = (fig or {}).get(rail["rail"], (fig or {}).get(str(rail["rail"])))
                    shown = "not run" if gbps is None else f"{gbps:g} Gb/s"
                    low = "" if gbps is None else ("yes" if gbps < state["nic_floor"] else "no")
                    lines.append(
                        f"| {rnd['round']} | ib_write_bw rail {rail['rail']} | {test['node']} {rail['hca']} -> "
                        f"{test['peer']} {rail['peer_hca']} | {shown} | {low} |"
                    )
                continue
            if test["kind"] == "inferred":
                shown, low = "inferred", ""
            else:
                shown = "not run" if fig is None else f"{fig:g} GB/s"
                low = "" if fig is None else ("yes" if fig < state["floor"] else "no")
            lines.append(f"| {rnd['round']} | all_reduce | {', '.join(test['nodes'])} | {shown} | {low} |")
    return "\n".join(lines) + "\n"
