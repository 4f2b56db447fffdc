"""cluster_plan (plugins/action/cluster_plan.py): the plan stage's action, registered as gpucluster_plan.

The action checks the inventory first (scope.check_scope on the task's hostvars): the tests give it the task
variables ansible-core would, from a reference inventory read by ansible-core's own inventory manager."""

from __future__ import annotations

import copy
import functools
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.action import ActionBase
from ansible.template import Templar
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.action.cluster_plan import RESERVED, ActionModule
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import from_inventory
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import (
    RESULT_KEYS,
    SHA256_KEY,
    host_view,
    plan_data,
    plan_sha256,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.section import PlanSection


def _action(
    monkeypatch: pytest.MonkeyPatch,
    args: dict[str, Any],
    tmp_path: Path | None = None,
    task_vars: dict[str, Any] | None = None,
) -> ActionModule:
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    action = object.__new__(ActionModule)
    action._task = SimpleNamespace(args=args, check_mode=False)
    action._templar = Templar(loader=DataLoader(), variables=task_vars or {})
    if tmp_path is not None:
        action._find_needle = lambda _kind, needle: str(tmp_path / needle)  # type: ignore[method-assign]
    return action


def _task_vars(inventory: Path) -> dict[str, Any]:
    """The variables ansible-core gives a task on localhost for ``inventory``: hostvars, groups, the site's."""
    loader = DataLoader()
    inventory_manager = InventoryManager(loader=loader, sources=[str(inventory)])
    manager = VariableManager(loader=loader, inventory=inventory_manager)
    task_vars = dict(manager.get_vars(host=inventory_manager.get_host("localhost")))
    task_vars["hostvars"] = HostVars(inventory=inventory_manager, variable_manager=manager, loader=loader)
    return task_vars


@functools.cache
def _tier_vars(tier: str) -> dict[str, Any]:
    """:func:`_task_vars` of inventories/<tier>, read once (the tests only read them)."""
    return _task_vars(ROOT / "inventories" / tier)


def _copy(tmp_path: Path, tier: str = "tier1") -> Path:
    inv = tmp_path / tier
    shutil.copytree(ROOT / "inventories" / tier, inv)
    return inv


def _registered(result: dict[str, Any]) -> dict[str, Any]:
    """What register keeps of a result: ansible-core strips its internal ``_ansible_*`` keys."""
    return {k: v for k, v in result.items() if not k.startswith("_ansible_")}


def test_the_action_returns_the_engines_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    site, groups = load_inventory("tier2")
    result = _action(monkeypatch, {"site": copy.deepcopy(site), "groups": groups}).run(task_vars=_tier_vars("tier2"))
    got = _registered(result)
    digest = plan_sha256(cluster_plan(site, groups))
    assert plan_sha256(plan_data(got)) == digest
    assert got[SHA256_KEY] == digest  # the action's sha256 is the plan's (plan.yml records it)
    assert not RESERVED & set(plan_data(got)), "a plan section named like a task result key"
    assert result["_ansible_no_log"] is True  # quiet by default: the plan stays out of the output and events


def test_quiet_false_shows_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    site, groups = load_inventory("tier1")
    result = _action(monkeypatch, {"site": copy.deepcopy(site), "groups": groups, "quiet": "false"}).run(
        task_vars=_tier_vars("tier1")
    )
    assert result["_ansible_no_log"] is False


def test_the_action_loads_a_plan_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plan = cluster_plan(*load_inventory("tier1"))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    got = _action(monkeypatch, {"site": {}, "groups": {}, "file": "plan.json"}, tmp_path).run(
        task_vars=_tier_vars("tier1")
    )
    assert plan_sha256(plan_data(_registered(got))) == plan_sha256(plan) == got[SHA256_KEY]


@pytest.mark.parametrize(
    "text", ["[1, 2]", "{not json", '{"schema": 1, "changed": true}', '{"schema": 1, "plan_sha256": "x"}']
)
def test_a_bad_plan_file_stops_the_task_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> None:
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(AnsibleActionFail, match=r"bad\.json"):
        _action(monkeypatch, {"file": "bad.json"}, tmp_path).run(task_vars=_tier_vars("tier1"))


def test_a_bad_inventory_names_the_field_the_value_and_what_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    site, groups = load_inventory("tier1")
    site = copy.deepcopy(site)
    site["gpucluster_rollout"] = {"batch_size": 0}
    with pytest.raises(AnsibleActionFail) as err:
        _action(monkeypatch, {"site": site, "groups": groups}).run(task_vars=_tier_vars("tier1"))
    assert "inventory field 'gpucluster_rollout.batch_size': value 0 is not allowed" in str(err.value)


def test_the_keys_ansible_adds_to_the_registered_plan_are_not_the_plans() -> None:
    plan = cluster_plan(*load_inventory("tier2"))
    registered = {**plan, "changed": False, "failed": False, SHA256_KEY: plan_sha256(plan)}
    assert set(RESULT_KEYS) == {"changed", "failed", SHA256_KEY}
    assert plan_data(registered) == plan
    assert plan_sha256(plan_data(registered)) == plan_sha256(plan)
    view = host_view(registered, "compute01")
    assert not RESULT_KEYS & set(view)
    assert view == host_view(plan, "compute01")


def test_the_groups_are_the_plays_own_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a groups argument the action reads the play's groups from its task variables (not templated,
    and not sent back with the task's arguments): the same plan."""
    site, groups = load_inventory("tier2")
    task_vars = {**_tier_vars("tier2"), "groups": groups}
    given = _action(monkeypatch, {"site": copy.deepcopy(site), "groups": groups}).run(task_vars=task_vars)
    own = _action(monkeypatch, {"site": copy.deepcopy(site)}).run(task_vars=task_vars)
    assert own[SHA256_KEY] == given[SHA256_KEY] == plan_sha256(cluster_plan(site, groups))


def test_the_sections_are_handed_over_as_plan_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each mapping section is a PlanSection (kept by reference when ansible-core copies the registered
    result: test_plan_section.py); the garbage collector is as the action found it."""
    import gc

    site, groups = load_inventory("tier1")
    result = _action(monkeypatch, {"site": copy.deepcopy(site), "groups": groups}).run(task_vars=_tier_vars("tier1"))
    assert gc.isenabled()
    assert isinstance(result["hosts"], PlanSection) and isinstance(result["cluster"], PlanSection)
    assert result["schema"] == 2


# --- the inventory check, first (the plan stage's one task: scope.check_scope on the task's hostvars)


def test_without_site_the_action_plans_the_plays_own_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """As playbooks/tasks/plan.yml runs it: no site argument, the task's gpucluster_* variables (a run's
    switches and results left out) templated after the check: the plan of the inventory, as before."""
    site, groups = load_inventory("tier2")
    task_vars = {**_tier_vars("tier2"), "gpucluster_plan": {"stale": True}, "gpucluster_lock_ttl": 5}
    result = _action(monkeypatch, {}, task_vars=task_vars).run(task_vars=task_vars)
    assert result[SHA256_KEY] == plan_sha256(cluster_plan(site, groups))


def _refused_on_a_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: dict[str, Any]) -> str:
    """The action's error for tier2 with gpucluster_gpu_policy set on compute01: neither the engine nor the
    plan file is reached."""
    inv = _copy(tmp_path, "tier2")
    (inv / "host_vars").mkdir()
    (inv / "host_vars" / "compute01.yml").write_text("gpucluster_gpu_policy: {clock_policy: fixed}\n")
    task_vars = _task_vars(inv)
    engine: list[object] = []
    monkeypatch.setattr(from_inventory, "cluster_plan", lambda *a: engine.append(a))
    action = _action(monkeypatch, args, task_vars=task_vars)
    read: list[str] = []
    action._find_needle = lambda _kind, needle: read.append(needle) or str(tmp_path / needle)  # type: ignore[method-assign]
    with pytest.raises(AnsibleActionFail) as err:
        action.run(task_vars=task_vars)
    assert not engine and not read, "the check runs before the plan is computed or loaded"
    return str(err.value)


def test_a_gpucluster_variable_on_a_host_stops_the_action_before_the_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    message = _refused_on_a_host(monkeypatch, tmp_path, {})
    assert message.startswith("cluster_plan: inventory field 'gpucluster_gpu_policy': value {'clock_policy': 'fixed'}")
    assert "host compute01 has its own value (host_vars/compute01" in message, message


def test_the_check_runs_with_a_plan_file_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With file (gpucluster_plan_file: a sliced run) the inventory is checked as well, before the file is read."""
    (tmp_path / "plan.json").write_text(json.dumps(cluster_plan(*load_inventory("tier2"))))
    message = _refused_on_a_host(monkeypatch, tmp_path, {"file": "plan.json"})
    assert message.startswith("cluster_plan: inventory field 'gpucluster_gpu_policy'"), message


def test_the_checks_message_is_the_filters(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The same check and text as the filter gpucluster.tiers.inventory_scope, after the action's prefix."""
    from ansible.errors import AnsibleFilterError

    from ansible_collections.gpucluster.tiers.plugins.filter.gpucluster import inventory_scope

    message = _refused_on_a_host(monkeypatch, tmp_path, {})
    task_vars = _task_vars(tmp_path / "tier2")
    with pytest.raises(AnsibleFilterError) as err:
        inventory_scope(task_vars["hostvars"], task_vars["groups"]["all"])
    prefix = "gpucluster.tiers.inventory_scope: "
    assert str(err.value).startswith(prefix)
    assert message == "cluster_plan: " + str(err.value)[len(prefix) :]


def test_a_template_in_a_site_value_is_refused_before_it_is_templated(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without a site argument the site is read from the task's variables after the check: the lookup never runs."""
    marker = tmp_path / "lookup-ran"
    inv = _copy(tmp_path)
    cluster = inv / "group_vars" / "all" / "cluster.yml"
    template = f"{{{{ lookup('ansible.builtin.pipe', 'touch {marker}') }}}}cluster.internal"
    cluster.write_text(cluster.read_text().replace("domain: cluster.internal", f'domain: "{template}"'))
    task_vars = _task_vars(inv)
    with pytest.raises(AnsibleActionFail, match=r"inventory field 'gpucluster_cluster\.domain'.*Jinja template"):
        _action(monkeypatch, {}, task_vars=task_vars).run(task_vars=task_vars)
    assert not marker.exists(), "the lookup ran on the controller"


def test_the_check_needs_the_plays_hostvars(monkeypatch: pytest.MonkeyPatch) -> None:
    site, groups = load_inventory("tier1")
    with pytest.raises(AnsibleActionFail, match="needs the play's hostvars"):
        _action(monkeypatch, {"site": site, "groups": groups}).run(task_vars={"groups": groups})
