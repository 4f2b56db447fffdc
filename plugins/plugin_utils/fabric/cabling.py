"""The compute fabric: expected cabling and the Slurm topology it implies.

Rail-optimized designs give each rail (the NIC paired with GPU r on every node) its own leaf switch
per scalable unit (SU). Without spines (``rail_optimized``) an SU holds up to ``switch_radix`` hosts
and the fabric is one SU. A ``fat_tree`` is sized from first principles (docs/fabric.md, "Sizing";
the DGX SuperPOD H100 and B200 compute fabrics [C4] [C7] are its reference tests):

- a leaf of radix k at oversubscription o (host ports : uplinks, 1 = non-blocking) holds
  h_max = the most hosts h with h + ceil(h/o) <= k (k/2 when o = 1): the SU's size;
- each leaf gets the uplinks its own hosts need, ceil(h/o), rounded up so that it has the same
  number of links to every spine of its group (a leaf reaches every spine, or two hosts on
  different leaves could not talk);
- the fewest spines that carry those uplinks (ceil(uplinks / k), at least ``min_spines``, the
  site's redundancy minimum) with every leaf's uplinks spread evenly over them;
- a spine group is the whole fabric (``spine_scope: shared``) or one rail plane (``rail``). When a
  group's leaves outgrow one two-tier tree (more leaves than a spine has ports), the group becomes a
  three-tier fat tree: pods of SUs (at most k/2 leaves each) with their own spines (k/2 ports down,
  k/2 up) and core switches (super-spines) above them; spine j of every pod joins core group j.

Port numbers start at 1; host k of an SU is on leaf port k+1, a leaf's uplinks follow its h_max
host ports, a pod spine's uplinks follow its k/2 down ports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.module_utils import fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import (
    Cabling,
    ScalableUnit,
    Sizing,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.sizing import (
    TREE_DEFAULTS,
    TreeFields,
    hosts_per_leaf,
    radix_for,
    sizing,
    spread,
    tree_fields,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.topology import (
    TOPOLOGY_KINDS,
    slurm_topology,
    topology_conf_text,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import TOPOLOGIES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
)

SPINE_SCOPES = ("shared", "rail")
_name = fabric_links.switch_name
_uplinks_needed = fabric_links.uplinks_needed


def expected_cabling(
    *,
    topology: str,
    compute_hosts: list[str],
    rail_hcas: list[str],
    switch_radix: int = 64,
    spines: int = 0,
    spine_scope: str = "shared",
    link_rate_gbps: float = 400,
    link_width: str = "4x",
    oversubscription: float = 1,
    min_spines: int = 2,
    field: str = "gpucluster_fabric",
    links: bool = True,
) -> Cabling:
    """The planned fabric's design (switches, scalable units, rail HCAs, ``sizing``; deterministic order).

    ``spines``: 0 plans the fewest spines per group; a number is the site's own count (two tiers).
    ``links``: with the design's ``hcas`` and ``links`` expanded (fabric.links generates them), what the
    ``expected_cabling`` filter answers; the plan keeps the design alone (``links=False``).
    """
    check_choice(topology, f"{field}.topology", TOPOLOGIES)
    radix = int(check_range(switch_radix, f"{field}.switch_radix", 4, 1024, integer=True))
    out: Cabling = {
        "topology": topology,
        "link_rate_gbps": link_rate_gbps,
        "link_width": link_width,
        "rail_hcas": list(rail_hcas),
        "spine_scope": spine_scope,
        "scalable_units": [],
        "switches": [],
        "sizing": {},
    }
    _design(out, list(compute_hosts), radix, spines, oversubscription, min_spines, field)
    return expand(out) if links else out


def expand(cabling: Cabling) -> Cabling:
    """The design with its generated ``hcas`` and ``links`` (before its ``sizing``, the former plans' order)."""
    out: Cabling = {
        "topology": cabling["topology"],
        "link_rate_gbps": cabling["link_rate_gbps"],
        "link_width": cabling["link_width"],
        "rail_hcas": cabling["rail_hcas"],
        "spine_scope": cabling["spine_scope"],
        "scalable_units": cabling["scalable_units"],
        "switches": cabling["switches"],
        "hcas": list(fabric_links.hcas(cabling)),
        "links": list(fabric_links.links(cabling)),
        "sizing": cabling["sizing"],
    }
    return out


def _design(
    out: Cabling, hosts: list[str], radix: int, spines: int, oversubscription: float, min_spines: int, field: str
) -> None:
    """Fill ``out`` (its topology and rails set) with the switches, SUs and sizing of its topology."""
    topology, rails = out["topology"], len(out["rail_hcas"])
    if topology == "none" or not rails:
        return
    if topology == "single_switch":
        if len(hosts) * rails > radix:
            raise PlanError(
                f"{field}.topology",
                topology,
                f"at most {radix // rails} hosts of {rails} rails on one {radix}-port switch",
            )
        out["switches"] = [{"name": "ib-sw01", "kind": "switch", "rail": None, "su": 1, "ports": radix}]
        out["scalable_units"] = [{"name": "su01", "hosts": hosts, "leaves": ["ib-sw01"]}]
        out["sizing"] = sizing(
            out["switches"], 1, radix, 1, len(hosts) * rails, tiers=1, links=(len(hosts) * rails, 0, 0)
        )
        return
    if topology == "rail_optimized":
        if len(hosts) > radix:
            raise PlanError(
                f"{field}.topology",
                topology,
                f"fat_tree (with spines) for more than {radix} hosts: one {radix}-port rail leaf holds {radix} hosts",
            )
        _leaves(out, hosts, radix, len(hosts) or 1)
        out["sizing"] = sizing(
            out["switches"], len(out["scalable_units"]), radix, 1, len(hosts), tiers=1, links=(len(hosts) * rails, 0, 0)
        )
        return
    scope = check_choice(out["spine_scope"], f"{field}.spine_scope", SPINE_SCOPES)
    over = check_range(oversubscription, f"{field}.oversubscription", 1, 16)
    per_su = hosts_per_leaf(radix, over)
    # a leaf reaches every spine of its group: at most its radix - h_max uplink ports of them
    minimum = int(check_range(min_spines, f"{field}.min_spines", 1, radix - per_su, integer=True))
    fixed = int(check_range(spines, f"{field}.spines", 0, radix - per_su, integer=True)) or None
    _leaves(out, hosts, radix, per_su)
    _fat_tree(out, _Tree(radix, rails, over, minimum, fixed, scope, per_su, field))


def site_cabling(
    section: Mapping[str, object],
    *,
    fabric_type: str,
    topology: str,
    compute_hosts: list[str],
    rail_hcas: list[str],
    link_rate_gbps: float = 400,
    link_width: str = "4x",
    field: str = "gpucluster_fabric",
    links: bool = True,
) -> Cabling:
    """:func:`expected_cabling` of an inventory's ``gpucluster_fabric`` section (fabric/plan.py, tco.py)."""
    tree = tree_fields(section)
    return expected_cabling(
        topology=topology,
        compute_hosts=compute_hosts,
        rail_hcas=rail_hcas,
        switch_radix=radix_for(section, fabric_type, link_rate_gbps, field),
        link_rate_gbps=link_rate_gbps,
        link_width=link_width,
        field=field,
        links=links,
        spines=tree["spines"],
        spine_scope=tree["spine_scope"],
        oversubscription=tree["oversubscription"],
        min_spines=tree["min_spines"],
    )


def _leaves(out: Cabling, hosts: list[str], radix: int, per_su: int) -> None:
    """The SUs of ``per_su`` hosts and their rail leaves (rail r of SU s: leaf s*rails + r + 1)."""
    rails = len(out["rail_hcas"])
    su_count = max(1, math.ceil(len(hosts) / per_su))
    leaves_total = su_count * rails
    for su in range(su_count):
        members = hosts[su * per_su : (su + 1) * per_su]
        leaves = []
        for r in range(rails):
            leaf = _name("leaf", su * rails + r + 1, leaves_total)
            leaves.append(leaf)
            out["switches"].append({"name": leaf, "kind": "leaf", "rail": r, "su": su + 1, "ports": radix})
        out["scalable_units"].append({"name": _name("su", su + 1, su_count), "hosts": members, "leaves": leaves})


@dataclass(frozen=True)
class _Tree:
    """A fat tree's checked inputs: radix, rails, oversubscription, spine minimum and fixed count, scope, h_max."""

    radix: int
    rails: int
    over: float
    minimum: int
    fixed: int | None
    scope: str
    per_su: int
    field: str

    @property
    def groups(self) -> int:
        """Spine groups: one per rail plane, or the whole fabric."""
        return self.rails if self.scope == "rail" else 1

    @property
    def per_group(self) -> int:
        """Leaves of one SU in one spine group."""
        return 1 if self.scope == "rail" else self.rails


def _needs(tree: _Tree, need: list[int], sus: list[int]) -> dict[int, tuple[int, int]]:
    """{uplinks a leaf needs: (how many leaves, their free ports)} of the SUs ``sus``."""
    table: dict[int, tuple[int, int]] = {}
    for i in sus:
        count = table.get(need[i], (0, 0))[0]
        table[need[i]] = (count + tree.per_group, tree.radix - tree.per_su)
    return table


def _fat_tree(out: Cabling, tree: _Tree) -> None:
    """The spines (two tiers) or pods and core switches (three tiers) above the leaves, and the sizing."""
    units = out["scalable_units"]
    radix, rails, field = tree.radix, tree.rails, tree.field
    host_links = sum(len(su["hosts"]) for su in units) * rails
    need = [_uplinks_needed(len(su["hosts"]), tree.over) for su in units]
    everyone = list(range(len(units)))
    two_tier = spread(_needs(tree, need, everyone), radix, tree.minimum, tree.fixed)
    if two_tier is not None:
        _spines(out, tree, [everyone], two_tier)
        uplinks = sum(rails * two_tier * math.ceil(n / two_tier) for n in need)
        out["sizing"] = sizing(
            out["switches"], len(units), radix, tree.over, tree.per_su, tiers=2, spines_per_group=two_tier,
            groups=tree.groups, links=(host_links, uplinks, 0),
        )  # fmt: skip
        return
    if tree.fixed:
        two = spread(_needs(tree, need, everyone), radix, tree.minimum)
        allowed = (
            f"a spine count that carries every leaf's uplinks evenly: the fewest is {two} (unset spines to get it)"
            if two
            else "unset: this fabric outgrows two tiers; the plan makes it a three-tier fat tree (pods, core switches)"
        )
        raise PlanError(f"{field}.spines", tree.fixed, allowed)
    half = radix // 2
    sus_per_pod = half // tree.per_group
    if sus_per_pod < 1:
        raise PlanError(
            f"{field}.spine_scope",
            tree.scope,
            f"rail: {rails} rail leaves per SU do not fit a pod of {radix}-port spines ({half} ports down)",
        )
    pods = [list(range(i, min(i + sus_per_pod, len(units)))) for i in range(0, len(units), sus_per_pod)]
    pod_spines = spread(_needs(tree, need, pods[0]), half, tree.minimum)
    if pod_spines is None:  # pragma: no cover - a full pod of k/2 leaves always fits k/2 spines
        raise PlanError(f"{field}.switch_radix", radix, "a radix whose pods fit their spines")
    down = [sum(tree.per_group * math.ceil(need[i] / pod_spines) for i in pod) for pod in pods]
    core_needs: dict[int, tuple[int, int]] = {}
    for d in down:
        count = core_needs.get(d, (0, half))[0]
        core_needs[d] = (count + 1, half)  # a pod spine's uplinks: the ports above its k/2 down ports
    cores = spread(core_needs, radix, 1)
    if cores is None:
        most = radix * half * (radix // 2) // tree.per_group
        raise PlanError(
            "groups.compute",
            f"{len(units)} scalable units",
            f"a fat tree of at most three tiers: {radix}-port switches hold {most} hosts per spine group"
            f" ({'rail plane' if tree.scope == 'rail' else 'fabric'}); a fourth tier is not planned",
        )
    _spines(out, tree, pods, pod_spines, cores)
    uplinks = sum(rails * pod_spines * math.ceil(n / pod_spines) for n in need)
    core_links = tree.groups * pod_spines * sum(cores * math.ceil(d / cores) for d in down)
    out["sizing"] = sizing(
        out["switches"], len(units), radix, tree.over, tree.per_su, tiers=3, spines_per_group=pod_spines,
        groups=tree.groups, pods=len(pods), sus_per_pod=sus_per_pod, cores_per_group=cores,
        links=(host_links, uplinks, core_links),
    )  # fmt: skip


def _spines(out: Cabling, tree: _Tree, pods: list[list[int]], spines: int, cores: int = 0) -> None:
    """The spine switches of every group (two tiers: one pod of every SU), and with ``cores`` the pods'
    spines under their core switches (spine j of every pod joins core group j), in plan order."""
    radix, groups = tree.radix, tree.groups
    three = cores > 0
    if three:
        for q, pod in enumerate(pods):
            for su in pod:
                out["scalable_units"][su]["pod"] = _name("pod", q + 1, len(pods))
    spine_total = groups * len(pods) * spines
    core_total = groups * spines * cores
    for g in range(groups):
        rail = g if tree.scope == "rail" else None
        for j in range(spines if three else 0):
            out["switches"] += [
                {"name": _name("core", (g * spines + j) * cores + t + 1, core_total), "kind": "core", "rail": rail,
                 "su": None, "ports": radix}
                for t in range(cores)
            ]  # fmt: skip
        for q in range(len(pods)):
            for s in range(spines):
                name = _name("spine", (g * len(pods) + q) * spines + s + 1, spine_total)
                if three:  # the pod before the ports: the former plans' key order
                    pod_name = _name("pod", q + 1, len(pods))
                    out["switches"].append(
                        {"name": name, "kind": "spine", "rail": rail, "su": None, "pod": pod_name, "ports": radix}
                    )
                else:
                    out["switches"].append({"name": name, "kind": "spine", "rail": rail, "su": None, "ports": radix})


__all__ = [
    "SPINE_SCOPES",
    "TOPOLOGY_KINDS",
    "TREE_DEFAULTS",
    "Cabling",
    "ScalableUnit",
    "Sizing",
    "TreeFields",
    "expand",
    "expected_cabling",
    "hosts_per_leaf",
    "radix_for",
    "site_cabling",
    "slurm_topology",
    "spread",
    "topology_conf_text",
    "tree_fields",
]
