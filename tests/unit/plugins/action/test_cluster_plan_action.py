"""cluster_plan (plugins/action/cluster_plan.py): the plan stage's action, registered as gpucluster_plan."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.action.cluster_plan import RESERVED, ActionModule
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import (
    RESULT_KEYS,
    SHA256_KEY,
    host_view,
    plan_data,
    plan_sha256,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.section import PlanSection


def _action(monkeypatch: pytest.MonkeyPatch, args: dict[str, Any], tmp_path: Path | None = None) -> ActionModule:
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    action = object.__new__(ActionModule)
    action._task = SimpleNamespace(args=args, check_mode=False)
    if tmp_path is not None:
        action._find_needle = lambda _kind, needle: str(tmp_path / needle)  # type: ignore[method-assign]
    return action


def _registered(result: dict[str, Any]) -> dict[str, Any]:
    """What register keeps of a result: ansible-core strips its internal ``_ansible_*`` keys."""
    return {k: v for k, v in result.items() if not k.startswith("_ansible_")}


def test_the_action_returns_the_engines_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    site, groups = load_inventory("tier2")
    result = _action(monkeypatch, {"site": copy.deepcopy(site), "groups": groups}).run(task_vars={})
    got = _registered(result)
    digest = plan_sha256(cluster_plan(site, groups))
    assert plan_sha256(plan_data(got)) == digest
    assert got[SHA256_KEY] == digest  # the action's sha256 is the plan's (plan.yml records it)
    assert not RESERVED & set(plan_data(got)), "a plan section named like a task result key"
    assert result["_ansible_no_log"] is True  # quiet by default: the plan stays out of the output and events


def test_quiet_false_shows_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    site, groups = load_inventory("tier1")
    result = _action(monkeypatch, {"site": copy.deepcopy(site), "groups": groups, "quiet": "false"}).run(task_vars={})
    assert result["_ansible_no_log"] is False


def test_the_action_loads_a_plan_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plan = cluster_plan(*load_inventory("tier1"))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    got = _action(monkeypatch, {"site": {}, "groups": {}, "file": "plan.json"}, tmp_path).run(task_vars={})
    assert plan_sha256(plan_data(_registered(got))) == plan_sha256(plan) == got[SHA256_KEY]


@pytest.mark.parametrize(
    "text", ["[1, 2]", "{not json", '{"schema": 1, "changed": true}', '{"schema": 1, "plan_sha256": "x"}']
)
def test_a_bad_plan_file_stops_the_task_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> None:
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(AnsibleActionFail, match=r"bad\.json"):
        _action(monkeypatch, {"file": "bad.json"}, tmp_path).run(task_vars={})


def test_a_bad_inventory_names_the_field_the_value_and_what_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    site, groups = load_inventory("tier1")
    site = copy.deepcopy(site)
    site["gpucluster_rollout"] = {"batch_size": 0}
    with pytest.raises(AnsibleActionFail) as err:
        _action(monkeypatch, {"site": site, "groups": groups}).run(task_vars={})
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
    given = _action(monkeypatch, {"site": copy.deepcopy(site), "groups": groups}).run(task_vars={})
    own = _action(monkeypatch, {"site": copy.deepcopy(site)}).run(task_vars={"groups": groups})
    assert own[SHA256_KEY] == given[SHA256_KEY] == plan_sha256(cluster_plan(site, groups))


def test_the_sections_are_handed_over_as_plan_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each mapping section is a PlanSection (kept by reference when ansible-core copies the registered
    result: test_plan_section.py); the garbage collector is as the action found it."""
    import gc

    site, groups = load_inventory("tier1")
    result = _action(monkeypatch, {"site": copy.deepcopy(site), "groups": groups}).run(task_vars={})
    assert gc.isenabled()
    assert isinstance(result["hosts"], PlanSection) and isinstance(result["cluster"], PlanSection)
    assert result["schema"] == 2
