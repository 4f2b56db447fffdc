"""The dashboards' panel builder: a panel's queries, unit, threshold steps and description as the plan
stores them (:func:`panel_data`), with the PromQL helpers every dashboard shares."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import PanelData

RATE_WINDOW = "5m"  # 10 scrape intervals of 30 s (prometheus.py SCRAPE_INTERVAL)
#: dashboard variables and what the checks put in their place (a regex matching every value)
VARIABLES = {"host": ".*"}
HOST = 'host=~"$host"'


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Step:
    """A threshold line: from ``value`` on, the colour; ``plan`` names the plan key it comes from."""

    value: float | None
    color: str
    plan: str = ""


@dataclass
class Panel:
    title: str
    queries: list[Query] = field(default_factory=list)
    unit: str = "short"
    steps: list[Step] = field(default_factory=list)
    description: str = ""
    text: str = ""  # a text panel (no queries) when set


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "inf", "nan"})


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (identifiers that are not functions, keywords,
    label names, label values or grouping labels)."""
    text = _STRINGS.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)  # selectors: label names and values
    text = re.sub(r"\[[^\]]*\]", "", text)  # range windows
    text = _GROUPING.sub("", text)
    return {m for m in _IDENT.findall(text) if m.lower() not in _KEYWORDS}


def threshold_steps(plan: Mapping[str, Any], *pairs: tuple[str, str]) -> list[Step]:
    """Steps for the alerts named (alert, colour) that the plan has, in rising order."""
    thresholds = plan["monitoring"]["thresholds"]
    steps = [Step(thresholds[a]["value"], color, thresholds[a]["plan"]) for a, color in pairs if a in thresholds]
    return sorted(steps, key=lambda s: s.value or 0)


def panel_data(panel: Panel) -> PanelData:
    """A panel as the plan stores it: its fields, without the empty ones of the other panel kind."""
    if panel.text:
        return {"title": panel.title, "text": panel.text, "description": panel.description}
    return {
        "title": panel.title,
        "queries": [{"expr": q.expr, "legend": q.legend} for q in panel.queries],
        "unit": panel.unit,
        "steps": [{"value": st.value, "color": st.color, "plan": st.plan} for st in panel.steps],
        "description": panel.description,
    }
