"""The plan stage's action: compute the cluster plan (or load plan.json) on the controller.

playbooks/tasks/plan.yml registers this action's result as ``gpucluster_plan`` on localhost.
A result is not templated: ansible-core pickles it from the worker and copies it when it registers it.
The same plan as a ``set_fact`` value is a template result, which ansible-core 2.19 finalises
value by value through its lazy containers: at 16,384 nodes (9 million values) that walk was
most of the plan stage's 165 s of CPU (docs/performance.md). Facts an action returns go to the
persistent fact cache (ansible.cfg: jsonfile), a registered result does not.

The result also holds the plan's sha256 (``plan_sha256``: host_plan.SHA256_KEY), hashed here where the
plan is plain data; hashing the registered plan in a later task walked it again through ansible-core's
lazy containers (docs/performance.md). ansible-core adds ``changed`` and ``failed`` to the result:
``plan_data`` (plugin_utils/plan/host_plan.py, filter gpucluster.tiers.plan_data) is the plan without
these keys (host_plan.RESULT_KEYS); host_plan and plan_sha256 leave them out.

Each mapping section is handed over as a read-only ``PlanSection`` (plugin_utils/plan/section.py), which
ansible-core's copy of a registered result keeps by reference instead of walking it (6-7 s and a second copy of
the plan at 16,384 nodes). The engine and the hash run with the cyclic garbage collector off: they build
millions of containers, and each full collection would walk them and every object the worker inherited from
the main process; nothing they build is cyclic garbage, and the worker ends with the task. The plan is then
frozen (``gc.freeze``) for the collections that pickling it would start. The groups are the play's own
(task variables) unless given: a task argument travels back to the main process with the result.

The action first checks the inventory (plugin_utils/inventory/scope.py ``check_scope``, the check of the filter
``gpucluster.tiers.inventory_scope``) on the task's own ``hostvars`` and ``groups['all']``, before it computes or
loads a plan: each host's variables read raw, nothing templated yet. One worker then imports the engine once
(the check as a task of its own was a second worker importing it again). Without a ``site`` argument (as
playbooks/tasks/plan.yml runs it) the site is the task's own ``gpucluster_*`` variables (a run's switches and
results left out: reading.site_variables), templated only after the check: a template in an inventory value
(``{{ lookup('pipe', ...) }}``) or an alias bomb is refused before anything evaluates or expands it, as a ``site``
argument, templated by ansible-core before the action runs, could not be.

``quiet`` (default true) hides the plan from the output and the job events by marking the result
``_ansible_no_log`` (not the task: a task's no_log would hide the error too). A failure is not
hidden: the check's error and the engine's (the inventory field, the value, what is allowed, the file)
are printed once.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import scope
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import site_variables
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import from_inventory
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import (
    RESULT_KEYS,
    SHA256_KEY,
    plan_sha256,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.section import for_registration

#: How deep plan_sha256 hashes piece by piece here: the same digest at any depth; at 2 the pieces are a
#: section's parts (one json.dumps each, C-level), the fewest Python calls whose pieces stay small.
SHA256_DEPTH = 2

#: The host the plan is computed on (playbooks/tasks/plan.yml delegates the task to it): the inventory check's
#: reference host, as the filter gpucluster.tiers.inventory_scope's default.
CONTROLLER = "localhost"

#: Result keys ansible-core reads or sets itself: a plan section must not be named like one.
RESERVED: frozenset[str] = RESULT_KEYS | frozenset(
    {"ansible_facts", "skipped", "msg", "rc", "results", "warnings", "deprecations", "exception", "invocation", "diff"}
)


def checked(plan: Any, source: str) -> dict[str, Any]:
    """``plan`` if it is a mapping whose sections do not clash with a task result's own keys."""
    if not isinstance(plan, dict):
        raise AnsibleActionFail(f"cluster_plan: {source} is not a plan (a JSON object), it is a {type(plan).__name__}")
    clash = sorted(RESERVED & set(plan))
    if clash:
        raise AnsibleActionFail(
            f"cluster_plan: {source} has sections named like task result keys ({', '.join(clash)}); "
            "a plan section must not be named " + ", ".join(sorted(RESERVED))
        )
    return plan


def check_inventory(task_vars: Mapping[str, Any], controller: str = CONTROLLER) -> None:
    """The inventory check (scope.check_scope) on the task's ``hostvars`` and ``groups['all']``: every host's
    variables read raw, nothing templated. Raises AnsibleActionFail with the check's error (the variable, the
    value, the file)."""
    hostvars: Any = task_vars.get("hostvars")
    if not ansible_compat.is_hostvars(hostvars):
        raise AnsibleActionFail("cluster_plan: the inventory check needs the play's hostvars (task variables)")
    groups = task_vars.get("groups")
    hosts = groups.get("all") if isinstance(groups, Mapping) else None
    try:
        scope.check_scope(hostvars, hosts, controller)
    except scope.ScopeError as exc:
        raise AnsibleActionFail(f"cluster_plan: {exc}") from None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("site", "groups", "file", "quiet"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        super().run(tmp, task_vars)
        variables = task_vars or {}
        args = self._task.args
        collecting = gc.isenabled()
        gc.disable()
        try:
            check_inventory(variables)  # first: before a plan is computed or loaded, before a value is templated
            quiet = boolean(args.get("quiet", True), strict=False)
            plan = self._plan(args, variables)
            digest = plan_sha256(plan, SHA256_DEPTH)
            gc.freeze()  # the result is pickled next (the worker sending it), with collections back on
        finally:
            if collecting:
                gc.enable()
        return {**for_registration(plan), SHA256_KEY: digest, "_ansible_no_log": quiet}

    def _plan(self, args: Mapping[str, Any], variables: Mapping[str, Any]) -> dict[str, Any]:
        path = str(args.get("file") or "")
        if path:
            real = self._find_needle("files", path)
            try:
                with open(real, encoding="utf-8") as handle:
                    plan = json.load(handle)
            except (OSError, ValueError) as exc:
                raise AnsibleActionFail(f"cluster_plan: cannot read the plan file {path}: {exc}") from None
            return dict(checked(plan, path))
        # groups: the play's own (a task argument is templated, and the task's arguments travel back to the
        # main process with the result: 17,410 host names, 3 s of the stage at 16,384 nodes); the site: the
        # play's gpucluster_* variables, templated now that the inventory check has passed
        site, groups = args.get("site"), args.get("groups", variables.get("groups"))
        if site is None:
            site = self._templar.template(site_variables(variables))
        if not isinstance(site, dict) or not isinstance(groups, dict):
            raise AnsibleActionFail("cluster_plan: site (the gpucluster_* variables) and groups must be mappings")
        try:
            plan = from_inventory.cluster_plan(site, groups)
        except PlanError as exc:  # the engine's error: the inventory field, the value, what is allowed, the file
            raise AnsibleActionFail(f"cluster_plan: {exc}{from_inventory.where(exc, site, groups)}") from None
        except TypeError as exc:
            raise AnsibleActionFail(f"cluster_plan: bad arguments: {exc}") from None
        return dict(checked(plan, "the computed plan"))
