"""The expected cabling as the lab's fabric simulator sees it (controller side, pure, no I/O).

:func:`ibsim_netfile` renders the plan's expected cabling (``plan["fabric"]["cabling"]``) as a net
file for ibsim; :func:`ibsim_limits` gives the node, switch and port counts ibsim must allow;
:func:`lab_link` is the planned link rate and the one the simulator can carry; :func:`perfquery_ports`
is where the validate play's perfquery sweep (``plan.validation.tests.port_counters``) reads each
planned port, in the simulator.
tools/lab/ibsim_check.py runs ibsim and opensm with these, then checks the discovered fabric with
module_utils/ibfabric.py, as the ``fabric_check`` module does on a real node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import fabric_links
from ansible_collections.gpucluster.tiers.plugins.module_utils.ibfabric import (
    SPEED_ORDER,
    all_links,
    cabling_of,
    hca_desc,
    lanes,
    link_rate_gbps,
    node_id,
    planned_link,
)

# The fastest speed Debian's ibsim 0.10 simulates: NDR in a net file comes out as SDR.
IBSIM_MAX_SPEED = "HDR"
IBSIM_DEFAULTS = {"nodes": 2048, "switches": 256, "ports": 13312}
#: the CA name a simulated HCA has for its client (libumad2sim: ``ibstat`` shows ``CA 'ibsim0'``, type
#: simulator, whichever HCA SIM_HOST names); perfquery reads it as ``-C ibsim0 -P <port>``
IBSIM_CA = "ibsim0"
PERFQUERY = "perfquery"


def lab_link(cabling: Mapping[str, Any], max_speed: str = IBSIM_MAX_SPEED) -> dict[str, Any]:
    """The planned link and the one the simulator can carry (NDR is capped to HDR)."""
    planned = planned_link(cabling_of(cabling))
    speed = planned["speed"]
    if SPEED_ORDER.index(speed) > SPEED_ORDER.index(max_speed):
        speed = max_speed
    return {
        "planned": f"{planned['width']}{planned['speed']}",
        "planned_rate_gbps": planned["rate_gbps"],
        "width": planned["width"],
        "speed": speed,
        "rate_gbps": link_rate_gbps(planned["width"], speed),
        "capped": speed != planned["speed"],
    }


def ibsim_netfile(cabling: Mapping[str, Any], *, max_speed: str = IBSIM_MAX_SPEED) -> str:
    """An ibsim net file of the cabling: every switch and HCA, every link on both ends.

    Node ids are the node descriptions (``leaf04``, ``"compute02 mlx5_3"``), so SIM_HOST
    names an HCA the way a person would; LIDs are unique and pre-assigned (switches first),
    so per-subnet subnet managers never reassign each other's LIDs in ibsim's one LID table.
    Links carry their width and speed (a link may override the cabling's ``width``,
    ``rate_gbps`` or ``speed``); speeds above ``max_speed`` are rendered as ``max_speed``.
    """
    cabling = cabling_of(cabling)
    top = SPEED_ORDER.index(max_speed)
    switch_ports: dict[str, int] = {s["name"]: int(s.get("ports") or 0) for s in cabling.get("switches", [])}
    hca_ports: dict[str, int] = {hca_desc(h["host"], h["hca"]): 1 for h in fabric_links.hcas(cabling)}
    ports: dict[str, dict[int, tuple[str, int, str]]] = {}
    for link in all_links(cabling):  # the subnet manager's ports too (sm_links)
        spec = planned_link(cabling, link)
        speed = spec["speed"] if SPEED_ORDER.index(spec["speed"]) <= top else max_speed
        rate = f"{lanes(spec['width'])}x{speed}"
        ends = [(node_id(link["a"]), int(link["a"].get("port", 1)), bool(link["a"].get("hca")))]
        ends.append((node_id(link["b"]), int(link["b"].get("port", 1)), bool(link["b"].get("hca"))))
        for (node, port, is_hca), (other, oport, _other_is_hca) in (ends, ends[::-1]):
            table = hca_ports if is_hca else switch_ports
            table[node] = max(table.get(node, 0), port)
            taken = ports.setdefault(node, {})
            if port in taken:
                raise ValueError(f"{node} port {port} cabled twice ({taken[port][0]} and {other})")
            taken[port] = (other, oport, rate)
    lid: dict[str, int] = {}
    for name in switch_ports:
        lid[name] = len(lid) + 1
    hca_lid: dict[tuple[str, int], int] = {}
    next_lid = len(lid) + 1
    for name, count in hca_ports.items():
        for port in range(1, count + 1):
            hca_lid[(name, port)] = next_lid
            next_lid += 1

    def remote_lid(node: str, port: int) -> int:
        return lid[node] if node in lid else hca_lid[(node, port)]

    planned = lab_link(cabling, max_speed)
    lines = [
        "# ibsim net file rendered by gpucluster.tiers from the plan's expected cabling",
        f"# topology {cabling.get('topology')}: planned {planned['planned']} ({planned['planned_rate_gbps']:g} Gb/s),"
        f" simulated as {planned['width']}{planned['speed']} ({planned['rate_gbps']:g} Gb/s)",
        "",
    ]
    for name, count in switch_ports.items():
        lines.append(f'Switch {count} "{name}" # "{name}" enhanced port 0 lid {lid[name]} lmc 0')
        for port, (other, oport, rate) in sorted(ports.get(name, {}).items()):
            lines.append(f'[{port}] "{other}"[{oport}] # "{other}" lid {remote_lid(other, oport)} {rate}')
        lines.append("")
    for name, count in hca_ports.items():
        lines.append(f'Hca {count} "{name}" # "{name}"')
        for port, (other, oport, rate) in sorted(ports.get(name, {}).items()):
            own = f"lid {hca_lid[(name, port)]} lmc 0"
            lines.append(f'[{port}] "{other}"[{oport}] # {own} "{other}" lid {remote_lid(other, oport)} {rate}')
        lines.append("")
    return "\n".join(lines)


def ibsim_limits(cabling: Mapping[str, Any]) -> dict[str, int]:
    """Node, switch and port counts of the net file (ibsim needs -N/-S/-P above its defaults)."""
    cabling = cabling_of(cabling)
    switches = len(cabling.get("switches", []))
    hcas = fabric_links.hca_count(cabling) + len(cabling.get("sm_hcas") or [])
    ports = sum(int(s.get("ports") or 0) + 1 for s in cabling.get("switches", [])) + hcas
    return {"nodes": switches + hcas, "switches": switches, "ports": ports}


def perfquery_ports(ports: list[dict[str, Any]], perfquery: str = PERFQUERY) -> list[dict[str, Any]]:
    """The validate play's perfquery sweep in the simulator: per planned port (``host``, ``hca``,
    ``port``: ``plan.validation.tests.port_counters``) the node id SIM_HOST names (``"<host> <hca>"``,
    as in the net file) and the command that reads that port's PortCounters there. On a node the play
    runs ``perfquery -C <hca> -P <port>``; in ibsim the HCA is the client's ``ibsim0``."""
    return [
        {**p, "sim_host": hca_desc(p["host"], p["hca"]), "argv": [perfquery, "-C", IBSIM_CA, "-P", str(p["port"])]}
        for p in ports
    ]
