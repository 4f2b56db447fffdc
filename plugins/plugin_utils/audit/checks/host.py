"""A host against its plan: its planned files, the units its roles start, its firewall table, and (on a
compute node) its GPUs and HCAs (checks/gpu.py). O(its files, units, GPUs and ports)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.checks.gpu import gpu_findings, hca_findings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.finding import (
    Finding,
    Unchecked,
    infiniband_host,
    not_read,
    roles_of,
    site_fix,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.services import FIREWALL_UNIT

#: Units whose stop stops jobs or the cluster: critical; any other planned unit stopped: warning.
CRITICAL_UNITS: frozenset[str] = frozenset({"munge", "slurmd", "slurmctld", FIREWALL_UNIT})
#: systemctl's UnitFileState values of a unit that starts at boot (or with another unit).
ENABLED_STATES: frozenset[str] = frozenset({"enabled", "static", "enabled-runtime", "alias", "indirect", "generated"})


def file_findings(host: str, files: Mapping[str, Any], planned_files: Mapping[str, str]) -> list[Finding]:
    """Each planned file whose sha256 is not the rendered one (or that was not read)."""
    out: list[Finding] = []
    for dest, want in sorted(planned_files.items()):
        got = files.get(dest, "not read")
        if got != want:
            out.append(Finding(host, "drift", "file", dest, want, got, "warning", site_fix(host)))
    return out


def service_findings(host: str, services: Mapping[str, Any], switched_off: Collection[str]) -> list[Finding]:
    """Each unit read that is not active, or not enabled; a unit a role switch turns off on this host
    (``switched_off``: the role writes it but neither enables nor starts it) is not compared."""
    out: list[Finding] = []
    for unit, state in sorted(services.items()):
        if unit in switched_off:
            continue
        active, enabled = state.get("active"), state.get("enabled")
        if active != "active":
            out.append(
                Finding(
                    host,
                    "drift",
                    "service",
                    unit,
                    "active",
                    active,
                    "critical" if unit in CRITICAL_UNITS else "warning",
                    f"{site_fix(host)} (starts {unit})",
                    "no jobs run on this node" if unit in ("slurmd", "munge") else None,
                )
            )
        elif enabled not in ENABLED_STATES:
            fix = f"{site_fix(host)} (enables {unit})"
            out.append(Finding(host, "drift", "service", unit, "enabled", enabled, "warning", fix))
    return out


def firewall_findings(
    plan: Mapping[str, Any], host: str, firewall: Mapping[str, Any], unchecked: Unchecked
) -> list[Finding]:
    """The plan's nftables table not loaded (read with ``nft list table``)."""
    if not_read(firewall, host, "firewall", unchecked) or firewall.get("table_loaded"):
        return []
    table = (plan.get("firewall") or {}).get("table")
    return [
        Finding(
            host,
            "drift",
            "firewall",
            f"nftables table inet {table}",
            "loaded",
            "not loaded",
            "critical",
            f"{site_fix(host)} (starts {FIREWALL_UNIT})",
            "the node's planned ports are open to every network",
        )
    ]


def host_findings(
    plan: Mapping[str, Any],
    host: str,
    facts: Mapping[str, Any],
    planned_files: Mapping[str, str],
    unchecked: Unchecked,
    switched_off: Collection[str] = (),
) -> list[Finding]:
    """A host's drift and hardware findings. ``switched_off``: the planned units a role switch turns off
    on this host (the firewall's unit off: its table is not expected loaded either)."""
    out = file_findings(host, facts.get("files") or {}, planned_files)
    out += service_findings(host, facts.get("services") or {}, switched_off)
    if FIREWALL_UNIT not in switched_off:
        out += firewall_findings(plan, host, facts.get("firewall") or {}, unchecked)
    if "compute" in roles_of(plan, host):
        not_read(facts.get("fabric_manager"), host, "fabric_manager", unchecked)
        out += gpu_findings(plan, host, facts.get("gpu") or {}, unchecked)
        if infiniband_host(plan, host):
            out += hca_findings(plan, host, facts.get("hca") or {}, unchecked)
    return out


__all__ = ["CRITICAL_UNITS", "file_findings", "firewall_findings", "host_findings", "service_findings"]
