"""Checking a discovered InfiniBand fabric against the plan's expected cabling.

Target side (imported by the ``fabric_check`` module; Python 3.10), pure, no I/O. The
controller-side rendering of the expected cabling for the ibsim simulator is
plugin_utils/fabric/ibsim.py.

- :func:`subnets` lists the planned subnets of the expected cabling (``plan["fabric"]["cabling"]``,
  the output of plugin_utils/fabric/cabling.py ``expected_cabling``), each with an HCA to discover from;
- :func:`parse_ibnetdiscover_ports` reads ``ibnetdiscover -p`` (one line per port, both
  ends, width and speed);
- :func:`compare` lists every difference between the plan and what was discovered: HCAs
  missing or extra, a rail on the wrong leaf or port, spine uplinks missing or extra, links
  below the planned width or rate, and the Slurm topology.conf switches whose nodes differ.

Nodes are matched on their node descriptions, never on GUIDs: an HCA is ``"<host> <hca>"``
(what rdma-ndd sets on a real node, e.g. ``"compute02 mlx5_3"``) and a switch carries its
plan name (``leaf04``, ``spine02``), set on the switch or mapped with ibnetdiscover's
``--node-name-map``.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist

# Data rate of one lane in Gb/s, by the speed names ibnetdiscover prints (IBTA: 4x HDR is
# 200 Gb/s, 4x NDR 400 Gb/s, 4x XDR 800 Gb/s).
LANE_GBPS: dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.0,
    "FDR": 14.0,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}
SPEED_ORDER = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")


def lanes(width: str | int) -> int:
    """4 for ``"4x"``; 0 for an unknown width (``"??"``)."""
    m = re.fullmatch(r"\s*(\d+)\s*x?\s*", str(width))
    return int(m.group(1)) if m else 0


def link_rate_gbps(width: str | int, speed: str) -> float:
    """Data rate of a link: lanes x lane rate; 0 when either is unknown."""
    return lanes(width) * LANE_GBPS.get(str(speed).upper(), 0.0)


def speed_for(rate_gbps: float, width: str | int) -> str:
    """The speed whose lanes carry ``rate_gbps`` over ``width`` (400 over 4x: NDR)."""
    n = lanes(width)
    if n <= 0 or rate_gbps <= 0:
        raise ValueError(f"no InfiniBand speed for {rate_gbps} Gb/s over {width}")
    per_lane = rate_gbps / n
    for name in SPEED_ORDER:
        if name != "FDR10" and LANE_GBPS[name] >= per_lane - 1e-9:
            return name
    raise ValueError(f"no InfiniBand speed carries {per_lane:g} Gb/s per lane")


def rate_value(value: Any, width: str | int = "4x") -> float:
    """A link rate given as Gb/s (``200``), a speed (``"HDR"``) or width+speed (``"4xHDR"``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip().upper().replace(" ", "")
    number = re.fullmatch(r"(\d+(?:\.\d*)?)(?:G|GB/S|GBPS)?", text)
    if number:
        return float(number.group(1))
    m = re.fullmatch(r"(?:(\d+)X)?([A-Z0-9]+)", text)
    if not m or m.group(2) not in LANE_GBPS:
        raise ValueError(f"not a link rate: {value!r} (Gb/s, a speed such as HDR, or 4xHDR)")
    return link_rate_gbps(m.group(1) or width, m.group(2))


def cabling_of(expected: dict[str, Any]) -> dict[str, Any]:
    """The cabling dict, given either it or the plan's fabric dict that holds it."""
    return expected.get("cabling", expected)


def planned_link(cabling: dict[str, Any], link: dict[str, Any] | None = None) -> dict[str, Any]:
    """Width, speed and rate of a link: the cabling's, or the link's own ``width``, ``speed``
    or ``rate_gbps``. A narrower link keeps the lane speed (a 4x NDR port trained to 1x
    runs 1x NDR, 100 Gb/s)."""
    link = link or {}
    base_width = str(cabling.get("link_width") or "4x")
    base_rate = float(cabling.get("link_rate_gbps") or 400)
    base_speed = speed_for(base_rate, base_width)
    width = str(link.get("width") or base_width)
    if link.get("speed"):
        speed = str(link["speed"]).upper()
    elif link.get("rate_gbps"):
        speed = speed_for(float(link["rate_gbps"]), width)
    else:
        speed = base_speed
    if (width, speed) == (base_width, base_speed):
        return {"width": width, "speed": speed, "rate_gbps": base_rate}
    return {"width": width, "speed": speed, "rate_gbps": link_rate_gbps(width, speed)}


def hca_desc(host: str, hca: str) -> str:
    """Node description of an HCA, as rdma-ndd sets it: ``"compute02 mlx5_3"``."""
    return f"{host} {hca}"


def node_id(end: dict[str, Any]) -> str:
    return hca_desc(end["node"], end["hca"]) if end.get("hca") else end["node"]


def all_links(cabling: dict[str, Any]) -> list[dict[str, Any]]:
    """The cabling's links and its subnet manager's (``sm_links``: the SM host's ports, one per subnet)."""
    cabling = cabling_of(cabling)
    return list(cabling.get("links", [])) + list(cabling.get("sm_links") or [])


def subnets(cabling: dict[str, Any], host: str | None = None) -> list[dict[str, Any]]:
    """The planned subnets (connected parts of the fabric), each with an HCA to discover from.

    A rail-optimized fabric without spines is one subnet per rail; a fat tree with shared
    spines or a single switch is one subnet. ``host`` picks whose HCA (default: the first
    host with an HCA in that subnet); ``sim_host`` is that HCA's node id in an ibsim net file.
    """
    cabling = cabling_of(cabling)
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = parent.setdefault(x, x)
        if root == x:
            return x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for s in cabling.get("switches", []):
        find(s["name"])
    for link in all_links(cabling):
        a, b = link["a"], link["b"]
        ra = find(f"{a['node']} {a['hca']}" if a.get("hca") else a["node"])
        rb = find(f"{b['node']} {b['hca']}" if b.get("hca") else b["node"])
        if ra != rb:
            parent[ra] = rb
    out: list[dict[str, Any]] = []
    seen: dict[str, dict[str, Any]] = {}
    for h in cabling.get("hcas", []):
        root = find(hca_desc(h["host"], h["hca"]))
        entry = seen.get(root)
        if entry is None:
            entry = {"name": "", "rails": [], "host": h["host"], "hca": h["hca"], "port": 1, "switches": []}
            seen[root] = entry
            out.append(entry)
        if h["rail"] not in entry["rails"]:
            entry["rails"].append(h["rail"])
        if host is not None and h["host"] == host and entry["host"] != host:
            entry.update({"host": host, "hca": h["hca"]})
    for s in cabling.get("switches", []):
        if find(s["name"]) in seen:
            seen[find(s["name"])]["switches"].append(s["name"])
    for entry in out:
        rails = entry["rails"]
        entry["name"] = f"rail{rails[0]}" if len(rails) == 1 else f"rails{rails[0]}-{rails[-1]}"
        entry["sim_host"] = hca_desc(entry["host"], entry["hca"])
    return out


# ibnetdiscover -p, one line per port (infiniband-diags dump_ports_report):
#   "%2s %5d %2d 0x%016x %s %s" then " - %2s %5d %2d 0x%016x ( '%s' - '%s' )" for a
#   connected port, or 36 spaces and "'%s'" for a port without a remote end.
_END = r"(?P<{0}type>SW|CA|RT)\s+(?P<{0}lid>\d+)\s+(?P<{0}port>\d+)\s+(?P<{0}guid>0x[0-9A-Fa-f]+)"
_PORT_LINE = re.compile(
    r"^\s*" + _END.format("") + r"\s+(?P<width>\S+)\s+(?P<speed>\S+)"
    r"(?:\s+-\s+" + _END.format("r") + r"\s+\(\s*'(?P<desc>.*)'\s+-\s+'(?P<rdesc>.*)'\s*\)"
    r"|\s+'(?P<odesc>.*)')\s*$"
)


def parse_ibnetdiscover_ports(text: str) -> list[dict[str, Any]]:
    """Ports of ``ibnetdiscover -p`` output (several outputs may be concatenated).

    Each port: ``type`` (SW/CA/RT), ``lid``, ``port``, ``guid``, ``width`` (``"4x"``),
    ``speed`` (``"HDR"``), ``rate_gbps``, ``desc`` (node description) and ``remote``
    (the same keys of the other end, or None for a port with nothing attached).
    Lines that are not port lines (warnings, blank lines) are skipped.
    """
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        m = _PORT_LINE.match(line)
        if not m:
            continue
        g = m.groupdict()
        port: dict[str, Any] = {
            "type": g["type"],
            "lid": int(g["lid"]),
            "port": int(g["port"]),
            "guid": g["guid"].lower(),
            "width": g["width"],
            "speed": g["speed"],
            "rate_gbps": link_rate_gbps(g["width"], g["speed"]),
            "desc": g["desc"] if g["rtype"] else g["odesc"],
            "remote": None,
        }
        if g["rtype"]:
            port["remote"] = {
                "type": g["rtype"],
                "lid": int(g["rlid"]),
                "port": int(g["rport"]),
                "guid": g["rguid"].lower(),
                "desc": g["rdesc"],
            }
        out.append(port)
    return out


def planned_topology(switches: list[dict[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """The plan's Slurm topology (``fabric.slurm_topology``: a switch each, with its ``nodes`` or
    ``switches`` as a hostlist expression) expanded: ``{switch: {"nodes": [...], "switches": [...]}}``."""
    return {
        sw["name"]: {
            "nodes": sorted(hostlist.expand(sw["nodes"])) if sw.get("nodes") else [],
            "switches": sorted(hostlist.expand(sw["switches"])) if sw.get("switches") else [],
        }
        for sw in switches
    }


def _split_desc(desc: str, hosts: set[str]) -> tuple[str, str] | None:
    """(host, hca) of an HCA description ``"<host> <hca>"``; a domain is dropped if planned short."""
    parts = desc.strip().rsplit(None, 1)
    if len(parts) != 2:
        return None
    host, hca = parts
    if host not in hosts and host.split(".", 1)[0] in hosts:
        host = host.split(".", 1)[0]
    return host, hca


def _end_text(node: str, port: int) -> str:
    return f"{node} port {port}"


def compare(
    expected: dict[str, Any],
    discovered: list[dict[str, Any]],
    *,
    expected_rate: Any = None,
    expected_width: str | None = None,
    topology: list[dict[str, Any]] | None = None,
    ignore: list[str] | None = None,
) -> dict[str, Any]:
    """Every difference between the planned fabric and the discovered ports.

    ``expected``: the plan's fabric dict (``cabling`` and ``slurm_topology``) or the cabling.
    ``discovered``: ports from :func:`parse_ibnetdiscover_ports`, all subnets together.
    ``expected_rate`` (Gb/s, ``"HDR"`` or ``"4xHDR"``) overrides the planned link rate, e.g.
    at HDR in the simulator; ``topology`` (Slurm's switches, as the plan's ``slurm_topology``)
    defaults to the fabric dict's. Nodes whose
    description matches an ``ignore`` pattern (fnmatch) are left out on both sides.
    Returns lists per kind of difference, ``mismatches`` (one line each) and ``ok``.
    """
    cabling = cabling_of(expected)
    if topology is None and "cabling" in expected:
        topology = expected.get("slurm_topology") or []
    patterns = list(ignore or [])

    def ignored(desc: str) -> bool:
        return any(fnmatch.fnmatchcase(desc, p) for p in patterns)

    base = planned_link(cabling)
    want_width = expected_width or base["width"]
    want_rate = rate_value(expected_rate, want_width) if expected_rate is not None else base["rate_gbps"]
    switches = {s["name"]: s for s in cabling.get("switches", [])}
    hosts = {h["host"] for h in cabling.get("hcas", [])}

    # The plan: where each HCA port goes, and the switch-to-switch links.
    planned_hca: dict[tuple[str, str, int], dict[str, Any]] = {}
    planned_up: dict[frozenset, dict[str, Any]] = {}
    for link in all_links(cabling):
        a, b = link["a"], link["b"]
        if a.get("hca") and not b.get("hca"):
            key = (a["node"], a["hca"], int(a.get("port", 1)))
            planned_hca[key] = {"rail": link.get("rail"), "leaf": b["node"], "port": int(b["port"])}
        elif not a.get("hca") and not b.get("hca"):
            ends = frozenset({(a["node"], int(a["port"])), (b["node"], int(b["port"]))})
            planned_up[ends] = {"a": a["node"], "a_port": int(a["port"]), "b": b["node"], "b_port": int(b["port"])}
    for h in cabling.get("hcas", []):
        planned_hca.setdefault((h["host"], h["hca"], 1), {"rail": h["rail"], "leaf": None, "port": None})

    # What was discovered: each link once, whichever end (or subnet) reported it.
    links: dict[frozenset, dict[str, Any]] = {}
    found_switches: set[str] = set()
    for p in discovered:
        for end in (p, p.get("remote")):
            if end and end["type"] == "SW" and not ignored(end["desc"]):
                found_switches.add(end["desc"])
        r = p.get("remote")
        if not r or ignored(p["desc"]) or ignored(r["desc"]):
            continue
        ends = frozenset({(p["type"], p["desc"], p["port"]), (r["type"], r["desc"], r["port"])})
        links.setdefault(ends, {"width": p["width"], "speed": p["speed"], "rate_gbps": p["rate_gbps"]})

    found_hca: dict[tuple[str, str, int], dict[str, Any]] = {}
    extra_hcas: list[dict[str, Any]] = []
    found_up: dict[frozenset, dict[str, Any]] = {}
    slow: list[dict[str, Any]] = []
    for ends, spec in sorted(links.items(), key=lambda kv: sorted(kv[0])):
        (t1, d1, p1), (t2, d2, p2) = sorted(ends, key=lambda e: (e[0] != "CA", e[1], e[2]))
        if t1 == "CA" and t2 == "SW":
            split = _split_desc(d1, hosts)
            key = (split[0], split[1], p1) if split else None
            if key in planned_hca:
                found_hca[key] = {"leaf": d2, "port": p2}
            else:
                extra_hcas.append({"node": d1, "node_port": p1, "actual": {"leaf": d2, "port": p2}})
            a_end, b_end = (d1, p1), (d2, p2)
        elif t1 == "SW" and t2 == "SW":
            key2 = frozenset({(d1, p1), (d2, p2)})
            a_end, b_end = sorted([(d1, p1), (d2, p2)])
            found_up[key2] = {"a": a_end[0], "a_port": a_end[1], "b": b_end[0], "b_port": b_end[1]}
        else:
            a_end, b_end = (d1, p1), (d2, p2)
        below = []
        if lanes(spec["width"]) < lanes(want_width):
            below.append("width")
        if spec["rate_gbps"] < want_rate - 1e-9:
            below.append("rate")
        if below:
            slow.append(
                {
                    "a": a_end[0],
                    "a_port": a_end[1],
                    "b": b_end[0],
                    "b_port": b_end[1],
                    "width": spec["width"],
                    "speed": spec["speed"],
                    "rate_gbps": spec["rate_gbps"],
                    "expected_width": want_width,
                    "expected_rate_gbps": want_rate,
                    "below": below,
                }
            )

    missing_hcas: list[dict[str, Any]] = []
    wrong_leaf: list[dict[str, Any]] = []
    wrong_port: list[dict[str, Any]] = []
    for (host, hca, port), plan in planned_hca.items():
        if ignored(hca_desc(host, hca)):
            continue
        entry = {"host": host, "hca": hca, "hca_port": port, "rail": plan["rail"]}
        entry["expected"] = {"leaf": plan["leaf"], "port": plan["port"]}
        got = found_hca.get((host, hca, port))
        if got is None:
            missing_hcas.append(entry)
        elif got["leaf"] != plan["leaf"]:
            actual_rail = (switches.get(got["leaf"]) or {}).get("rail")
            wrong_leaf.append({**entry, "actual": got, "actual_leaf_rail": actual_rail})
        elif got["port"] != plan["port"]:
            wrong_port.append({**entry, "actual": got})
    missing_up = [v for k, v in planned_up.items() if k not in found_up and not (ignored(v["a"]) or ignored(v["b"]))]
    extra_up = [v for k, v in sorted(found_up.items(), key=lambda kv: sorted(kv[0])) if k not in planned_up]
    missing_switches = sorted(n for n in switches if n not in found_switches and not ignored(n))
    extra_switches = sorted(found_switches - set(switches))
    topology_diff = _compare_topology(cabling, planned_topology(topology or []), found_hca, found_up)

    mismatches = [f"switch {n}: planned, not discovered" for n in missing_switches]
    mismatches += [f"switch {n}: discovered, not in the plan" for n in extra_switches]
    for e in missing_hcas:
        where = (
            f", planned on {_end_text(e['expected']['leaf'], e['expected']['port'])}" if e["expected"]["leaf"] else ""
        )
        mismatches.append(f"{e['host']} rail {e['rail']} ({e['hca']}): not discovered{where}")
    for e in extra_hcas:
        mismatches.append(
            f"HCA '{e['node']}' on {_end_text(e['actual']['leaf'], e['actual']['port'])}: not in the plan"
        )
    for e in wrong_leaf:
        rail = e["actual_leaf_rail"]
        of_rail = f" (a leaf of rail {rail})" if rail is not None and rail != e["rail"] else ""
        mismatches.append(
            f"{e['host']} rail {e['rail']} ({e['hca']}): on {_end_text(e['actual']['leaf'], e['actual']['port'])}"
            f"{of_rail}, planned {_end_text(e['expected']['leaf'], e['expected']['port'])}"
        )
    for e in wrong_port:
        mismatches.append(
            f"{e['host']} rail {e['rail']} ({e['hca']}): on {_end_text(e['actual']['leaf'], e['actual']['port'])},"
            f" planned port {e['expected']['port']}"
        )
    for e in missing_up:
        mismatches.append(f"uplink {_end_text(e['a'], e['a_port'])} - {_end_text(e['b'], e['b_port'])}: not discovered")
    for e in extra_up:
        mismatches.append(
            f"uplink {_end_text(e['a'], e['a_port'])} - {_end_text(e['b'], e['b_port'])}: not in the plan"
        )
    for e in slow:
        mismatches.append(
            f"link {_end_text(e['a'], e['a_port'])} - {_end_text(e['b'], e['b_port'])}: {e['width']} {e['speed']}"
            f" ({e['rate_gbps']:g} Gb/s), planned {e['expected_width']} at {e['expected_rate_gbps']:g} Gb/s"
        )
    for e in topology_diff["mismatches"]:
        parts = [f"{k} {hostlist.compress(e[k])}" for k in ("missing", "extra") if e[k]]
        mismatches.append(f"topology.conf SwitchName={e['switch']}: {'; '.join(parts)} (discovered vs planned)")
    return {
        "ok": not mismatches,
        "expected_width": want_width,
        "expected_rate_gbps": want_rate,
        "counts": {
            "planned_hcas": len(planned_hca),
            "discovered_hcas": len(found_hca) + len(extra_hcas),
            "planned_uplinks": len(planned_up),
            "discovered_uplinks": len(found_up),
            "planned_switches": len(switches),
            "discovered_switches": len(found_switches),
        },
        "missing_switches": missing_switches,
        "extra_switches": extra_switches,
        "missing_hcas": missing_hcas,
        "extra_hcas": extra_hcas,
        "wrong_leaf": wrong_leaf,
        "wrong_port": wrong_port,
        "missing_uplinks": missing_up,
        "extra_uplinks": extra_up,
        "slow_links": slow,
        "topology": topology_diff,
        "mismatches": mismatches,
    }


def _compare_topology(
    cabling: dict[str, Any],
    planned: dict[str, dict[str, list[str]]],
    found_hca: dict[tuple[str, str, int], dict[str, Any]],
    found_up: dict[frozenset, dict[str, Any]],
) -> dict[str, Any]:
    """Slurm topology.conf as planned vs as discovered, switch by switch.

    A logical switch of the plan (a scalable unit, or the one physical switch) holds the
    hosts with an HCA discovered on one of its leaves; a switch of switches (the spines, a
    pod's spines, the core switches) holds the members with a discovered link out of
    themselves: an SU's leaves up to a spine, a pod's spines up to a core switch.
    """
    leaves_of: dict[str, set[str]] = {}
    for su in cabling.get("scalable_units", []):
        leaves_of[su["name"]] = set(su.get("leaves") or [])
    tops_of = dict(leaves_of)  # the switches of a member that link upwards
    inside = {name: set(leaves) for name, leaves in leaves_of.items()}  # a member's own switches
    for sw in cabling.get("switches", []):
        pod = sw.get("pod")
        if sw.get("kind") == "spine" and isinstance(pod, str):
            tops_of.setdefault(pod, set()).add(sw["name"])
            inside.setdefault(pod, set()).add(sw["name"])
    for name, want in planned.items():  # a switch of switches: its members' leaves and switches
        if want["switches"]:
            leaves_of.setdefault(name, set().union(*(leaves_of.get(m, set()) for m in want["switches"])))
            inside.setdefault(name, set()).update(*(inside.get(m, set()) for m in want["switches"]))
        leaves_of.setdefault(name, {name})
    linked: dict[str, set[str]] = {}
    for key in found_up:
        (a, _pa), (b, _pb) = sorted(key)
        linked.setdefault(a, set()).add(b)
        linked.setdefault(b, set()).add(a)

    def linked_out(member: str) -> bool:
        own = inside.get(member, set())
        return any(peer not in own for top in tops_of.get(member, set()) for peer in linked.get(top, ()))

    # the hosts Slurm schedules (a subnet manager's HCA on a leaf is no node of a switch)
    members = {h for su in cabling.get("scalable_units", []) for h in su.get("hosts") or []}
    discovered: dict[str, dict[str, list[str]]] = {}
    for name, want in planned.items():
        leaves = leaves_of.get(name, set())
        nodes = (
            sorted({k[0] for k, got in found_hca.items() if got["leaf"] in leaves and (not members or k[0] in members)})
            if want["nodes"]
            else []
        )
        subs = [m for m in want["switches"] if linked_out(m)] if want["switches"] else []
        discovered[name] = {"nodes": nodes, "switches": sorted(subs)}
    mismatches = []
    for name, want in planned.items():
        got = discovered[name]
        missing = sorted(set(want["nodes"]) - set(got["nodes"])) + sorted(set(want["switches"]) - set(got["switches"]))
        extra = sorted(set(got["nodes"]) - set(want["nodes"])) + sorted(set(got["switches"]) - set(want["switches"]))
        if missing or extra:
            mismatches.append({"switch": name, "missing": missing, "extra": extra})
    return {"planned": planned, "discovered": discovered, "mismatches": mismatches}
