"""The fabric against the plan's cabling (fabric_check's comparison) and the HCAs' port GUIDs against
the last audit's: hardware findings. Linear in the differences reported and the hosts read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.finding import Finding


def _end(e: Mapping[str, Any]) -> str:
    """A cable's end as ``leaf:port``."""
    return f"{e.get('leaf')}:{e.get('port')}" if e.get("leaf") else "not discovered"


def cabling_findings(report: Mapping[str, Any] | None) -> list[Finding]:
    """Hardware findings from fabric_check's comparison (module_utils/ibfabric.py ``compare``)."""
    if not report:
        return []
    return [
        *_host_cable_findings(report),
        *_extra_hca_findings(report.get("extra_hcas", [])),
        *_switch_link_findings(report),
    ]


def _host_cable_findings(report: Mapping[str, Any]) -> list[Finding]:
    """A rail HCA's cable on the wrong leaf or port, or not discovered at all."""
    out: list[Finding] = []
    for e in report.get("wrong_leaf", []) + report.get("wrong_port", []):
        out.append(
            Finding(
                e["host"],
                "hardware",
                "cable",
                f"{e['hca']} (rail {e['rail']})",
                _end(e["expected"]),
                _end(e["actual"]),
                "critical",
                f"move the cable at {_end(e['actual'])} to {_end(e['expected'])}",
                f"rail {e['rail']} of {e['host']} is off its planned leaf: NCCL's rail-local traffic crosses "
                "spines or does not flow"
                if e.get("actual_leaf_rail") not in (None, e["rail"])
                else None,
            )
        )
    for e in report.get("missing_hcas", []):
        out.append(
            Finding(
                e["host"],
                "hardware",
                "cable",
                f"{e['hca']} (rail {e['rail']})",
                _end(e["expected"]),
                "not discovered",
                "critical",
                f"check the cable at {_end(e['expected'])}; a replaced HCA needs its node description "
                f"'{e['host']} {e['hca']}' (rdma-ndd)",
                f"rail {e['rail']} of {e['host']} carries no traffic",
            )
        )
    return out


def _extra_hca_findings(extra: list[Mapping[str, Any]]) -> list[Finding]:
    """An HCA on the fabric that the plan does not name."""
    return [
        Finding(
            "fabric",
            "hardware",
            "cable",
            str(e["node"]),
            "not in the plan",
            _end(e["actual"]),
            "warning",
            f"name the HCA on {_end(e['actual'])} '<host> <hca>' (rdma-ndd) or unplug it",
        )
        for e in extra
    ]


def _switch_link_findings(report: Mapping[str, Any]) -> list[Finding]:
    """A planned switch-to-switch uplink not discovered, or one trained slower than planned."""
    out: list[Finding] = []
    for e in report.get("missing_uplinks", []):
        a, b = f"{e['a']}:{e['a_port']}", f"{e['b']}:{e['b_port']}"
        out.append(
            Finding(
                "fabric",
                "hardware",
                "cable",
                f"uplink {a} - {b}",
                "cabled",
                "not discovered",
                "critical",
                f"cable {a} to {b}",
                "less bisection bandwidth between the leaves",
            )
        )
    for e in report.get("slow_links", []):
        a, b = f"{e['a']}:{e['a_port']}", f"{e['b']}:{e['b_port']}"
        out.append(
            Finding(
                "fabric",
                "hardware",
                "link_rate",
                f"link {a} - {b}",
                e["expected_rate_gbps"],
                e["rate_gbps"],
                "warning",
                f"replace the cable or transceiver between {a} and {b}",
            )
        )
    return out


def guid_findings(hosts: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> list[Finding]:
    """HCA ports whose GUID changed since the baseline (the last audit's ``guids``): a replaced HCA."""
    out: list[Finding] = []
    if not baseline:
        return out
    for host, before in sorted(baseline.items()):
        now = guids_of({host: hosts.get(host) or {}}).get(host) or {}
        for port, old in sorted((before or {}).items()):
            new = now.get(port)
            if new and old and new != old:
                out.append(
                    Finding(
                        host,
                        "hardware",
                        "guid",
                        port,
                        old,
                        new,
                        "info",
                        "a replaced HCA: update anything keyed on its GUID (opensm partitions, UFM, switch ACLs); "
                        "check its node description and firmware",
                    )
                )
    return out


def guids_of(hosts: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """{host: {"mlx5_0/1": port GUID}} of the hosts whose ibstat was read."""
    out: dict[str, dict[str, str]] = {}
    for host, facts in hosts.items():
        hca = (facts or {}).get("hca") or {}
        if hca.get("state") == "ok":
            out[host] = {f"{p['ca']}/{p['port']}": p["port_guid"] for p in hca.get("ports") or [] if p.get("port_guid")}
    return out


__all__ = ["cabling_findings", "guid_findings", "guids_of"]
