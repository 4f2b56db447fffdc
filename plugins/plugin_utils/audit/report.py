"""The audit's readable report (Markdown): one line per finding, grouped by host and class, with its fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist


def report_markdown(result: Mapping[str, Any]) -> str:
    """The readable report: one line per finding, grouped by host and class, with the fix."""
    lines = [f"# Audit of {result.get('cluster')}: as planned vs as built", ""]
    findings = result.get("findings") or []
    counts = result.get("counts") or {}
    lines.append(
        f"{result.get('hosts_audited', 0)} host{'' if result.get('hosts_audited') == 1 else 's'} audited; "
        f"{len(findings)} finding"
        f"{'' if len(findings) == 1 else 's'} ({', '.join(f'{k} {v}' for k, v in counts.items())}); "
        f"fails on {result.get('fail_on')} and above: **{'FAILED' if result.get('failed') else 'passed'}**."
    )
    lines.append("")
    if result.get("unreachable"):
        lines += ["## Not reached", "", *[f"- {h}: not audited (unreachable)" for h in result["unreachable"]], ""]
    if not findings:
        lines += ["No host differs from the plan.", ""]
    host = None
    cls = None
    for f in findings:
        if f["host"] != host:
            host, cls = f["host"], None
            lines += [f"## {host}", ""]
        if f["cls"] != cls:
            cls = f["cls"]
            lines += [f"### {cls.replace('_', ' ')}", ""]
        cost = f"; cost: {f['cost']}" if f.get("cost") else ""
        lines.append(
            f"- **{f['severity']}** {f['check']} `{f['subject']}`: planned `{f['planned']}`, found `{f['found']}`"
            f" — fix: {f['fix']}{cost}"
        )
    if findings:
        lines.append("")
    if result.get("drain"):
        lines += ["## Drained", "", *[f"- {d['node']}: {d['reason']}" for d in result["drain"]], ""]
    unchecked = result.get("unchecked") or []
    if unchecked:
        lines += ["## Not checked (tool absent or not readable)", ""]
        by: dict[tuple[str, str], list[str]] = {}
        for u in unchecked:
            by.setdefault((u["check"], u["reason"]), []).append(u["host"])
        for (check, reason), hs in sorted(by.items()):
            lines.append(f"- {check} on {hostlist.compress(hs)}: {reason}")
        lines.append("")
    return "\n".join(lines)


__all__ = ["report_markdown"]
