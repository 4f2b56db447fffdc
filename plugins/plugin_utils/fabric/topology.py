"""Slurm's topology/tree from the fabric's design (fabric/cabling.py): the switches of topology.conf as data
(:func:`slurm_topology`, in the plan) and their text (:func:`topology_conf_text`, rendered on the way to the host)."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, require


def slurm_topology(cabling: dict[str, Any]) -> list[dict[str, str]]:
    """Slurm's topology/tree as data (docs/sources.md §8.2): its switches in topology.conf's order, each
    with its ``kind`` and its members as one Slurm hostlist expression, ``nodes`` or ``switches``;
    [] when there is no switched fabric.

    In a rail-optimized fabric every host of an SU hangs off all of that SU's rail leaves,
    so the SU is one logical switch for Slurm (kind ``su``); SUs meet at the spines (kind ``spines``, two
    tiers), or at their pod's spines (kind ``pod``) and the pods at the core switches (kind ``core``, three
    tiers). A single switch is kind ``switch``. The members are compressed once here: every Slurm host
    renders topology.conf (:func:`topology_conf_text`, filter gpucluster.tiers.slurm_topology_conf) from
    the same few lines of data, not from the cabling's host lists.
    """
    units = cabling.get("scalable_units") or []
    if not units:
        return []
    if cabling["topology"] == "single_switch":
        return [{"name": "ib-sw01", "kind": "switch", "nodes": hostlist.compress(units[0]["hosts"])}]
    out = [{"name": su["name"], "kind": "su", "nodes": hostlist.compress(su["hosts"])} for su in units]
    pods: dict[str, list[str]] = {}
    for su in units:
        if su.get("pod"):
            pods.setdefault(su["pod"], []).append(su["name"])
    if pods:
        out += [{"name": pod, "kind": "pod", "switches": hostlist.compress(sus)} for pod, sus in pods.items()]
        out.append({"name": "core", "kind": "core", "switches": hostlist.compress(list(pods))})
    elif len(units) > 1:
        out.append({"name": "spines", "kind": "spines", "switches": hostlist.compress([su["name"] for su in units])})
    return out


#: The keys of a switch of :func:`slurm_topology`: its members are nodes or switches, never both.
TOPOLOGY_KINDS: dict[str, str] = {
    "switch": "nodes",
    "su": "nodes",
    "spines": "switches",
    "pod": "switches",
    "core": "switches",
}


def topology_conf_text(switches: list[dict[str, Any]]) -> str:
    """Slurm's topology.conf (topology/tree, docs/sources.md §8.2) from the plan's ``fabric.slurm_topology``
    (:func:`slurm_topology`): "" for no switches. Rendered on the way to the host (filter
    gpucluster.tiers.slurm_topology_conf), not stored in the plan; a line a switch, in the data's order."""
    if not isinstance(switches, list):
        raise PlanError("fabric.slurm_topology", switches, "a list of switches (name, kind, nodes or switches)")
    for i, sw in enumerate(switches):
        member = TOPOLOGY_KINDS.get(sw.get("kind")) if isinstance(sw, dict) else None
        require(
            member is not None and isinstance(sw.get("name"), str) and isinstance(sw.get(member), str),
            f"fabric.slurm_topology[{i}]",
            sw,
            "a switch with a name, a kind (" + ", ".join(TOPOLOGY_KINDS) + ") and its nodes or switches",
        )
    if not switches:
        return ""
    lines = [
        "# Managed by gpucluster.tiers: Slurm topology/tree from the fabric plan.",
        "# Each scalable unit (its hosts and all their rail leaves) is one logical switch.",
    ]
    for i, sw in enumerate(switches):
        if sw["kind"] == "pod" and (i == 0 or switches[i - 1]["kind"] != "pod"):
            lines.append("# Three tiers: the SUs of a pod meet at its spines, the pods at the core switches.")
        member = TOPOLOGY_KINDS[sw["kind"]]
        lines.append(f"SwitchName={sw['name']} {member.capitalize()}={sw[member]}")
    return "\n".join(lines) + "\n"
