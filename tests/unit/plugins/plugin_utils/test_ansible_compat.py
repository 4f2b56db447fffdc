"""plugin_utils/ansible_compat.py: the one home of ansible-core's private interfaces, on each release line
(make compat runs this file on ansible-core 2.18 too)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.origin import origin, origin_path


class _HostVars:
    """What the collection uses of ansible-core's HostVars: raw_get, and the variable manager's extra vars."""

    def __init__(self, data: dict[str, dict[str, Any]], extra: dict[str, Any]) -> None:
        self.data = data
        self._variable_manager = SimpleNamespace(extra_vars=extra)

    def raw_get(self, host: str) -> dict[str, Any]:
        return self.data.get(host, {})


def test_hostvars_are_read_raw_with_the_command_lines_names() -> None:
    hostvars = _HostVars({"dgx01": {"gpucluster_node": "{{ x }}"}}, {"gpucluster_plan_root": "/tmp/p"})
    assert ansible_compat.is_hostvars(hostvars)
    assert not ansible_compat.is_hostvars({"dgx01": {}})
    assert ansible_compat.raw_host_variables(hostvars, "dgx01") == {"gpucluster_node": "{{ x }}"}
    assert ansible_compat.extra_variable_names(hostvars) == frozenset({"gpucluster_plan_root"})
    assert ansible_compat.extra_variable_names(object()) == frozenset()


def test_a_plain_value_has_no_origin_and_no_lazy_copy() -> None:
    assert ansible_compat.origin_of("h100_sxm") is None
    assert origin_path({"a": 1}) is None
    assert ansible_compat.non_lazy_copy({"cluster": {}}) is None


def test_a_tagged_value_names_its_file_where_ansible_core_tags_values() -> None:
    if not ansible_compat.has_data_tagging():
        pytest.skip("ansible-core before 2.19 tags no value with its origin")
    value = ansible_compat.tag_origin("h100_sxn", "/site/group_vars/all/node.yml", 5)
    assert ansible_compat.origin_of(value) == ("/site/group_vars/all/node.yml", 5)
    node = ansible_compat.tag_origin({"gpu_model": value}, "/site/group_vars/all/node.yml", 4)
    assert (
        origin("gpucluster_node.gpu_model", [{"gpucluster_node": node}]) == " (set in /site/group_vars/all/node.yml:5)"
    )


def test_a_tasks_role_folder() -> None:
    assert ansible_compat.task_role_path(SimpleNamespace(_role=None)) is None
    role = SimpleNamespace(_role_path="/c/roles/common")
    assert ansible_compat.task_role_path(SimpleNamespace(_role=role)) == "/c/roles/common"


def test_a_templates_own_variables_on_this_release(tmp_path: Path) -> None:
    source = tmp_path / "chrony.conf.j2"
    source.write_text("server {{ x }}\n")
    variables = ansible_compat.template_file_variables("chrony.conf.j2", str(source), "/etc/chrony.conf")
    assert variables["template_fullpath"] == str(source)
    assert variables["template_destpath"] == "/etc/chrony.conf"
