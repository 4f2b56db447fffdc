"""The plan play's inventory check (plugins/plugin_utils/inventory/scope.py) on ansible-core's own inventory.

The check reads the controller and the hosts with variables of their own with ``raw_get`` (ansible-core's
``get_vars``) and the other hosts once (ansible_compat.hosts_of_group_all): what it reads of every host must
be what ``raw_get`` gives, whatever the inventory sets where."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import scope

_SITE = {
    "gpucluster_cluster": {"name": "t", "scheduler": "slurm"},
    "gpucluster_node": {"gpus": 8},
    "apt_mirror": "x",
    "gpucluser_slurm": {"a": 1},  # a near miss, on group all: read on every host
}


def _inventory(tmp_path: Path, *, host_file: dict[str, Any] | None = None) -> HostVars:
    hosts = {
        "all": {
            "children": {
                "head": {"hosts": {"head01": {"ansible_host": "10.0.0.1"}}},
                "compute": {
                    "hosts": {
                        "c1": {"ansible_host": "10.0.0.2"},
                        "c2": {"ansible_host": "10.0.0.3", "gpucluster_node": {"gpus": 4}},  # its own value
                        "c3": None,
                        "c4": {"ansible_host": "10.0.0.4", "ansible_user": "root"},
                    },
                    "children": {
                        "odd": {"hosts": {"c5": None}, "vars": {"gpucluster_slurm": {"x": 1}}},
                        "filed": {"hosts": {"c6": None}},
                        "plain": {"hosts": {"c7": None}, "vars": {"ansible_user": "admin"}},
                    },
                },
            }
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "group_vars" / "all" / "site.yml").write_text(yaml.safe_dump(_SITE))
    (tmp_path / "group_vars" / "filed.yml").write_text(yaml.safe_dump({"gpucluster_fabric": {"type": "roce"}}))
    if host_file is not None:
        (tmp_path / "host_vars").mkdir()
        (tmp_path / "host_vars" / "c3.yml").write_text(yaml.safe_dump(host_file))
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(tmp_path / "hosts.yml")])
    manager = VariableManager(loader=loader, inventory=inventory)
    # a run's variables: a registered result on every host (one object), set_fact and include_vars on one
    registered = {"changed": False}
    for host in inventory.hosts:
        manager.set_nonpersistent_facts(host, {"gpucluster_plan_known_tiers": registered})
    manager.set_nonpersistent_facts("c1", {"gpucluster_node": {"gpus": 2}})
    manager.set_host_variable("c4", "ansible_host", "10.0.9.9")
    return HostVars(inventory=inventory, variable_manager=manager, loader=loader)


def _checked(values: Any) -> dict[str, Any]:
    return {str(k): v for k, v in values.items() if scope.checked_name(str(k))}


@pytest.mark.parametrize("host_file", [None, {"ansible_user": "x"}, {"gpucluster_node": {"gpus": 1}}])
def test_each_hosts_variables_are_what_raw_get_gives(tmp_path: Path, host_file: dict[str, Any] | None) -> None:
    hostvars = _inventory(tmp_path, host_file=host_file)
    hosts = ["localhost", "head01", "c1", "c2", "c3", "c4", "c5", "c6", "c7"]
    got = scope.raw_variables(hostvars, hosts, "localhost")
    assert list(got) == hosts
    for host in hosts:
        assert _checked(got[host]) == _checked(hostvars.raw_get(host)), host


def test_hosts_of_group_all_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hostvars = _inventory(tmp_path)
    common = ansible_compat.hosts_of_group_all(
        hostvars, ["head01", "c1", "c2", "c3", "c4", "c5", "c6", "c7"], scope.checked_name
    )
    # c2 sets a site variable itself, c5 and c6 are in groups that set one: read with raw_get
    assert sorted(common) == ["c1", "c3", "c4", "c7", "head01"]
    assert common["c4"] == {"ansible_host": "10.0.9.9", "gpucluster_plan_known_tiers": {"changed": False}}
    read: list[str] = []
    raw_get = HostVars.raw_get
    monkeypatch.setattr(HostVars, "raw_get", lambda self, host: read.append(host) or raw_get(self, host))
    scope.raw_variables(hostvars, ["localhost", "head01", "c1", "c2", "c3", "c4", "c5", "c6", "c7"], "localhost")
    # the controller, the three with variables of their own, one host per set of names a host sets itself
    assert read == ["localhost", "head01", "c1", "c2", "c5", "c6"]


def test_a_host_vars_file_with_a_checked_name_reads_every_host(tmp_path: Path) -> None:
    hostvars = _inventory(tmp_path, host_file={"gpucluster_node": {"gpus": 1}})
    assert ansible_compat.hosts_of_group_all(hostvars, ["c1", "c3"], scope.checked_name) == {}


def test_hostvars_without_an_inventory_are_read_host_by_host() -> None:
    class Raw:
        def raw_get(self, host: str) -> dict[str, Any]:
            return {"gpucluster_node": host}

    assert scope.raw_variables(Raw(), ["localhost", "a"], "localhost") == {
        "localhost": {"gpucluster_node": "localhost"},
        "a": {"gpucluster_node": "a"},
    }


def test_the_command_lines_values_win(tmp_path: Path) -> None:
    hostvars = _inventory(tmp_path)
    manager = hostvars._variable_manager
    manager._extra_vars = {"ansible_host": "10.1.1.1", "gpucluster_node": {"gpus": 6}}
    hosts = ["localhost", "head01", "c1", "c3", "c4"]
    got = scope.raw_variables(hostvars, hosts, "localhost", frozenset(manager._extra_vars))
    for host in hosts:
        assert _checked(got[host]) == _checked(hostvars.raw_get(host)), host
