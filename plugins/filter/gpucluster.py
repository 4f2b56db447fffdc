"""Filters of gpucluster.tiers for the plan itself: the plan from the inventory, the inventory's check,
a host's view, the plan's data, hash and report, and the audit against it.

Thin wrappers: each filter checks its arguments and calls plugins/plugin_utils (the inventory check in
inventory/scope.py, the plan's inputs in plan/from_inventory.py; ansible-core's private interfaces only
through ansible_compat.py), turning the engine's error into an AnsibleFilterError that names the
inventory field, the value and what is allowed. The filters that answer one question are in
calculators.py, those that write a file's text from the plan in documents.py.
Documentation: ``ansible-doc -t filter gpucluster.tiers.<name>`` (YAML beside this file).

The engine's modules are imported when a filter runs, not when this file loads: ansible-core
loads every filter file of the collection to find one filter, in every forked worker (one per
host and task), so a site.yml task reading ``gpucluster_host_plan`` (host_plan) would otherwise import
the whole engine per host and task (about 70 ms each). Each filter therefore imports what it
calls with an ordinary ``from ... import`` inside the function: static (readers, ruff and
ansible-test see it), and lazy (the first call imports, later calls find the module loaded).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.filter_calls import run as _run
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain


def cluster_plan(site_vars: Mapping[str, Any], groups: Mapping[str, Any]) -> dict[str, Any]:
    """The whole plan from the gpucluster_* variables, the inventory groups and the roles' file lists
    (plugin_utils/plan/from_inventory.py; a run's switches and results are not site data, left out)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import assembly, from_inventory

    result: dict[str, Any] = _run("cluster_plan", assembly.cluster_plan, *from_inventory.plan_inputs(site_vars, groups))
    return result


def inventory_scope(source: Any, hosts: Any, controller: str = "localhost") -> bool:
    """True, or an error naming the variable: a misspelt site variable, a gpucluster_* variable set on a
    host or a group other than all, gpucluster_plan_root/_dir from the inventory (they are -e choices),
    two hosts with one ansible_host, a template or an unbounded value in a gpucluster_* variable
    (plugin_utils/inventory/scope.py).

    ``source`` is ``hostvars``: each host's variables are read raw (no templating); the command line's
    variables (``-e``) from its variable manager."""
    if not ansible_compat.is_hostvars(source):
        raise AnsibleFilterError("gpucluster.tiers.inventory_scope: input must be hostvars")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import scope

    try:
        scope.check_scope(source, hosts, controller)
    except scope.ScopeError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.inventory_scope: {exc}") from None
    return True


def host_plan_filter(source: Any, host: str, controller: str = "localhost") -> dict[str, Any]:
    """One host's slice of the plan (plugin_utils/plan/host_plan.py): what a host play names
    ``gpucluster_host_plan``, beside localhost's whole plan ``gpucluster_plan``.

    ``source`` is the plan, or ``hostvars``: then the plan is the controller's ``gpucluster_plan``
    fact read raw (plugin_utils/plan/registered.py: no templating of the whole plan per read), or
    the host's own where the controller has none (a --limit without localhost). Neither way is the
    plan converted with plain(): the view refers to the plan's own objects, so no host copies the
    shared tables."""
    plan = source
    if ansible_compat.is_hostvars(source):
        from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import registered

        plan = registered.registered_plan(source, str(host), controller)
        if plan is None:
            raise AnsibleFilterError(
                f"gpucluster.tiers.host_plan: {controller} has no gpucluster_plan: run playbooks/tasks/plan.yml first"
            )
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.host_plan: input must be the plan (a mapping) or hostvars")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import host_plan

    try:
        return host_plan.host_view(plan, str(host))
    except PlanError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.host_plan: {exc}") from None


def plan_sha256(plan: Mapping[str, Any]) -> str:
    """sha256 of the plan's canonical JSON (sorted keys, compact separators), without the keys Ansible
    adds to the registered result (``changed``, ``failed``: plan_data).

    A fact's value reaches a filter as a lazy container (ansible-core 2.19) whose nested values are
    the fact's own, already rendered, containers: unwrapped (ansible_compat.non_lazy_copy) they are
    hashed directly; plain() would re-wrap every nested container on the way (seconds for a large plan)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import host_plan as engine

    unwrapped = ansible_compat.non_lazy_copy(plan)
    try:
        return engine.plan_sha256(engine.plan_data(plan if unwrapped is None else unwrapped))
    except (TypeError, ValueError):  # an unrendered lazy value inside: the slow, always-plain way
        return str(_run("plan_sha256", lambda p: engine.plan_sha256(engine.plan_data(p)), plan))


def plan_data(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The registered plan without the keys Ansible adds to a task result (``changed``, ``failed``):
    what plan.json holds. The sections stay the plan's own objects."""
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.plan_data: input must be the plan (a mapping)")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import host_plan

    return host_plan.plan_data(plan)


def plan_report(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan report, rendered from the plan (plugin_utils/report/sections.py): ``sections`` (title,
    intro, rows of setting, value, how), ``summary`` (warnings, next steps) and ``files`` (each host's role
    files: plan/files.py files_by_host). Not part of the plan."""
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.plan_report: input must be the plan (a mapping)")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import host_plan
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import plan_report as report_of

    unwrapped = ansible_compat.non_lazy_copy(plan)
    data = host_plan.plan_data(plain(plan) if unwrapped is None else unwrapped)
    report: dict[str, Any] = _run("plan_report", report_of, data)
    return report


def audit_request(view: Mapping[str, Any], host: str, layout_client: str = "") -> dict[str, Any]:
    """The audit_facts arguments of a host, from its own view of the plan (plugin_utils/audit/request.py).

    The view is not converted with plain(): it refers to the plan's shared tables, which a copy per
    host would make O(N^2); the engine reads a few keys of it."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit import request as engine

    try:
        return engine.host_request(view, str(host), str(layout_client) or None)
    except PlanError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.audit_request: {exc}") from None


def audit_findings(
    source: Any,
    hosts: Any,
    settings: Mapping[str, Any] | None = None,
    fabric: Mapping[str, Any] | None = None,
    baseline: Mapping[str, Any] | None = None,
    controller: str = "localhost",
    facts_var: str = "audit_host",
    planned_var: str = "audit_planned",
) -> dict[str, Any]:
    """The audit of the hosts (plugin_utils/audit/driver.py ``audit``), from ``hostvars``.

    Each host's registered ``facts_var`` (audit_facts' result) and ``planned_var`` (render_files'
    checksums) and the controller's plan are read raw (``HostVars.raw_get``: no templating of the whole
    plan); a host without a result was not reached."""
    if not ansible_compat.is_hostvars(source):
        raise AnsibleFilterError("gpucluster.tiers.audit_findings: input must be hostvars")
    facts = ansible_compat.raw_host_variables(source, controller)
    plan = facts.get("gpucluster_plan") if isinstance(facts, Mapping) else None
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError(f"gpucluster.tiers.audit_findings: {controller} has no gpucluster_plan")
    read: dict[str, Any] = {}
    planned: dict[str, Any] = {}
    unreachable: list[str] = []
    for host in [str(h) for h in hosts or []]:
        raw = ansible_compat.raw_host_variables(source, host)
        result = raw.get(facts_var) if isinstance(raw, Mapping) else None
        rendered = raw.get(planned_var) if isinstance(raw, Mapping) else None
        if not isinstance(result, Mapping) or "audit" not in result:
            unreachable.append(host)
            continue
        read[host] = plain(result["audit"])
        planned[host] = plain((rendered or {}).get("checksums") or {})
    collected = {
        "hosts": read,
        "planned_files": planned,
        "unreachable": unreachable,
        "fabric": plain(fabric) if fabric else None,
        "baseline": plain(baseline) if baseline else None,
    }
    # the plan as it is (plain() would copy megabytes at a thousand nodes); the collected facts are plain
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit import driver as engine

    try:
        return engine.audit(plan, collected, plain(settings or {}))
    except PlanError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.audit_findings: {exc}") from None


def audit_markdown(result: Mapping[str, Any]) -> str:
    """The audit's readable report (Markdown), one line per finding grouped by host and class."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit import report as engine

    return _run("audit_markdown", engine.report_markdown, result)


def role_services(units: Any, role: str, switches: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """gpucluster.tiers.host_state's ``services``: the units of ``units`` (the plan's ``services[host]``) that
    ``role`` starts, each enabled and started, in the plan's order; a unit whose role switch ``switches``
    turns off (``{'common_firewall_enabled': false}``) is left out."""
    if not isinstance(units, list) or not all(isinstance(u, Mapping) and "unit" in u for u in units):
        raise AnsibleFilterError("gpucluster.tiers.role_services: input must be the plan's services[host] list")
    given = dict(switches or {})
    return [
        {"name": str(u["unit"]), "enabled": True, "state": "started"}
        for u in units
        if u.get("role") == role and (not u.get("switch") or boolean(given.get(u["switch"], True), strict=True))
    ]


class FilterModule:
    """gpucluster.tiers filters for the plan and its audit."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "cluster_plan": cluster_plan,
            "audit_request": audit_request,
            "audit_findings": audit_findings,
            "audit_markdown": audit_markdown,
            "host_plan": host_plan_filter,
            "inventory_scope": inventory_scope,
            "plan_sha256": plan_sha256,
            "plan_data": plan_data,
            "plan_report": plan_report,
            "role_services": role_services,
        }
