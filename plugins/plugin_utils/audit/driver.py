"""The audit's driver: every host's facts against the plan, classified (:func:`audit`), and the compute
nodes to drain for their hardware findings (:func:`drain_list`).

``playbooks/audit.yml`` reads every host (``audit_facts``, with :func:`request.host_request`'s arguments),
renders the planned files on the controller for their sha256, and hands everything to :func:`audit`:
each check (checks/) compares one concern. Linear in hosts: the per-host comparison is O(1) in the
cluster size, the version majorities are counters, Slurm's view a dict (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.checks.fabric import (
    cabling_findings,
    guid_findings,
    guids_of,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.checks.host import host_findings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.checks.layouts import layout_findings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.checks.slurm import (
    job_env_findings,
    slurm_findings,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.checks.versions import version_findings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.finding import (
    CLASSES,
    FAIL_ON,
    SEVERITIES,
    Finding,
    Unchecked,
    roles_of,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_choice, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.services import SWITCHES

#: The reason an audit drain carries. Not the health check's ``gpucluster:`` prefix: a clean health
#: check resumes its own drains, and a hardware finding needs a person, not the next health check.
DRAIN_PREFIX = "gpucluster-audit:"

#: {switch: {host: value}}: the role switches each host's roles see (playbooks/audit.yml reads them).
RoleSwitches = Mapping[str, Mapping[str, bool]]


def drain_list(
    findings: Iterable[Finding], slurm: Mapping[str, Any] | None, compute: Iterable[str]
) -> list[dict[str, str]]:
    """Compute nodes to drain for their ``hardware`` findings, with the reason to set.

    Never a node already drained by someone else (an operator, the health check): only a node not
    drained, or drained by an earlier audit (its reason is refreshed)."""
    nodes = (slurm or {}).get("nodes") or {}
    compute_set = set(compute)
    by_host: dict[str, list[Finding]] = {}
    for f in findings:
        if f.cls == "hardware" and f.host in compute_set:
            by_host.setdefault(f.host, []).append(f)
    out = []
    for host, items in sorted(by_host.items()):
        node = nodes.get(host)
        if node is None:
            continue
        state, reason = str(node.get("state") or "").upper(), str(node.get("reason") or "")
        if "DRAIN" in state and not reason.startswith(DRAIN_PREFIX):
            continue
        what = ", ".join(f"{f.check} {f.subject}" for f in items[:3]) + (
            f" +{len(items) - 3}" if len(items) > 3 else ""
        )
        out.append({"node": host, "reason": f"{DRAIN_PREFIX} hardware: {what}"})
    return out


def role_switches(value: Any) -> dict[str, dict[str, bool]]:
    """``settings.role_switches``, checked: {switch: {host: true|false}} for switches of plan/services.py."""
    value = value or {}
    require(isinstance(value, Mapping), "audit role_switches", value, "a mapping {switch: {host: true|false}}")
    out: dict[str, dict[str, bool]] = {}
    for name, per_host in value.items():
        check_choice(name, "audit role_switches", tuple(SWITCHES))
        require(isinstance(per_host, Mapping), f"audit role_switches.{name}", per_host, "a mapping {host: true|false}")
        bad = sorted(str(h) for h, on in per_host.items() if not isinstance(on, bool))
        require(not bad, f"audit role_switches.{name}", bad, "true or false for each host")
        out[str(name)] = {str(h): bool(on) for h, on in per_host.items()}
    return out


def switched_off(plan: Mapping[str, Any], host: str, switches: RoleSwitches) -> frozenset[str]:
    """The planned units of ``host`` that a role switch turns off there (a switch not passed for the host:
    its role's default, plan/services.py ``SWITCHES``)."""
    off: set[str] = set()
    for unit in (plan.get("services") or {}).get(host) or []:
        switch = unit.get("switch")
        if switch and not (switches.get(switch) or {}).get(host, SWITCHES.get(switch, True)):
            off.add(str(unit["unit"]))
    return frozenset(off)


def _head_probes(hosts: Mapping[str, Any]) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """The probes read on one host only (Slurm's view and the job environment on the head, the layouts on
    one client): {probe: (host, result)} of those that were asked."""
    out: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for host in sorted(hosts):
        facts = hosts[host] or {}
        for probe in ("slurm", "job_env", "layouts"):
            if (facts.get(probe) or {}).get("state") not in (None, "skipped"):
                out[probe] = (host, facts[probe])
    return out


def audit(
    plan: Mapping[str, Any],
    collected: Mapping[str, Any],
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Classify every difference between the collected facts and the plan.

    ``collected``: ``hosts`` ({host: audit_facts' ``audit``}), ``planned_files`` ({host: {dest: sha256}}),
    optional ``fabric`` (fabric_check's report), ``unreachable`` (hosts not read) and ``baseline``
    (the last audit's ``guids``). ``settings``: ``fail_on`` (audit_fail_on), ``drain_hardware`` and
    ``role_switches`` ({switch: {host: value}}: the role switches that turn a planned unit off).
    """
    settings = dict(settings or {})
    fail_on = check_choice(settings.get("fail_on", "warning"), "audit_fail_on", FAIL_ON)
    drain = settings.get("drain_hardware", False)
    require(isinstance(drain, bool), "audit_drain_hardware", drain, "true or false")
    switches = role_switches(settings.get("role_switches"))
    hosts = dict(collected.get("hosts") or {})
    planned = dict(collected.get("planned_files") or {})
    unknown = sorted(set(hosts) - set(plan.get("hosts") or {}))
    require(not unknown, "audit hosts", unknown, "hosts of the plan")
    unchecked: Unchecked = []
    findings: list[Finding] = []
    for host in sorted(hosts):
        off = switched_off(plan, host, switches)
        findings += host_findings(plan, host, hosts[host] or {}, planned.get(host) or {}, unchecked, off)
    probes = _head_probes(hosts)
    slurm = probes["slurm"][1] if "slurm" in probes else None
    head, job_env = probes.get("job_env", (None, None))
    layout_client, layouts = probes.get("layouts", (None, None))
    findings += version_findings(plan, hosts)
    findings += slurm_findings(plan, slurm, unchecked)
    findings += job_env_findings(plan, head, job_env, unchecked)
    findings += layout_findings(plan, layout_client, layouts, unchecked)
    findings += cabling_findings(collected.get("fabric"))
    findings += guid_findings(hosts, collected.get("baseline"))
    findings.sort(key=lambda f: (f.host, CLASSES.index(f.cls), -SEVERITIES.index(f.severity), f.check, f.subject))
    unreachable = sorted(collected.get("unreachable") or [])
    threshold = None if fail_on == "never" else SEVERITIES.index(fail_on)
    failing = [] if threshold is None else [f for f in findings if SEVERITIES.index(f.severity) >= threshold]
    compute = [h for h in hosts if "compute" in roles_of(plan, h)]
    return {
        "schema": 1,
        "cluster": (plan.get("cluster") or {}).get("name"),
        "hosts_audited": len(hosts),
        "findings": [f.as_dict() for f in findings],
        "counts": {c: sum(1 for f in findings if f.cls == c) for c in CLASSES},
        "by_severity": {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES},
        "unchecked": sorted(unchecked, key=lambda u: (u["host"], u["check"])),
        "unreachable": unreachable,
        "fail_on": fail_on,
        "failed": bool(failing) or (bool(unreachable) and fail_on != "never"),
        "drain": drain_list(findings, slurm, compute) if drain else [],
        "guids": guids_of(hosts),
    }


__all__ = ["DRAIN_PREFIX", "RoleSwitches", "audit", "drain_list", "role_switches", "switched_off"]
