"""Filters that draw the plan: fabric_dot, power_svg and markdown_html.

Thin wrappers around plugin_utils/report/diagram.py and html.py (pure); the plan play writes
their text to build/plan/<name>/fabric.dot, power.svg and report.html.
Documentation: ``ansible-doc -t filter gpucluster.tiers.<name>`` (YAML beside this file).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report import diagram
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report import html as report_html


def _plan(name: str, plan: object) -> Plan:
    """The registered plan from Ansible, as the typed plan: the engine built it (cluster_plan), so only its
    sections' presence is checked here."""
    if not isinstance(plan, Mapping) or not {"cluster", "fabric", "power", "cooling", "hosts"} <= set(plan):
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: input must be the cluster plan (gpucluster_plan)")
    return cast(Plan, plain(plan))


def fabric_dot(plan: Mapping[str, Any], max_hosts: int = 64, max_switches: int = 96) -> str:
    """Graphviz DOT text of the plan's fabric."""
    return diagram.fabric_dot(_plan("fabric_dot", plan), max_hosts=int(max_hosts), max_switches=int(max_switches))


def power_svg(plan: Mapping[str, Any]) -> str:
    """SVG bar chart of rack power and cooling."""
    return diagram.power_svg(_plan("power_svg", plan))


def markdown_html(markdown: str, title: str = "Cluster plan") -> str:
    """report.md as one HTML page."""
    if not isinstance(markdown, str):
        raise AnsibleFilterError("gpucluster.tiers.markdown_html: input must be Markdown text")
    return report_html.markdown_html(str(markdown), str(title))


class FilterModule:
    """gpucluster.tiers filters that draw the plan."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"fabric_dot": fabric_dot, "power_svg": power_svg, "markdown_html": markdown_html}
