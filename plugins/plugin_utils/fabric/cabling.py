"""The compute fabric: expected cabling and the Slurm topology it implies.

Rail-optimized designs give each rail (the NIC paired with GPU r on every node) its own
leaf switch per scalable unit (SU). Without spines (``rail_optimized``) an SU holds up
to ``switch_radix`` hosts and the fabric is one SU. With spines (``fat_tree``) half a
leaf's ports face hosts and half face spines (non-blocking), so an SU holds radix/2
hosts; every leaf spreads its uplinks evenly over the spines (``spine_scope: shared``,
the tier4 design) or over its own rail plane's spines (``spine_scope: rail``, how
larger rail-optimized fabrics grow). Port numbers start at 1; host k of an SU is on
leaf port k+1, uplinks use the upper half of a leaf's ports.
"""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
)

TOPOLOGIES = ("none", "single_switch", "rail_optimized", "fat_tree")


def _name(prefix: str, index: int, total: int) -> str:
    return f"{prefix}{index:0{max(2, len(str(total)))}d}"


def _host_link(host: str, hca: str, rail: int, switch: str, port: int) -> dict[str, Any]:
    return {
        "a": {"node": host, "hca": hca, "port": 1},
        "b": {"node": switch, "port": port},
        "rail": rail,
        "kind": "host",
    }


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
    field: str = "gpucluster_fabric",
) -> dict[str, Any]:
    """Switches, HCAs and links of the planned fabric (deterministic order)."""
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
    }
    if topology == "none" or not rails:
        return out
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
        out["links"] = [
            _host_link(h, hca, r, "ib-sw01", i * rails + r + 1)
            for i, h in enumerate(hosts)
            for r, hca in enumerate(rail_hcas)
        ]
        return out
    per_su = radix if topology == "rail_optimized" else radix // 2
    su_count = math.ceil(len(hosts) / per_su)
    if topology == "rail_optimized" and su_count > 1:
        raise PlanError(
            f"{field}.topology",
            topology,
            f"fat_tree (with spines) for more than {radix} hosts: one {radix}-port rail leaf holds {radix} hosts",
        )
    leaves_total = su_count * rails
    for su in range(su_count):
        members = hosts[su * per_su : (su + 1) * per_su]
        leaves = []
        for r, hca in enumerate(rail_hcas):
            leaf = _name("leaf", su * rails + r + 1, leaves_total)
            leaves.append(leaf)
            out["switches"].append({"name": leaf, "kind": "leaf", "rail": r, "su": su + 1, "ports": radix})
            out["links"] += [_host_link(h, hca, r, leaf, k + 1) for k, h in enumerate(members)]
        out["scalable_units"].append({"name": _name("su", su + 1, su_count), "hosts": members, "leaves": leaves})
    if topology == "fat_tree":
        _spines(out, radix, rails, su_count, spines, spine_scope, field)
    return out


def _spines(out: dict[str, Any], radix: int, rails: int, su_count: int, spines: int, scope: str, field: str) -> None:
    check_choice(scope, f"{field}.spine_scope", ("shared", "rail"))
    spines = check_range(spines, f"{field}.spines", 1, radix // 2, integer=True)
    uplinks = radix // 2
    if uplinks % spines:
        raise PlanError(f"{field}.spines", spines, f"a divisor of the {uplinks} uplinks of each leaf")
    per_spine = uplinks // spines
    groups = rails if scope == "rail" else 1
    leaves_per_group = su_count if scope == "rail" else su_count * rails
    if leaves_per_group * per_spine > radix:
        raise PlanError(
            f"{field}.spines",
            spines,
            f"a fabric whose spines have enough ports: {leaves_per_group} leaves x {per_spine} links = "
            f"{leaves_per_group * per_spine} > {radix} ports (more spines, spine_scope rail, or a third tier)",
        )
    total = groups * spines
    leaves = [s for s in out["switches"] if s["kind"] == "leaf"]
    for g in range(groups):
        names = [_name("spine", g * spines + s + 1, total) for s in range(spines)]
        out["switches"] += [
            {"name": n, "kind": "spine", "rail": g if scope == "rail" else None, "su": None, "ports": radix}
            for n in names
        ]
        members = [leaf for leaf in leaves if scope == "shared" or leaf["rail"] == g]
        for li, leaf in enumerate(members):
            for s, spine in enumerate(names):
                for j in range(per_spine):
                    out["links"].append(
                        {
                            "a": {"node": leaf["name"], "port": uplinks + s * per_spine + j + 1},
                            "b": {"node": spine, "port": li * per_spine + j + 1},
                            "rail": leaf["rail"],
                            "kind": "uplink",
                        }
                    )


def slurm_topology_conf(cabling: dict[str, Any]) -> str:
    """topology/tree lines (docs/sources.md §8.2); "" when there is no switched fabric.

    In a rail-optimized fabric every host of an SU hangs off all of that SU's rail leaves,
    so the SU is one logical switch for Slurm; SUs meet at the spines.
    """
    units = cabling.get("scalable_units") or []
    if not units:
        return ""
    lines = [
        "# Managed by gpucluster.tiers: Slurm topology/tree from the fabric plan.",
        "# Each scalable unit (its hosts and all their rail leaves) is one logical switch.",
    ]
    if cabling["topology"] == "single_switch":
        lines.append(f"SwitchName=ib-sw01 Nodes={hostlist.compress(units[0]['hosts'])}")
        return "\n".join(lines) + "\n"
    for su in units:
        lines.append(f"SwitchName={su['name']} Nodes={hostlist.compress(su['hosts'])}")
    if len(units) > 1:
        lines.append(f"SwitchName=spines Switches={hostlist.compress([su['name'] for su in units])}")
    return "\n".join(lines) + "\n"
