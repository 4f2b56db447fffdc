"""The self-healing loop's alerts (compute/healing.py METRICS, from the head's textfile collector): a node
awaiting replacement, a remediation stuck, the loop stale, and the active checks overdue or failing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import AlertCase, Labels, Threshold
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import RuleBook

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import HealingSection


def _age_rule(
    r: RuleBook,
    name: str,
    age: str,
    *,
    limit: int,
    plan_key: str,
    series: tuple[str, Labels],
    labels: Labels,
    summary: str,
) -> None:
    """``age > limit`` where ``age`` is ``time() - <a timestamp gauge>``: the test series grows by 60 s a
    minute, so the age is the same at every evaluation: quiet exactly at the limit, firing one second past."""
    metric, series_labels = series
    cases: list[AlertCase] = [
        {"state": state, "value": v, "series": [(metric, series_labels, f"-{v}+60x15")], "labels": labels}
        for state, v in (("fire", limit + 1), ("quiet", limit))
    ]
    threshold: Threshold = {"plan": plan_key, "op": ">", "value": limit, "fire": limit + 1, "quiet": limit}
    r.add("healing", name, f"{age} > {limit}", "1m", "warning", summary, cases, threshold)


STATE = "gpucluster_heal_node_state"
LAST_RUN = "gpucluster_heal_last_run_timestamp_seconds"
CHECKED = "gpucluster_active_check_last_timestamp_seconds"


def healing_rules(r: RuleBook, heal: HealingSection, head: Labels, node: str) -> None:
    """The loop's alerts, and the active checks' when they run (``head``: the head's node-exporter labels;
    ``node``: the compute node of the test series)."""
    _loop_rules(r, heal, head, node)
    if heal["active"]["enabled"]:
        _active_check_rules(r, heal, head, node)


def _loop_rules(r: RuleBook, heal: HealingSection, head: Labels, node: str) -> None:
    """A node awaiting replacement, a remediation stuck, the loop stale."""
    state, last_run = STATE, LAST_RUN
    replace = {**head, "node": node, "state": "replace"}
    r.add(
        "healing",
        "HealNodeReplace",
        f'{state}{{state="replace"}} == 1',
        "1m",
        "warning",
        "{node} awaits replacement: the self-healing loop gave up on it",
        [
            {"state": "fire", "value": 1, "series": [(state, replace, "1")], "labels": replace},
            {"state": "quiet", "value": None, "series": [(state, replace, "0")], "labels": replace},
        ],
    )
    rem = heal["remediation"]
    minutes = -(-rem["stuck_after_s"] // 60)  # whole minutes of the 1m subquery, rounded up
    busy = {**head, "node": node, "state": "remediating"}
    busy_expr = f'max without (state) ({state}{{state=~"remediating|validating"}}) == 1'
    r.add(
        "healing",
        "HealRemediationStuck",
        f"count_over_time(({busy_expr})[{minutes}m:1m]) >= {minutes}",
        "0m",
        "warning",
        f"{{node}} under remediation for {{value:.0f}} minutes (limit {minutes}: reboot_timeout_s + "
        "validate_timeout_s)",
        [
            {
                "state": "fire",
                "value": minutes,
                "start": minutes - 1,  # the series starts at 0: minutes samples by then
                "series": [(state, busy, f"1x{minutes + 10}")],
                "labels": {k: v for k, v in busy.items() if k != "state"},
            },
            {"state": "quiet", "value": None, "series": [(state, busy, "1x15")], "labels": {}},
        ],
    )
    _age_rule(
        r,
        "HealLoopStale",
        f"time() - (max({last_run}) or vector(0))",
        limit=rem["stale_after_s"],
        plan_key="healing.remediation.stale_after_s",
        series=(last_run, head),
        labels={},
        summary="the self-healing loop last ran {value:.0f} s ago (more than 3 of its intervals, "
        f"{rem['stale_after_s']} s; never: since 1970)",
    )


def _active_check_rules(r: RuleBook, heal: HealingSection, head: Labels, node: str) -> None:
    """An idle node's active checks overdue, or its last one failed."""
    checked = CHECKED
    act = heal["active"]
    done = {**head, "node": node, "check": "allreduce", "result": "pass"}
    _age_rule(
        r,
        "ActiveCheckOverdue",
        f"time() - max by (node) ({checked})",
        limit=act["overdue_after_s"],
        plan_key="healing.active.overdue_after_s",
        series=(checked, done),
        labels={"node": node},
        summary=f"{{node}} has no active check result for {{value:.0f}} s (2 intervals: {act['overdue_after_s']} s)",
    )
    fail = {**done, "result": "fail"}
    last_fail = f'max by (node, check) ({checked}{{result="fail"}})'
    last_pass = f'max by (node, check) ({checked}{{result="pass"}})'
    where = {"node": node, "check": "allreduce"}
    r.add(
        "healing",
        "ActiveCheckFailing",
        f"{last_fail} > {last_pass} or ({last_fail} unless on (node, check) {last_pass})",
        "1m",
        "warning",
        "active check {check} failed on {node}",
        [
            {
                "state": "fire",
                "value": 100,
                "series": [(checked, fail, "100x15"), (checked, done, "50x15")],
                "labels": where,
            },
            {
                "state": "quiet",
                "value": None,
                "series": [(checked, fail, "50x15"), (checked, done, "100x15")],
                "labels": where,
            },
        ],
    )
