"""plugin_utils/plan/section.py: the plan's sections as the plan stage registers them."""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping

import jinja2
from ansible.vars.clean import module_response_deepcopy, strip_internal_keys
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import (
    SHA256_KEY,
    host_view,
    plan_data,
    plan_sha256,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.section import (
    PlanSection,
    for_registration,
    section_data,
)


def _registered() -> tuple[dict, dict]:
    """(the plan, what ansible-core registers of the action's result: its copy, internal keys stripped)."""
    plan = cluster_plan(*load_inventory("tier2"))
    result = {**for_registration(plan), SHA256_KEY: plan_sha256(plan), "_ansible_no_log": True, "changed": False}
    return plan, strip_internal_keys(module_response_deepcopy(result))


def test_ansible_keeps_each_section_by_reference_when_it_registers_the_result() -> None:
    plan, registered = _registered()
    assert "_ansible_no_log" not in registered  # the copy and the strip ran
    for name, value in plan.items():
        if isinstance(value, dict):
            assert isinstance(registered[name], PlanSection) and registered[name].data is value, name
        else:
            assert registered[name] == value, name
    # the shared tables are the engine's objects, not copies
    assert registered["hosts"]["compute01"] is plan["hosts"]["compute01"]


def test_a_section_reads_as_its_dict() -> None:
    plan, registered = _registered()
    hosts = registered["hosts"]
    assert isinstance(hosts, Mapping) and not isinstance(hosts, dict)
    assert hosts == plan["hosts"] and plan["hosts"] == hosts and len(hosts) == len(plan["hosts"])
    assert list(hosts) == list(plan["hosts"]) and dict(hosts.items()) == plan["hosts"]
    assert "compute01" in hosts and hosts.get("nope", 1) == 1
    assert section_data(hosts) is plan["hosts"] and section_data(plan["hosts"]) is plan["hosts"]
    # a template reads it as before (Jinja's attribute and item lookup, filters over mappings)
    env = jinja2.Environment()
    text = env.from_string("{{ p.cluster.name }} {{ p.hosts['compute01'].roles | join(',') }} {{ p.hosts | length }}")
    roles = ",".join(plan["hosts"]["compute01"]["roles"])
    assert text.render(p=registered) == f"{plan['cluster']['name']} {roles} {len(plan['hosts'])}"


def test_plan_data_host_views_and_the_sha256_are_those_of_the_plan() -> None:
    plan, registered = _registered()
    data = plan_data(registered)
    assert all(type(v) is not PlanSection for v in data.values())
    assert data == plan and json.dumps(data, sort_keys=True) == json.dumps(plan, sort_keys=True)
    assert plan_sha256(data) == registered[SHA256_KEY] == plan_sha256(plan)
    for host in ("head01", "compute02"):
        assert host_view(registered, host) == host_view(plan, host)


def test_a_section_travels_from_the_worker_as_itself() -> None:
    """The worker pickles the result to the main process; the section arrives as a PlanSection of the same
    data (unpickling freezes the objects for the collector: plan/section.py)."""
    _, registered = _registered()
    back = pickle.loads(pickle.dumps(registered, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(back["hosts"]) is PlanSection and back == registered
    assert back["hosts"].data == registered["hosts"].data
