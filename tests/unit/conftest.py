"""Shared fixtures: the reference inventories read as the plan play sees them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TIERS = ("tier1", "tier2", "tier3", "tier4")


def _collect_groups(name: str, node: dict[str, Any] | None, groups: dict[str, list[str]]) -> list[str]:
    """Hosts of a YAML-inventory group, filling ``groups`` for it and its children."""
    node = node or {}
    hosts = list((node.get("hosts") or {}).keys())
    for child, sub in (node.get("children") or {}).items():
        hosts += _collect_groups(child, sub, groups)
    unique = sorted(set(hosts))
    groups[name] = unique
    return unique


def load_inventory(tier: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(gpucluster_* variables, groups) of inventories/<tier>."""
    base = ROOT / "inventories" / tier
    site: dict[str, Any] = {}
    for f in sorted((base / "group_vars" / "all").glob("*.yml")):
        site.update(yaml.safe_load(f.read_text()) or {})
    groups: dict[str, list[str]] = {}
    _collect_groups("all", yaml.safe_load((base / "hosts.yml").read_text())["all"], groups)
    return site, groups


@pytest.fixture(params=TIERS)
def tier_inventory(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], dict[str, list[str]]]:
    site, groups = load_inventory(request.param)
    return request.param, site, groups


@pytest.fixture
def tier3() -> tuple[dict[str, Any], dict[str, list[str]]]:
    site, groups = load_inventory("tier3")
    return copy.deepcopy(site), groups


def render_role_template(
    role: str,
    src: str,
    plan: dict[str, Any],
    host: str,
    *,
    core_filters: bool = False,
    undefined: type[jinja2.Undefined] = jinja2.StrictUndefined,
    **extra: Any,
) -> str:
    """A role template rendered with the plan, as the role renders it (trim_blocks, strict).

    ``core_filters``: ansible.builtin's core filters too (to_nice_json, ...); ``extra``: other variables."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROOT / "roles" / role / "templates")),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=undefined,
    )
    if core_filters:
        from ansible.plugins.filter.core import FilterModule

        env.filters.update(FilterModule().filters())
    return env.get_template(src).render(gpucluster_plan=plan, inventory_hostname=host, **extra)


def render_role_template_with_filters(role: str, src: str, plan: dict[str, Any], host: str) -> str:
    """:func:`render_role_template` for templates that use ansible.builtin's core filters (to_nice_json, ...)."""
    return render_role_template(role, src, plan, host, core_filters=True)
