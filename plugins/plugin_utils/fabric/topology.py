"""Slurm's topology/tree from the fabric's design (fabric/cabling.py): the switches of topology.conf as data
(:func:`slurm_topology`, in the plan) and their text (:func:`topology_conf_text`, rendered on the way to the host)."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import Cabling, TopologySwitch
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError


def slurm_topology(cabling: Cabling) -> list[TopologySwitch]:
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
    out: list[TopologySwitch] = [
        {"name": su["name"], "kind": "su", "nodes": hostlist.compress(su["hosts"])} for su in units
    ]
    pods: dict[str, list[str]] = {}
    for su in units:
        pod = su.get("pod")
        if pod:
            pods.setdefault(pod, []).append(su["name"])
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


def topology_conf_text(switches: object) -> str:
    """Slurm's topology.conf (topology/tree, docs/sources.md §8.2) from the plan's ``fabric.slurm_topology``
    (:func:`slurm_topology`): "" for no switches. Rendered on the way to the host (filter
    gpucluster.tiers.slurm_topology_conf), not stored in the plan; a line a switch, in the data's order."""
    if not isinstance(switches, list):
        raise PlanError("fabric.slurm_topology", switches, "a list of switches (name, kind, nodes or switches)")
    checked: list[tuple[str, str, str, str]] = []  # name, kind, member key, members
    for i, sw in enumerate(switches):
        fields = sw if isinstance(sw, dict) else {}
        kind, name = fields.get("kind"), fields.get("name")
        member = TOPOLOGY_KINDS.get(kind) if isinstance(kind, str) else None
        members = fields.get(member) if member else None
        if not (isinstance(kind, str) and member and isinstance(name, str) and isinstance(members, str)):
            raise PlanError(
                f"fabric.slurm_topology[{i}]",
                sw,
                "a switch with a name, a kind (" + ", ".join(TOPOLOGY_KINDS) + ") and its nodes or switches",
            )
        checked.append((name, kind, member, members))
    if not checked:
        return ""
    lines = [
        "# Managed by gpucluster.tiers: Slurm topology/tree from the fabric plan.",
        "# Each scalable unit (its hosts and all their rail leaves) is one logical switch.",
    ]
    for i, (name, kind, member, members) in enumerate(checked):
        if kind == "pod" and (i == 0 or checked[i - 1][1] != "pod"):
            lines.append("# Three tiers: the SUs of a pod meet at its spines, the pods at the core switches.")
        lines.append(f"SwitchName={name} {member.capitalize()}={members}")
    return "\n".join(lines) + "\n"
