"""render_files (plugins/action/render_files.py): no destination outside the output root; copied entries."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpucluster.tiers.plugins.action.render_files import ActionModule, _inside, source_path


def test_a_relative_destination_lands_under_the_root(tmp_path: Path) -> None:
    assert _inside(str(tmp_path), "etc/nccl.conf") == os.path.join(os.path.realpath(tmp_path), "etc/nccl.conf")
    assert _inside(str(tmp_path), "/etc/hosts") == os.path.join(os.path.realpath(tmp_path), "etc/hosts")
    assert _inside(str(tmp_path), "etc/../etc/hosts").endswith("/etc/hosts")


@pytest.mark.parametrize(
    "dest",
    ["etc/systemd/network/10-x/../../../../../tmp/somewhere.network", "../outside", "/../../etc/passwd", ".", ""],
)
def test_a_destination_outside_the_root_is_refused(tmp_path: Path, dest: str) -> None:
    with pytest.raises(AnsibleActionFail, match="outside the output root"):
        _inside(str(tmp_path / "root"), dest)


def test_a_link_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "etc").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(AnsibleActionFail, match="outside the output root"):
        _inside(str(root), "etc/hosts")


def test_the_action_writes_nothing_for_a_traversing_netdev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan whose file name came from a netdev ``x/../../tmp/somewhere`` stops the task, nothing written."""
    templates = tmp_path / "roles" / "fabric" / "templates"
    templates.mkdir(parents=True)
    (templates / "unit.j2").write_text("x\n")
    root = tmp_path / "build" / "hosts" / "compute01"
    root.mkdir(parents=True)
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    action = object.__new__(ActionModule)
    item = {"role": "fabric", "src": "unit.j2", "dest": "/etc/systemd/network/x/../../../../../../somewhere.link"}
    args: dict[str, Any] = {"files": [item], "dest_root": str(root), "template_root": str(tmp_path / "roles")}
    action._task = SimpleNamespace(args=args, check_mode=False)
    with pytest.raises(AnsibleActionFail, match="outside the output root"):
        action.run(task_vars={})
    assert not (tmp_path / "somewhere.link").exists()
    assert not (tmp_path / "build" / "somewhere.link").exists()


def test_a_copied_entry_is_the_files_text_as_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """static: true (a program of files/): make plan writes its bytes untouched, Jinja-like text included."""
    from ansible.parsing.dataloader import DataLoader

    files = tmp_path / "roles" / "compute" / "files"
    files.mkdir(parents=True)
    text = '#!/usr/bin/env python3\nprint("{{ not a template }} {% raw %}")\n'
    (files / "gpucluster-healthcheck").write_text(text)
    root = tmp_path / "build"
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    action = object.__new__(ActionModule)
    item = {"role": "compute", "src": "gpucluster-healthcheck", "dest": "/usr/local/sbin/gpucluster-healthcheck"}
    args: dict[str, Any] = {
        "files": [{**item, "static": True}],
        "dest_root": str(root),
        "template_root": str(tmp_path / "roles"),
    }
    action._task = SimpleNamespace(args=args, check_mode=False)
    action._loader = DataLoader()
    result = action.run(task_vars={})
    assert (root / "usr/local/sbin/gpucluster-healthcheck").read_text() == text and result["rendered"] == 1
    assert source_path("/r", item) == "/r/compute/templates/gpucluster-healthcheck"  # without static: a template
