"""The former expansion of the fabric plan (every link and HCA listed), kept for test_links.py alone: the
plan now carries the design (fabric/cabling.py) and fabric/links.py generates these lists from it.

The compute fabric: expected cabling and the Slurm topology it implies.

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
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS, TOPOLOGIES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)

SPINE_SCOPES = ("shared", "rail")


def _name(prefix: str, index: int, total: int) -> str:
    return f"{prefix}{index:0{max(2, len(str(total)))}d}"


def _host_link(host: str, hca: str, rail: int, switch: str, port: int) -> dict[str, Any]:
    return {
        "a": {"node": host, "hca": hca, "port": 1},
        "b": {"node": switch, "port": port},
        "rail": rail,
        "kind": "host",
    }


def hosts_per_leaf(radix: int, oversubscription: float) -> int:
    """The most host ports h of a radix-port leaf with h + ceil(h / oversubscription) <= radix."""
    h = int(radix * oversubscription / (oversubscription + 1))
    while h > 0 and h + math.ceil(h / oversubscription - 1e-9) > radix:
        h -= 1
    while h + 1 + math.ceil((h + 1) / oversubscription - 1e-9) <= radix:
        h += 1
    return h


def _uplinks_needed(hosts: int, oversubscription: float) -> int:
    return max(1, math.ceil(hosts / oversubscription - 1e-9))


def spread(needs: dict[int, tuple[int, int]], down_ports: int, minimum: int, fixed: int | None = None) -> int | None:
    """The fewest upper switches S for lower switches whose uplink needs are ``needs``
    ({need: (how many switches, their free ports)}): S >= max(ceil(sum / down_ports), minimum), every
    lower switch with S * ceil(need / S) uplinks within its free ports (the same count to every upper
    switch), every upper switch with sum(ceil(need / S)) <= down_ports. ``fixed``: only that S.
    None when no S fits (the group needs another tier)."""
    total = sum(n * count for n, (count, _free) in needs.items())
    low = max(math.ceil(total / down_ports), minimum, 1)
    candidates = [fixed] if fixed else range(low, max(free for _c, free in needs.values()) + 1)
    for s in candidates:
        if sum(count * math.ceil(n / s) for n, (count, _free) in needs.items()) > down_ports:
            continue
        if all(s * math.ceil(n / s) <= free for n, (_count, free) in needs.items()):
            return s
    return None


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
) -> dict[str, Any]:
    """Switches, HCAs and links of the planned fabric (deterministic order), and its ``sizing``.

    ``spines``: 0 plans the fewest spines per group; a number is the site's own count (two tiers).
    ``links=False``: the switches and the sizing (its counts) only, without the HCA and link lists
    (what the cost model needs of a fabric kind the site does not run).
    """
    check_choice(topology, f"{field}.topology", TOPOLOGIES)
    radix = check_range(switch_radix, f"{field}.switch_radix", 4, 1024, integer=True)
    rails = len(rail_hcas)
    hosts = list(compute_hosts)
    out: dict[str, Any] = {
        "topology": topology,
        "link_rate_gbps": link_rate_gbps,
        "link_width": link_width,
        "scalable_units": [],
        "switches": [],
        "hcas": [],
        "links": [],
        "sizing": {},
    }
    if topology == "none" or not rails:
        return out
    if links:
        out["hcas"] = [{"host": h, "hca": hca, "rail": r} for h in hosts for r, hca in enumerate(rail_hcas)]
    if topology == "single_switch":
        if len(hosts) * rails > radix:
            raise PlanError(
                f"{field}.topology",
                topology,
                f"at most {radix // rails} hosts of {rails} rails on one {radix}-port switch",
            )
        out["switches"] = [{"name": "ib-sw01", "kind": "switch", "rail": None, "su": 1, "ports": radix}]
        out["scalable_units"] = [{"name": "su01", "hosts": hosts, "leaves": ["ib-sw01"]}]
        if links:
            out["links"] = [
                _host_link(h, hca, r, "ib-sw01", i * rails + r + 1)
                for i, h in enumerate(hosts)
                for r, hca in enumerate(rail_hcas)
            ]
        out["sizing"] = _sizing(out, radix, 1, len(hosts) * rails, tiers=1, links=(len(hosts) * rails, 0, 0))
        return out
    if topology == "rail_optimized":
        if len(hosts) > radix:
            raise PlanError(
                f"{field}.topology",
                topology,
                f"fat_tree (with spines) for more than {radix} hosts: one {radix}-port rail leaf holds {radix} hosts",
            )
        _leaves(out, hosts, rail_hcas, radix, len(hosts) or 1, links)
        out["sizing"] = _sizing(out, radix, 1, len(hosts), tiers=1, links=(len(hosts) * rails, 0, 0))
        return out
    check_choice(spine_scope, f"{field}.spine_scope", SPINE_SCOPES)
    over = check_range(oversubscription, f"{field}.oversubscription", 1, 16)
    per_su = hosts_per_leaf(radix, over)
    # a leaf reaches every spine of its group: at most its radix - h_max uplink ports of them
    minimum = check_range(min_spines, f"{field}.min_spines", 1, radix - per_su, integer=True)
    fixed = check_range(spines, f"{field}.spines", 0, radix - per_su, integer=True) or None
    _leaves(out, hosts, rail_hcas, radix, per_su, links)
    _fat_tree(out, radix, rails, over, minimum, fixed, spine_scope, per_su, field, links)
    return out


def radix_for(
    section: dict[str, Any], fabric_type: str, link_rate_gbps: float, field: str = "gpucluster_fabric"
) -> int:
    """Ports per switch: the inventory's ``switch_radix``, else its ``switch_model``'s (catalog.yml
    ``switches``) at the link rate, else the fabric type's default switch's (QM9700 64 x NDR 400G,
    Q3400 144 x XDR 800G, SN5600 128 x 400GbE / 64 x 800GbE)."""
    if section.get("switch_radix") is not None:
        return int(section["switch_radix"])
    if fabric_type not in RDMA_FABRICS:
        return 64  # no switched RDMA fabric: nothing is cabled
    return catalog.switch_radix(fabric_type, link_rate_gbps, section.get("switch_model"), field)


#: the defaults of ``gpucluster_fabric``'s tree fields (docs/inventory.md), read by the cabling and the TCO
#: alike: no spine count of the site's own (sized from the leaves), spines shared by the rails, a
#: non-blocking tree, at least two spines
TREE_DEFAULTS: dict[str, Any] = {"spines": 0, "spine_scope": "shared", "oversubscription": 1, "min_spines": 2}


def tree_fields(section: dict[str, Any]) -> dict[str, Any]:
    """``spines``, ``spine_scope``, ``oversubscription`` and ``min_spines`` of a fabric section, defaulted."""
    return {key: section.get(key, default) for key, default in TREE_DEFAULTS.items()}


def site_cabling(
    section: dict[str, Any],
    *,
    fabric_type: str,
    topology: str,
    compute_hosts: list[str],
    rail_hcas: list[str],
    link_rate_gbps: float = 400,
    link_width: str = "4x",
    field: str = "gpucluster_fabric",
    links: bool = True,
) -> dict[str, Any]:
    """:func:`expected_cabling` of an inventory's ``gpucluster_fabric`` section (fabric/plan.py, tco.py)."""
    return expected_cabling(
        topology=topology,
        compute_hosts=compute_hosts,
        rail_hcas=rail_hcas,
        switch_radix=radix_for(section, fabric_type, link_rate_gbps, field),
        link_rate_gbps=link_rate_gbps,
        link_width=link_width,
        field=field,
        links=links,
        **tree_fields(section),
    )


def _leaves(
    out: dict[str, Any], hosts: list[str], rail_hcas: list[str], radix: int, per_su: int, build: bool = True
) -> None:
    rails = len(rail_hcas)
    su_count = max(1, math.ceil(len(hosts) / per_su))
    leaves_total = su_count * rails
    links = out["links"]
    for su in range(su_count):
        members = hosts[su * per_su : (su + 1) * per_su]
        leaves = []
        for r, hca in enumerate(rail_hcas):
            leaf = _name("leaf", su * rails + r + 1, leaves_total)
            leaves.append(leaf)
            out["switches"].append({"name": leaf, "kind": "leaf", "rail": r, "su": su + 1, "ports": radix})
            if build:
                links.extend(
                    {
                        "a": {"node": h, "hca": hca, "port": 1},
                        "b": {"node": leaf, "port": k + 1},
                        "rail": r,
                        "kind": "host",
                    }
                    for k, h in enumerate(members)
                )
        out["scalable_units"].append({"name": _name("su", su + 1, su_count), "hosts": members, "leaves": leaves})


def _fat_tree(
    out: dict[str, Any],
    radix: int,
    rails: int,
    over: float,
    minimum: int,
    fixed: int | None,
    scope: str,
    per_su: int,
    field: str,
    build: bool = True,
) -> None:
    units = out["scalable_units"]
    host_links = sum(len(su["hosts"]) for su in units) * rails
    groups = rails if scope == "rail" else 1
    per_group = 1 if scope == "rail" else rails  # leaves of one SU in one spine group
    need = [_uplinks_needed(len(su["hosts"]), over) for su in units]
    free = radix - per_su

    def needs_of(sus: list[int]) -> dict[int, tuple[int, int]]:
        table: dict[int, tuple[int, int]] = {}
        for i in sus:
            count = table.get(need[i], (0, free))[0]
            table[need[i]] = (count + per_group, free)
        return table

    two_tier = spread(needs_of(list(range(len(units)))), radix, minimum, fixed)
    if two_tier is not None:
        _two_tier(out, radix, groups, scope, need, two_tier, per_su, build)
        uplinks = sum(rails * two_tier * math.ceil(n / two_tier) for n in need)
        out["sizing"] = _sizing(
            out, radix, over, per_su, tiers=2, spines_per_group=two_tier, groups=groups, links=(host_links, uplinks, 0)
        )
        return
    if fixed:
        two = spread(needs_of(list(range(len(units)))), radix, minimum)
        allowed = (
            f"a spine count that carries every leaf's uplinks evenly: the fewest is {two} (unset spines to get it)"
            if two
            else "unset: this fabric outgrows two tiers; the plan makes it a three-tier fat tree (pods, core switches)"
        )
        raise PlanError(f"{field}.spines", fixed, allowed)
    half = radix // 2
    sus_per_pod = half // per_group
    if sus_per_pod < 1:
        raise PlanError(
            f"{field}.spine_scope",
            scope,
            f"rail: {rails} rail leaves per SU do not fit a pod of {radix}-port spines ({half} ports down)",
        )
    pods = [list(range(i, min(i + sus_per_pod, len(units)))) for i in range(0, len(units), sus_per_pod)]
    pod_spines = spread(needs_of(pods[0]), half, minimum)
    if pod_spines is None:  # pragma: no cover - a full pod of k/2 leaves always fits k/2 spines
        raise PlanError(f"{field}.switch_radix", radix, "a radix whose pods fit their spines")
    down = [sum(per_group * math.ceil(need[i] / pod_spines) for i in pod) for pod in pods]
    core_needs: dict[int, tuple[int, int]] = {}
    for d in down:
        count = core_needs.get(d, (0, half))[0]
        core_needs[d] = (count + 1, half)  # a pod spine's uplinks: the ports above its k/2 down ports
    cores = spread(core_needs, radix, 1)
    if cores is None:
        most = radix * half * (radix // 2) // per_group
        raise PlanError(
            "groups.compute",
            f"{len(units)} scalable units",
            f"a fat tree of at most three tiers: {radix}-port switches hold {most} hosts per spine group"
            f" ({'rail plane' if scope == 'rail' else 'fabric'}); a fourth tier is not planned",
        )
    _three_tier(out, radix, groups, scope, need, pods, pod_spines, down, cores, per_su, build)
    uplinks = sum(rails * pod_spines * math.ceil(n / pod_spines) for n in need)
    core_links = groups * pod_spines * sum(cores * math.ceil(d / cores) for d in down)
    out["sizing"] = _sizing(
        out, radix, over, per_su, tiers=3, spines_per_group=pod_spines, groups=groups, pods=len(pods),
        sus_per_pod=sus_per_pod, cores_per_group=cores, links=(host_links, uplinks, core_links),
    )  # fmt: skip


def _group_leaves(out: dict[str, Any], groups: int) -> list[list[tuple[dict[str, Any], int]]]:
    """Per spine group, its leaves in SU order with their SU index."""
    per: list[list[tuple[dict[str, Any], int]]] = [[] for _group in range(groups)]
    for sw in out["switches"]:
        if sw["kind"] == "leaf":
            per[sw["rail"] if groups > 1 else 0].append((sw, sw["su"] - 1))
    return per


def _uplink(
    links: list[dict[str, Any]], leaf: dict[str, Any], base: int, uppers: list[str], per: int, up_port: int, kind: str
) -> None:
    """``per`` links from ``leaf`` to each of ``uppers``: leaf port base + j*S + s + 1, upper port up_port + j + 1."""
    count = len(uppers)
    rail = leaf["rail"]
    name = leaf["name"]
    links.extend(
        {
            "a": {"node": name, "port": base + j * count + s + 1},
            "b": {"node": upper, "port": up_port + j + 1},
            "rail": rail,
            "kind": kind,
        }
        for s, upper in enumerate(uppers)
        for j in range(per)
    )


def _two_tier(
    out: dict[str, Any], radix: int, groups: int, scope: str, need: list[int], spines: int, per_su: int, build: bool
) -> None:
    total = groups * spines
    links = out["links"]
    for g, leaves in enumerate(_group_leaves(out, groups)):
        names = [_name("spine", g * spines + s + 1, total) for s in range(spines)]
        rail = g if scope == "rail" else None
        out["switches"] += [{"name": n, "kind": "spine", "rail": rail, "su": None, "ports": radix} for n in names]
        used = 0
        for leaf, su in leaves:
            per = math.ceil(need[su] / spines)
            if build:
                _uplink(links, leaf, per_su, names, per, used, "uplink")
            used += per


def _three_tier(
    out: dict[str, Any],
    radix: int,
    groups: int,
    scope: str,
    need: list[int],
    pods: list[list[int]],
    spines: int,
    down: list[int],
    cores: int,
    per_su: int,
    build: bool,
) -> None:
    half = radix // 2
    spine_total = groups * len(pods) * spines
    core_total = groups * spines * cores
    links = out["links"]
    pod_of = {su: q for q, pod in enumerate(pods) for su in pod}
    for q, pod in enumerate(pods):
        for su in pod:
            out["scalable_units"][su]["pod"] = _name("pod", q + 1, len(pods))
    for g, leaves in enumerate(_group_leaves(out, groups)):
        rail = g if scope == "rail" else None
        core_names = [
            [_name("core", (g * spines + j) * cores + t + 1, core_total) for t in range(cores)] for j in range(spines)
        ]
        for j in range(spines):
            out["switches"] += [
                {"name": n, "kind": "core", "rail": rail, "su": None, "ports": radix} for n in core_names[j]
            ]
        core_used = [0] * spines
        for q, _pod in enumerate(pods):
            names = [_name("spine", (g * len(pods) + q) * spines + s + 1, spine_total) for s in range(spines)]
            pod = _name("pod", q + 1, len(pods))
            out["switches"] += [
                {"name": n, "kind": "spine", "rail": rail, "su": None, "pod": pod, "ports": radix} for n in names
            ]
            used = 0
            for leaf, su in leaves:
                if pod_of[su] != q:
                    continue
                per = math.ceil(need[su] / spines)
                if build:
                    _uplink(links, leaf, per_su, names, per, used, "uplink")
                used += per
            per_core = math.ceil(down[q] / cores)
            for j, spine in enumerate(names):
                if build:
                    _uplink(links, {"name": spine, "rail": rail}, half, core_names[j], per_core, core_used[j], "core")
                core_used[j] += per_core


def _sizing(
    out: dict[str, Any],
    radix: int,
    over: float,
    per_su: int,
    *,
    tiers: int,
    spines_per_group: int = 0,
    groups: int = 1,
    pods: int = 0,
    sus_per_pod: int = 0,
    cores_per_group: int = 0,
    links: tuple[int, int, int] = (0, 0, 0),
) -> dict[str, Any]:
    """The numbers behind the fabric (report.py, docs/fabric.md "Sizing"); ``links``: host, leaf-spine
    and spine-core cable counts, from the design (test_cabling checks them against the link list)."""
    count: dict[str, int] = {}
    for sw in out["switches"]:
        count[sw["kind"]] = count.get(sw["kind"], 0) + 1
    return {
        "tiers": tiers,
        "switch_radix": radix,
        "oversubscription": over,
        "hosts_per_leaf": per_su,
        "scalable_units": len(out["scalable_units"]),
        "spine_groups": groups if tiers > 1 else 0,
        "spines_per_group": spines_per_group,
        "pods": pods,
        "sus_per_pod": sus_per_pod,
        "cores_per_group": cores_per_group,
        "leaves": count.get("leaf", 0) + count.get("switch", 0),
        "spines": count.get("spine", 0),
        "cores": count.get("core", 0),
        "host_links": links[0],
        "uplinks": links[1],
        "core_links": links[2],
    }


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
