"""The acceptance report, from the checks (validation/acceptance.py acceptance_checks): report.json
(:func:`acceptance_report`), report.md (:func:`report_markdown`) and the nodes a drain takes out
(:func:`drain_list`). Pure."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.acceptance import all_reduce_nodes
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.gates import FAIL, PASS, SKIPPED
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.model import (
    AcceptanceReport,
    Check,
    DrainEntry,
    PlanView,
)

#: the longest Slurm drain reason written (scontrol's reason is free text; kept short for sinfo -R)
DRAIN_REASON_MAX = 200


def drain_list(checks: list[Check]) -> list[DrainEntry]:
    """Nodes to drain: per node, its first failing check as the Slurm reason (and how many more)."""
    per_node: dict[str, list[Check]] = {}
    for c in checks:
        if c["status"] != FAIL:
            continue
        for node in c["drain"]:
            per_node.setdefault(node, []).append(c)
    out: list[DrainEntry] = []
    for node in sorted(per_node):
        first = per_node[node][0]
        measured, floor = first["measured"], first["floor"]
        if isinstance(measured, (int, float)) and isinstance(floor, (int, float)):
            what = f"{first['name']} {measured:g} < {floor:g}"
            if measured >= floor:
                what = f"{first['name']} {first['reason'].split(';')[0]}"
        else:
            what = f"{first['name']} {first['reason'].split(';')[0]}"
        more = len(per_node[node]) - 1
        reason = f"gpucluster-validate: {what}" + (f" (+{more} more)" if more else "")
        out.append({"node": node, "reason": reason.replace('"', "'")[:DRAIN_REASON_MAX]})
    return out


def acceptance_report(plan: PlanView, checks: list[Check]) -> AcceptanceReport:
    """The report: cluster, the floors, every check, a summary and the nodes a drain would take out."""
    passed, failed, skipped = (sum(1 for c in checks if c["status"] == s) for s in (PASS, FAIL, SKIPPED))
    result = FAIL if failed else ("incomplete" if skipped else PASS)
    floors = {k: v for k, v in plan["validation"].items() if k != "tests"}
    tested, excluded = all_reduce_nodes(plan)
    return {
        "schema": 1,
        "cluster": plan["cluster"]["name"],
        "tier": plan["cluster"]["tier"],
        "lab": plan["cluster"]["lab"],
        "summary": {"pass": passed, "fail": failed, "skipped": skipped, "total": len(checks), "result": result},
        "floors": floors,
        "checks": checks,
        "drain": drain_list(checks),
        # which nodes the whole-GPU all_reduce tests ran on, and why the others were left out
        "all_reduce_nodes": {"tested": tested, "excluded": excluded},
    }


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def report_markdown(report: AcceptanceReport) -> str:
    """report.md: the summary line and one table row per check."""
    s = report["summary"]
    lines = [
        f"# Acceptance report: {report['cluster']} ({report['tier']})",
        "",
        f"Result: **{s['result']}**: {s['pass']} pass, {s['fail']} fail, {s['skipped']} skipped of {s['total']} checks."
        + (" Lab run: floors are the tier's, the hardware is containers." if report.get("lab") else ""),
        "",
        "| check | nodes | measured | floor | unit | status | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    ar_nodes = report.get("all_reduce_nodes") or {}
    if ar_nodes.get("excluded"):
        tested = ar_nodes.get("tested") or []
        lines[-2:-2] = [
            f"all_reduce (whole GPUs) tested on {len(tested)} node(s): "
            f"{hostlist.compress(tested) if tested else 'none'}. Left out:",
            "",
            *(f"- {node}: {why}" for node, why in sorted(ar_nodes["excluded"].items())),
            "",
        ]
    for c in report["checks"]:
        nodes = c["nodes"] if len(c["nodes"]) <= 4 else [f"{len(c['nodes'])} nodes"]
        lines.append(
            "| "
            + " | ".join(
                _cell(v) for v in (c["name"], nodes, c["measured"], c["floor"], c["unit"], c["status"], c["reason"])
            )
            + " |"
        )
    if report["drain"]:
        lines += ["", "## Nodes failing a node-level check (drained with validate_drain_failed=true)", ""]
        lines += [f"- {d['node']}: {d['reason']}" for d in report["drain"]]
    return "\n".join(lines) + "\n"


__all__ = ["DRAIN_REASON_MAX", "acceptance_report", "drain_list", "report_markdown"]
