"""host_files action (plugins/action/host_files.py): render on the controller, ONE module call per host."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpucluster.tiers.plugins.action import host_files
from ansible_collections.gpucluster.tiers.plugins.action.host_files import ActionModule, changed_entries, module_files

CHRONY = {
    "role": "common",
    "src": "chrony.conf.j2",
    "dest": "/etc/chrony/chrony.conf",
    "mode": "0644",
    "notify": ["Restart chrony"],
}
NFT = {
    "role": "common",
    "src": "nftables-gpucluster.nft.j2",
    "dest": "/etc/gpucluster/nftables.nft",
    "mode": "0644",
    "mkdir": True,
    "validate": "nft --check --file %s",
}
UNIT = {
    "role": "common",
    "src": "network.j2",
    "dest": "/etc/gpucluster/network/10-mgmt.network",
    "mode": "0644",
    "task": "own",
}


def test_the_module_gets_content_mode_validate_and_mkdir_only() -> None:
    sent = module_files([CHRONY, NFT], ["server head01\n", "table inet x {}\n"])
    assert sent == [
        {"dest": "/etc/chrony/chrony.conf", "content": "server head01\n", "mode": "0644"},
        {
            "dest": "/etc/gpucluster/nftables.nft",
            "content": "table inet x {}\n",
            "mode": "0644",
            "validate": "nft --check --file %s",
            "mkdir": True,
        },
    ]


def test_dest_dir_moves_a_unit_into_another_folder_by_its_base_name() -> None:
    sent = module_files([UNIT], ["[Match]\n"], dest_dir="/etc/systemd/network")
    assert sent[0]["dest"] == "/etc/systemd/network/10-mgmt.network"
    assert changed_entries([UNIT], sent, ["/etc/systemd/network/10-mgmt.network"]) == [
        {**UNIT, "dest": "/etc/systemd/network/10-mgmt.network"}
    ]


def test_an_entry_without_mode_is_refused_naming_it() -> None:
    with pytest.raises(AnsibleActionFail, match="/etc/x has no mode"):
        module_files([{"role": "r", "src": "x.j2", "dest": "/etc/x"}], ["x"])


def test_changed_entries_keep_manifest_order_and_handlers() -> None:
    sent = module_files([CHRONY, NFT], ["a", "b"])
    assert changed_entries([CHRONY, NFT], sent, ["/etc/gpucluster/nftables.nft", "/etc/chrony/chrony.conf"]) == [
        CHRONY,
        NFT,
    ]
    assert changed_entries([CHRONY, NFT], sent, []) == []


def _action(monkeypatch: pytest.MonkeyPatch, args: dict[str, Any], reply: dict[str, Any]) -> tuple[ActionModule, list]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(host_files, "render", lambda action, task_vars, item, source: f"{source}\n")
    action = object.__new__(ActionModule)
    action._task = SimpleNamespace(args=args, check_mode=False, _role=SimpleNamespace(_role_path="/c/roles/common"))

    def execute(module_name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        calls.append({"name": module_name, "args": module_args})
        return {**reply, "invocation": {"module_args": module_args}}

    action._execute_module = execute  # type: ignore[method-assign]
    return action, calls


def test_one_module_call_for_all_the_files_and_the_changed_entries_back(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = {"changed": True, "changed_paths": ["/etc/chrony/chrony.conf"], "folders": [], "files": 2}
    action, calls = _action(monkeypatch, {"files": [CHRONY, NFT]}, reply)
    result = action.run(task_vars={})
    assert len(calls) == 1 and calls[0]["name"] == "gpucluster.tiers.host_files"
    assert [f["content"] for f in calls[0]["args"]["files"]] == [
        "/c/roles/common/templates/chrony.conf.j2\n",  # the calling role's parent folder holds the roles
        "/c/roles/common/templates/nftables-gpucluster.nft.j2\n",
    ]
    assert result["changed"] and result["changed_files"] == [CHRONY]
    assert "invocation" not in result  # the rendered content is not echoed back


def test_nothing_changed_gives_no_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    action, _ = _action(monkeypatch, {"files": [CHRONY]}, {"changed": False, "changed_paths": [], "folders": []})
    assert action.run(task_vars={})["changed_files"] == []


def test_a_failed_module_call_is_returned_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = {"failed": True, "msg": "/etc/gpucluster/nftables.nft: failed to validate"}
    action, _ = _action(monkeypatch, {"files": [NFT]}, reply)
    result = action.run(task_vars={})
    assert result["failed"] and "changed_files" not in result


def test_an_entry_that_is_not_a_manifest_entry_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    action, calls = _action(monkeypatch, {"files": [{"dest": "/etc/x"}]}, {})
    with pytest.raises(AnsibleActionFail, match="role, src and dest"):
        action.run(task_vars={})
    assert calls == []


HOSTS = {"role": "common", "src": "hosts.j2", "dest": "/etc/hosts", "mode": "0644", "unsafe_writes": True}
HEALTH = {
    "role": "compute",
    "src": "gpucluster-healthcheck",
    "dest": "/usr/local/sbin/gpucluster-healthcheck",
    "mode": "0755",
    "static": True,
}


def test_unsafe_writes_reaches_the_module_and_copy_stays_on_the_controller() -> None:
    sent = module_files([HOSTS, HEALTH], ["127.0.0.1 localhost\n", "#!/usr/bin/env python3\n"])
    assert sent == [
        {"dest": "/etc/hosts", "content": "127.0.0.1 localhost\n", "mode": "0644", "unsafe_writes": True},
        {"dest": "/usr/local/sbin/gpucluster-healthcheck", "content": "#!/usr/bin/env python3\n", "mode": "0755"},
    ]


def test_a_copied_entry_is_read_from_the_roles_files_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = {"changed": False, "changed_paths": [], "folders": []}
    action, calls = _action(monkeypatch, {"files": [HOSTS, HEALTH]}, reply)
    action.run(task_vars={})
    assert [f["content"] for f in calls[0]["args"]["files"]] == [
        "/c/roles/common/templates/hosts.j2\n",
        "/c/roles/compute/files/gpucluster-healthcheck\n",  # static: files/, not templates/
    ]
