"""host_state (plugins/modules/host_state.py): one module call for a role's packages, folders and units.

systemctl and dpkg-query are fakes (tests/unit/plugins/module_utils/test_host_state.py); folders in tmp_path.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpucluster.tiers.plugins.modules import host_state
from ansible_collections.gpucluster.tiers.tests.unit.plugins.module_utils.test_host_state import (
    FakeSystemd,
    FakeUnit,
)

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> FakeSystemd:
    fake = FakeSystemd({"chrony.service": FakeUnit("enabled", "active"), "munge.service": FakeUnit()})
    installed = {"chrony", "munge"}

    def run_command(self: AnsibleModule, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        if argv[0] == "dpkg-query":
            names = argv[argv.index("--") + 1 :]
            out = "".join(f"{n} ii 1.0\n" for n in names if n in installed)
            return (0 if len(out.splitlines()) == len(names) else 1), out, ""
        return fake(["systemctl", *argv[1:]])

    monkeypatch.setattr(AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(AnsibleModule, "get_bin_path", lambda self, name, required=False: name)
    return fake


def run_module(capsys: pytest.CaptureFixture[str], **args: Any) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        host_state.main()
    return json.loads(capsys.readouterr().out)


def test_one_call_checks_packages_makes_folders_and_starts_units(
    host: FakeSystemd, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = {
        "packages": ["chrony", "munge", "nftables"],
        "paths": [{"path": str(tmp_path / "pending"), "owner": ME, "group": MY_GROUP}],
        "services": [
            {"name": "chrony.service", "enabled": True, "state": "started"},
            {"name": "munge.service", "enabled": True, "state": "started"},
        ],
    }
    out = run_module(capsys, _ansible_diff=True, **args)
    assert out["changed"] is True and out["missing_packages"] == ["nftables"]
    assert out["changed_paths"] == [str(tmp_path / "pending")] and (tmp_path / "pending").is_dir()
    assert out["actions"] == {"enable": ["munge.service"], "start": ["munge.service"]}
    assert out["changed_units"] == ["munge.service"]
    assert json.loads(out["diff"]["after"])["munge.service"]["state"] == "active"
    again = run_module(capsys, **args)  # nothing left to do: one systemctl show, no change
    assert again["changed"] is False and again["actions"] == {} and host.verbs[-1] == "show"


def test_check_mode_reports_and_changes_nothing(
    host: FakeSystemd, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_module(
        capsys,
        _ansible_check_mode=True,
        paths=[{"path": str(tmp_path / "new"), "owner": ME, "group": MY_GROUP}],
        services=[{"name": "munge.service", "enabled": True, "state": "started"}],
    )
    assert out["changed"] is True and out["changed_units"] == ["munge.service"]
    assert not (tmp_path / "new").exists() and host.verbs == ["show"]


def test_a_bad_mode_or_a_failing_unit_fails_naming_it(
    host: FakeSystemd, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_module(capsys, paths=[{"path": str(tmp_path / "x"), "mode": "rwx"}])
    assert out["failed"] is True and "mode 'rwx' is not an octal mode like 0755" in out["msg"]
    host.fail = "start"
    out = run_module(capsys, services=[{"name": "munge.service", "state": "started"}])
    assert out["failed"] is True and "systemctl start -- munge.service failed" in out["msg"]


def test_exists_and_the_host_name_are_read_in_the_same_call(
    host: FakeSystemd, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads a role did with a stat and a hostname call of their own: no change, one call."""
    import socket

    there, link = tmp_path / "nvidia-smi", tmp_path / "broken"
    there.write_text("")
    link.symlink_to(tmp_path / "nowhere")
    monkeypatch.setattr(socket, "gethostname", lambda: "compute01")
    result = run_module(capsys, exists=[str(there), str(link), str(tmp_path / "absent")], hostname="compute01")
    assert result["exists"] == {str(there): True, str(link): True, str(tmp_path / "absent"): False}
    assert result["hostname"]["current"] == "compute01" and not result["changed"]
    assert result["hostname"]["differs"] is (result["hostname"]["permanent"] != "compute01")
    assert "hostname" not in run_module(capsys)  # only when asked
