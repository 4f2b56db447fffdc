"""The alert rules' building blocks: the exporters' ports and metric names the rules read, the rule and
test files' paths, and :class:`RuleBook`, which collects each alert's rule (by group) with its firing and
quiet promtool cases (alerts.py's module doc: how every boundary is pinned)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.alert_help import ALERT_HELP
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import (
    AlertCase,
    AlertRule,
    AlertSpec,
    Labels,
    RuleGroup,
    Threshold,
)

#: the exporters' ports: the rule tests' series carry them in ``instance`` (prometheus.py scrapes them)
NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400
IB_ACTIVE = 4  # node_infiniband_state_id: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER
RULE_FILE = "gpucluster.rules.yml"
#: where the head keeps the rules and their promtool tests: the tests outside Prometheus's rule folder,
#: naming the rule file relative to their own folder (promtool resolves rule_files from there)
RULE_PATH = f"/etc/prometheus/rules/{RULE_FILE}"
RULE_TEST_PATH = "/etc/prometheus/tests/gpucluster.rules.test.yml"
RULE_FILE_FROM_TESTS = f"../rules/{RULE_FILE}"
#: Grafana's default HTTP port (https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/#http_port)
GRAFANA_PORT = 3000
#: the runbook, relative to the collection's root (docs ship in the collection); one section per alert
RUNBOOK = "docs/runbook.md"
TEST_INTERVAL_MIN = 1  # promtool tests step one minute; every ``for`` is whole minutes
NVLINK_WINDOW = "10m"

SUPPLY = "gpucluster_coolant_supply_celsius"
RETURN = "gpucluster_coolant_return_celsius"
FLOW = "gpucluster_coolant_flow_lpm"
COOLANT_METRICS = (SUPPLY, RETURN, FLOW)

# how each comparison is pinned: (value of the firing case, value of the quiet case) from
# the threshold t and the step s of the metric
_PIN: dict[str, Callable[[float, float], tuple[float, float]]] = {
    ">=": lambda t, s: (t, t - s),
    "<=": lambda t, s: (t, t + s),
    ">": lambda t, s: (t + s, t),
    "<": lambda t, s: (t - s, t),
}


def dashboard_uid(key: str) -> str:
    """The uid of a dashboard (dashboards.py names them so; alerts link to them by it)."""
    return f"gpucluster-{key}"


def runbook_anchor(alert: str) -> str:
    """The anchor of an alert's runbook section (a "### <alert>" heading, GitHub's slug: lower case)."""
    return alert.lower()


def num(x: float) -> str:
    """A PromQL/YAML number literal: integers without a fraction, floats as Python's shortest repr."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def go_template(summary: str) -> str:
    """Summary in mini format (``{label}``, ``{value:.Nf}``) -> Prometheus alert template."""
    out = re.sub(r"\{value:\.(\d)f\}", r'{{ $value | printf "%.\1f" }}', summary)
    return re.sub(r"\{(\w+)\}", r"{{ $labels.\1 }}", out)


def render(summary: str, labels: Labels, value: float | None) -> str:
    """What Prometheus renders from the same summary (Go's %.Nf rounds like Python's)."""
    return summary.format(value=value, **labels)


def selector(labels: Labels) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def minutes(duration: str) -> int:
    m = re.fullmatch(r"(\d+)m", duration)
    if not m:
        raise ValueError(f"alert durations are whole minutes, got {duration!r}")
    return int(m.group(1))


class RuleBook:
    """Collects alert rules (by group) and, per alert, its firing and quiet test cases."""

    def __init__(self, grafana_url: str) -> None:
        self.groups: list[RuleGroup] = []
        self.alerts: list[AlertSpec] = []
        self.grafana_url = grafana_url

    def annotations(self, name: str, summary: str, labels: set[str]) -> dict[str, str]:
        """The alert's annotations in mini format (:func:`go_template` / :func:`render` read them)."""
        if name not in ALERT_HELP:
            raise ValueError(f"alert {name} has no ALERT_HELP entry (description, dashboard)")
        description, board = ALERT_HELP[name]
        dashboard = f"{self.grafana_url}/d/{dashboard_uid(board)}"
        if "host" in labels:
            dashboard += "?var-host={host}"
        return {
            "summary": summary,
            "description": description,
            "runbook_url": f"{RUNBOOK}#{runbook_anchor(name)}",
            "dashboard": dashboard,
        }

    def add(
        self,
        group: str,
        name: str,
        expr: str,
        for_: str,
        severity: str,
        summary: str,
        cases: list[AlertCase],
        threshold: Threshold | None = None,
    ) -> None:
        labels: set[str] = set().union(*(c["labels"] for c in cases))
        annotations = self.annotations(name, summary, labels)
        rule: AlertRule = {
            "alert": name,
            "expr": expr,
            "for": for_,
            "labels": {"severity": severity},
            "annotations": {k: go_template(v) for k, v in annotations.items()},
        }
        for g in self.groups:
            if g["name"] == group:
                g["rules"].append(rule)
                break
        else:
            self.groups.append({"name": group, "rules": [rule]})
        self.alerts.append(
            {
                "alert": name,
                "for": for_,
                "severity": severity,
                "summary": summary,
                "annotations": annotations,
                "cases": cases,
                "threshold": threshold,
            }
        )

    def threshold(
        self,
        group: str,
        name: str,
        *,
        metric: str,
        op: str,
        value: float,
        plan_key: str,
        step: float,
        for_: str,
        severity: str,
        summary: str,
        labels: Labels,
        selector: str = "",
        convert: tuple[str, float] = ("", 1.0),
    ) -> None:
        """An alert ``metric op value``. ``convert``: PromQL that turns the exporter's unit into the
        plan's, and the factor from the plan's unit back to the exporter's (for the test series)."""
        lhs = f"{metric}{selector}{convert[0]}"
        fire, quiet = (round(v, 6) for v in _PIN[op](value, step))
        cases: list[AlertCase] = [
            {"state": state, "value": v, "series": [(metric, labels, num(v * convert[1]))], "labels": labels}
            for state, v in (("fire", fire), ("quiet", quiet))
        ]
        self.add(
            group,
            name,
            f"{lhs} {op} {num(value)}",
            for_,
            severity,
            summary,
            cases,
            {"plan": plan_key, "op": op, "value": value, "fire": fire, "quiet": quiet},
        )
