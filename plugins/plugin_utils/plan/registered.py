"""The plan as a run registered it: read from Ansible's hostvars raw, for a host's view (filter host_plan).

Reading the plan as ``hostvars['localhost'].gpucluster_plan`` runs the whole plan through the templating
engine on every read (ansible-core 2.19, ``HostVarsVars.__getitem__``: about a second per host and task at
a thousand nodes); it is read raw instead (``HostVars.raw_get``, through plugin_utils/ansible_compat.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat

#: the name playbooks/tasks/plan.yml registers the plan as
PLAN_VARIABLE = "gpucluster_plan"


def registered_plan(hostvars: ansible_compat.RawHostVars, host: str, controller: str = "localhost") -> Any:
    """The controller's registered plan, or where the controller has none (site.yml with a --limit that
    leaves localhost out registers it on the limited hosts, one object) the host's own; None if neither."""
    facts = ansible_compat.raw_host_variables(hostvars, controller)
    plan = facts.get(PLAN_VARIABLE) if isinstance(facts, Mapping) else None
    if plan is None:  # a --limit without localhost: site.yml registered the plan on the limited hosts
        own = ansible_compat.raw_host_variables(hostvars, str(host))
        plan = own.get(PLAN_VARIABLE) if isinstance(own, Mapping) else None
    return plan
