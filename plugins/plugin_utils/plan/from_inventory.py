"""The whole plan from a site's variables as Ansible (or plugin_utils/inventory/reading.py) gives them.

The wiring the cluster_plan filter, the cluster_plan action and the tools share: the site's data among the
variables (reading.site_variables), the inventory groups and the roles' file lists (reading.role_files),
converted to plain data and passed to the engine (plan/assembly.py ``cluster_plan``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.origin import origin
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import role_files, site_variables
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan


def plan_inputs(
    site_vars: Mapping[str, Any], groups: Mapping[str, Any]
) -> tuple[dict[str, Any], Mapping[str, Any], dict[str, Any]]:
    """The engine's arguments, not yet converted: (the site's gpucluster_* data, the groups, the roles' files)."""
    return site_variables(site_vars), groups, role_files()


def cluster_plan(site_vars: Mapping[str, Any], groups: Mapping[str, Any]) -> Plan:
    """The whole plan from the gpucluster_* variables, the inventory groups and the roles' file lists.

    A run's switches and results (``site.RUN_PREFIXES``) are not site data and are left out. Raises the
    engine's PlanError (:func:`where` names the file the bad value was set in)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import assembly

    return assembly.cluster_plan(*[plain(a) for a in plan_inputs(site_vars, groups)])


def where(exc: PlanError, site_vars: Mapping[str, Any], groups: Mapping[str, Any]) -> str:
    """`` (set in <file>:<line>)`` for the value ``exc`` names, or "" (plugin_utils/inventory/origin.py)."""
    return origin(exc.field, plan_inputs(site_vars, groups))
