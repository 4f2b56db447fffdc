"""Thresholds of the node health check (/etc/gpucluster/healthcheck.json), from the plan.

The compute role renders ``plan["health"]`` as JSON; ``gpucluster-healthcheck`` (Slurm's
HealthCheckProgram, docs/sources.md §8.4) reads it and drains the node when a check fails. Every
number here comes from another part of the plan:
- GPU temperature warn/critical: ``plan["gpu"]["temperature"]`` (critical = Max Operating Temp);
- the RDMA ports each node must have ACTIVE and their rate: the fabric's expected cabling;
- coolant alarms (supply and return maximum, critical flow): ``plan["cooling"]`` (DLC only).
The Slurm node name of a host is its inventory hostname (slurm.conf lists the same names).
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 1
#: Drains whose reason starts with this belong to the health check; it resumes only those.
REASON_PREFIX = "gpucluster:"


def _ports(fabric: dict[str, Any], hosts: list[str]) -> dict[str, list[str]]:
    """Per compute host, the ``hca/port`` names its cabling plan connects (none without a fabric)."""
    ports: dict[str, list[str]] = {h: [] for h in hosts}
    if fabric["type"] not in ("infiniband", "roce"):
        return ports
    for link in fabric["cabling"].get("links", []):
        end = link["a"]
        if link.get("kind") == "host" and end.get("node") in ports:
            ports[end["node"]].append(f"{end['hca']}/{end['port']}")
    return {h: sorted(set(p)) for h, p in ports.items()}


def health_config(plan: dict[str, Any]) -> dict[str, Any]:
    """The health check's thresholds and, per compute node, its Slurm name and fabric ports."""
    temps = plan["gpu"]["temperature"]
    fabric = plan["fabric"]
    cooling = plan["cooling"]
    compute = sorted(h for h, host in plan["hosts"].items() if "compute" in host["roles"])
    ports = _ports(fabric, compute)
    coolant = None
    if cooling.get("cooling") == "dlc":
        coolant = {
            "supply_max_c": cooling["supply_max_c"],
            "return_max_c": cooling["return_max_c"],
            "flow_min_lpm": cooling["flow_critical_lpm"],
        }
    return {
        "schema": SCHEMA_VERSION,
        "reason_prefix": REASON_PREFIX,
        # lab containers have no GPU or HCA: a missing tool or sysfs tree is skipped, not drained
        "lab": bool(plan["cluster"]["lab"]),
        "gpu": {
            "count": plan["cluster"]["gpus_per_node"],
            "temp_warn_c": temps["warn_c"],
            "temp_critical_c": temps["critical_c"],
            "temp_source": temps["source"],
        },
        "fabric": {
            "type": fabric["type"],
            "rate_gbps": fabric["link_rate_gbps"] if any(ports.values()) else None,
        },
        "coolant": coolant,
        "nodes": {h: {"slurm_node": h, "fabric_ports": ports[h]} for h in compute},
    }
