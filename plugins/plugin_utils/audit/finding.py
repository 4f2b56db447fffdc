"""A finding, its classes and severities, and the helpers every check of the audit shares.

Classes: ``drift`` (site.yml, a planned unit's restart or the plan's own command fixes it), ``hardware``
(the plan cannot fix it), ``version_skew`` (a version off the compute group's majority); severities
``info`` < ``warning`` < ``critical`` (docs/audit.md). Pure (no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

CLASSES: tuple[str, ...] = ("drift", "hardware", "version_skew")
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")
#: audit_fail_on: the lowest severity that makes the audit fail; ``never`` only reports.
FAIL_ON: tuple[str, ...] = (*SEVERITIES, "never")

#: The checks a host could not run: {host, check, reason} each (the report's "Not checked").
Unchecked = list[dict[str, str]]


@dataclass(frozen=True)
class Finding:
    """One difference between a host and its plan."""

    host: str
    cls: str  # one of CLASSES
    check: str  # file, service, firewall, gpu_count, gpu_power, persistence, mig, nvlink, hca, cable, guid, slurm, ...
    subject: str  # what differs: a path, a unit, "GPU 3", "mlx5_2 port 1"
    planned: Any
    found: Any
    severity: str  # one of SEVERITIES
    fix: str
    cost: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def roles_of(view: Mapping[str, Any], host: str) -> set[str]:
    """The host roles of ``host`` in the plan (or its view)."""
    return set(((view.get("hosts") or {}).get(host) or {}).get("roles") or [])


def slurm_planned(view: Mapping[str, Any]) -> bool:
    """True when the plan's scheduler is Slurm."""
    return (view.get("cluster") or {}).get("scheduler", "slurm") == "slurm"


def infiniband_host(view: Mapping[str, Any], host: str) -> bool:
    """True when ``host`` has planned InfiniBand HCAs."""
    return host in ((view.get("fabric_host") or {}).get("infiniband_hosts") or [])


def site_fix(host: str) -> str:
    """The fix of most drift: site.yml on the host."""
    return f"run site.yml --limit {host}"


def not_read(probe: Mapping[str, Any] | None, host: str, check: str, unchecked: Unchecked) -> bool:
    """True when a probe's state is not ``ok``; an asked probe that could not run (absent, error) is then
    recorded in ``unchecked`` with its reason, a probe never asked (none, ``skipped``) is not."""
    probe = probe or {}
    state = probe.get("state")
    if state == "ok":
        return False
    if state not in (None, "skipped"):
        unchecked.append({"host": host, "check": check, "reason": probe.get("reason") or state})
    return True


__all__ = [
    "CLASSES",
    "FAIL_ON",
    "SEVERITIES",
    "Finding",
    "Unchecked",
    "infiniband_host",
    "not_read",
    "roles_of",
    "site_fix",
    "slurm_planned",
]
