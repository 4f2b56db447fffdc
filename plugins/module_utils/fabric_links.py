"""The links and HCAs of a planned fabric, generated from its design.

The plan's ``fabric.cabling`` is the design (plugin_utils/fabric/cabling.py ``expected_cabling``): its
topology, rail HCAs, scalable units (their hosts and rail leaves, a pod each in three tiers), switches
and ``sizing`` (hosts per leaf, oversubscription, spines per group, pods, cores per group). The cables
follow from it by the rules of docs/fabric.md: host k of an SU on port k+1 of its rail's leaf (a single
switch: host i's rail r on port i*rails+r+1); a leaf's uplinks after its h_max host ports, the same
number to every spine of its group; a pod spine's uplinks after its k/2 down ports, to its core group.
:func:`links` yields them in plan order (hosts, then per spine group its leaves' uplinks, then in
three tiers per pod its leaves' then its spines' uplinks), :func:`hcas` each compute host's rails.

Target side too (imported by ibfabric and the ``fabric_check`` module; Python 3.10), pure, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypedDict


class _SwitchPort(TypedDict):
    node: str
    port: int


class LinkEnd(_SwitchPort, total=False):
    """One end of a cable: a switch port, or a host's HCA port (``hca``)."""

    hca: str


class Link(TypedDict):
    """A cable: ``kind`` host, uplink, core or subnet_manager; ``rail`` None for a shared spine's core links."""

    a: LinkEnd
    b: LinkEnd
    rail: int | None
    kind: str


class Hca(TypedDict):
    """A compute host's rail HCA."""

    host: str
    hca: str
    rail: int


def switch_name(prefix: str, index: int, total: int) -> str:
    """A switch's (or SU's, pod's) name: ``prefix`` and its 1-based index, zero-padded to the total's width."""
    return f"{prefix}{index:0{max(2, len(str(total)))}d}"


def uplinks_needed(hosts: int, oversubscription: float) -> int:
    """The uplinks a leaf of ``hosts`` host ports needs at ``oversubscription``: ceil(hosts / o), at least 1."""
    return max(1, math.ceil(hosts / oversubscription - 1e-9))


def hcas(cabling: Mapping[str, Any]) -> Iterator[Hca]:
    """Each compute host's rail HCAs (``host``, ``hca``, ``rail``), in SU then host then rail order (a cabling
    that lists its ``hcas``, hand-written or of an older plan, is read as it is)."""
    if "hcas" in cabling:
        yield from cabling["hcas"]
        return
    rail_hcas = list(cabling.get("rail_hcas") or [])
    for su in cabling.get("scalable_units") or []:
        for host in su["hosts"]:
            for rail, hca in enumerate(rail_hcas):
                yield {"host": host, "hca": hca, "rail": rail}


def hca_count(cabling: Mapping[str, Any]) -> int:
    """How many compute HCAs the design holds (without generating them)."""
    if "hcas" in cabling:
        return len(cabling["hcas"])
    rails = len(cabling.get("rail_hcas") or [])
    return rails * sum(len(su["hosts"]) for su in cabling.get("scalable_units") or [])


#: The HCA port of every host cable (a rail HCA is cabled on its port 1).
HOST_HCA_PORT = 1


def _host(host: str, hca: str, rail: int, switch: str, port: int) -> Link:
    return {
        "a": {"node": host, "hca": hca, "port": HOST_HCA_PORT},
        "b": {"node": switch, "port": port},
        "rail": rail,
        "kind": "host",
    }


def host_ports(cabling: Mapping[str, Any]) -> Iterator[tuple[str, str, int]]:
    """The host end (host, hca, port) of each host cable of :func:`links`, without generating the cables (the
    switch ends and the uplinks); a cabling that lists its ``links`` is read as it is."""
    if "links" in cabling:
        for link in cabling["links"]:
            end = link["a"]
            if link.get("kind") == "host":
                yield end["node"], end["hca"], end["port"]
        return
    units = list(cabling.get("scalable_units") or [])
    rail_hcas = list(cabling.get("rail_hcas") or [])
    if not units or not rail_hcas:
        return
    for su in units[:1] if cabling["topology"] == "single_switch" else units:
        for host in su["hosts"]:
            for hca in rail_hcas:
                yield host, hca, HOST_HCA_PORT


def _uplinks(
    name: str, rail: int | None, base: int, uppers: list[str], per: int, up_port: int, kind: str
) -> Iterator[Link]:
    """``per`` links from switch ``name`` to each of ``uppers``: its port base + j*S + s + 1, the upper's
    up_port + j + 1."""
    count = len(uppers)
    for s, upper in enumerate(uppers):
        for j in range(per):
            yield {
                "a": {"node": name, "port": base + j * count + s + 1},
                "b": {"node": upper, "port": up_port + j + 1},
                "rail": rail,
                "kind": kind,
            }


def links(cabling: Mapping[str, Any]) -> Iterator[Link]:
    """Every planned cable of the design, in plan order (without the subnet manager's ``sm_links``; a
    cabling that lists its ``links``, hand-written or of an older plan, is read as it is)."""
    if "links" in cabling:
        yield from cabling["links"]
        return
    units = list(cabling.get("scalable_units") or [])
    rail_hcas = list(cabling.get("rail_hcas") or [])
    rails = len(rail_hcas)
    if not units or not rails:
        return
    if cabling["topology"] == "single_switch":
        leaf = units[0]["leaves"][0]
        for i, host in enumerate(units[0]["hosts"]):
            for rail, hca in enumerate(rail_hcas):
                yield _host(host, hca, rail, leaf, i * rails + rail + 1)
        return
    for su in units:
        for rail, hca in enumerate(rail_hcas):
            leaf = su["leaves"][rail]
            for k, host in enumerate(su["hosts"]):
                yield _host(host, hca, rail, leaf, k + 1)
    sizing = cabling.get("sizing") or {}
    if int(sizing.get("tiers", 1)) < 2:
        return
    yield from _tree_links(cabling, units, rails, sizing)


def _group_leaves(units: Sequence[Mapping[str, Any]], rails: int, by_rail: bool) -> list[list[tuple[str, int, int]]]:
    """Per spine group, its leaves in plan order: (name, rail, SU index)."""
    if by_rail:
        return [[(su["leaves"][r], r, i) for i, su in enumerate(units)] for r in range(rails)]
    return [[(leaf, r, i) for i, su in enumerate(units) for r, leaf in enumerate(su["leaves"])]]


def _tree_links(cabling: Mapping[str, Any], units: list[Any], rails: int, sizing: Mapping[str, Any]) -> Iterator[Link]:
    """The uplinks of a fat tree: leaf to spine (two tiers), and in three tiers pod spine to core."""
    by_rail = cabling.get("spine_scope") == "rail"
    per_su = int(sizing["hosts_per_leaf"])
    over = float(sizing["oversubscription"])
    spines = int(sizing["spines_per_group"])
    groups = int(sizing["spine_groups"])
    need = [uplinks_needed(len(su["hosts"]), over) for su in units]
    group_leaves = _group_leaves(units, rails, by_rail)
    if int(sizing["tiers"]) == 2:
        for g, leaves in enumerate(group_leaves):
            names = [switch_name("spine", g * spines + s + 1, groups * spines) for s in range(spines)]
            used = 0
            for leaf, rail, su in leaves:
                per = math.ceil(need[su] / spines)
                yield from _uplinks(leaf, rail, per_su, names, per, used, "uplink")
                used += per
        return
    pod_names = list(dict.fromkeys(su["pod"] for su in units))
    pod_of = [pod_names.index(su["pod"]) for su in units]
    pods = len(pod_names)
    cores = int(sizing["cores_per_group"])
    half = int(sizing["switch_radix"]) // 2
    per_group = 1 if by_rail else rails
    down = [0] * pods
    for su, q in enumerate(pod_of):
        down[q] += per_group * math.ceil(need[su] / spines)
    for g, leaves in enumerate(group_leaves):
        rail_of_group = g if by_rail else None
        core_names = [
            [switch_name("core", (g * spines + j) * cores + t + 1, groups * spines * cores) for t in range(cores)]
            for j in range(spines)
        ]
        core_used = [0] * spines
        for q in range(pods):
            names = [
                switch_name("spine", (g * pods + q) * spines + s + 1, groups * pods * spines) for s in range(spines)
            ]
            used = 0
            for leaf, rail, su in leaves:
                if pod_of[su] != q:
                    continue
                per = math.ceil(need[su] / spines)
                yield from _uplinks(leaf, rail, per_su, names, per, used, "uplink")
                used += per
            per_core = math.ceil(down[q] / cores)
            for j, spine in enumerate(names):
                yield from _uplinks(spine, rail_of_group, half, core_names[j], per_core, core_used[j], "core")
                core_used[j] += per_core


def link_count(cabling: Mapping[str, Any]) -> int:
    """How many cables the design holds (host, leaf-spine and spine-core; without the SM's)."""
    if "links" in cabling:
        return len(cabling["links"])
    sizing = cabling.get("sizing") or {}
    return int(sizing.get("host_links", 0)) + int(sizing.get("uplinks", 0)) + int(sizing.get("core_links", 0))
