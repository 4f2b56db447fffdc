"""host_state (plugins/module_utils/host_state.py): one systemctl show, one command per change."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils.host_state import (
    HostStateError,
    Wanted,
    WantedPath,
    missing_packages,
    parse_show,
    sync,
    sync_paths,
)


@dataclass
class FakeUnit:
    file_state: str = "disabled"
    active: str = "inactive"
    load: str = "loaded"
    need_reload: bool = False


@dataclass
class FakeSystemd:
    """systemctl over a dict of units; records every command line."""

    units: dict[str, FakeUnit]
    on_disk: dict[str, FakeUnit] = field(default_factory=dict)  # unit files systemd has not read yet
    calls: list[list[str]] = field(default_factory=list)
    fail: str | None = None

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        verb, names = argv[1], [a for a in argv[2:] if not a.startswith("-")]
        if verb == self.fail:
            return 1, "", f"Failed to {verb} unit"
        if verb == "show":
            blocks = []
            for name in names:
                u = self.units.get(name, FakeUnit(file_state="", load="not-found"))
                need = "yes" if u.need_reload else "no"
                blocks.append(
                    f"Id={name}\nLoadState={u.load}\nActiveState={u.active}\n"
                    f"UnitFileState={u.file_state}\nNeedDaemonReload={need}\n"
                )
            return 0, "\n".join(blocks), ""
        if verb == "daemon-reload":
            self.units.update(self.on_disk)
            self.on_disk.clear()
            for u in self.units.values():
                u.need_reload = False
            return 0, "", ""
        for name in names:
            u = self.units[name]
            if verb == "enable":
                if u.load == "masked":
                    return 1, "", f"Failed to enable unit: Unit file {name} is masked."
                u.file_state = "enabled"
            elif verb == "disable":
                u.file_state = "disabled"
            elif verb == "start":
                u.active = "active"
            elif verb == "stop":
                u.active = "inactive"
            elif verb == "mask":
                u.load, u.file_state = "masked", "masked"
            elif verb == "unmask":
                u.load, u.file_state = "loaded", "disabled"
        return 0, "", ""

    @property
    def verbs(self) -> list[str]:
        return [c[1] for c in self.calls]


def test_units_as_wanted_cost_one_systemctl_show_and_no_change() -> None:
    fake = FakeSystemd({"chrony.service": FakeUnit("enabled", "active"), "munge.service": FakeUnit("static", "active")})
    out = sync([Wanted("chrony.service", True, "started"), Wanted("munge.service", True, "started")], fake, check=False)
    assert not out.changed and out.actions == {} and not out.daemon_reload
    assert fake.verbs == ["show"]


def test_every_kind_of_change_is_one_command_over_its_units_in_order() -> None:
    fake = FakeSystemd(
        {
            "a.service": FakeUnit(),
            "b.service": FakeUnit(),
            "c.service": FakeUnit("enabled", "active"),
            "d.service": FakeUnit("masked", "inactive", load="masked"),
        }
    )
    wanted = [
        Wanted("a.service", True, "started"),
        Wanted("b.service", True, "started"),
        Wanted("c.service", False, "stopped"),
        Wanted("d.service", masked=False, state="started"),
    ]
    out = sync(wanted, fake, check=False)
    assert out.actions == {
        "unmask": ["d.service"],
        "disable": ["c.service"],
        "stop": ["c.service"],
        "enable": ["a.service", "b.service"],
        "start": ["a.service", "b.service", "d.service"],
    }
    # off before on: a socket to stop goes before the service to start
    assert fake.verbs == ["show", "unmask", "disable", "stop", "enable", "start"]
    assert fake.calls[4] == ["systemctl", "enable", "--", "a.service", "b.service"]
    assert out.changed_units == ["d.service", "c.service", "a.service", "b.service"]
    assert out.before["a.service"] == {"enabled": "false", "state": "inactive", "masked": "false"}
    assert out.after["a.service"] == {"enabled": "true", "state": "active", "masked": "false"}
    again = sync(wanted, fake, check=False)
    assert not again.changed


def test_check_mode_reports_the_same_actions_and_changes_nothing() -> None:
    fake = FakeSystemd({"a.service": FakeUnit()})
    out = sync([Wanted("a.service", True, "started")], fake, check=True)
    assert out.actions == {"enable": ["a.service"], "start": ["a.service"]}
    assert fake.verbs == ["show"] and fake.units["a.service"] == FakeUnit()


def test_an_outdated_or_new_unit_file_reloads_systemd_first() -> None:
    fake = FakeSystemd({"old.service": FakeUnit("enabled", "active", need_reload=True)})
    fake.on_disk["new.service"] = FakeUnit()
    out = sync([Wanted("old.service", True, "started"), Wanted("new.service", True, "started")], fake, check=False)
    assert out.daemon_reload and fake.verbs[:3] == ["show", "daemon-reload", "show"]
    assert out.actions == {"enable": ["new.service"], "start": ["new.service"]}  # the reload alone is no change


def test_daemon_reload_forces_a_reload_that_is_no_change() -> None:
    fake = FakeSystemd({"t.timer": FakeUnit("enabled", "active")})
    out = sync([Wanted("t.timer", True, "started")], fake, check=False, daemon_reload=True)
    assert out.daemon_reload and not out.changed and fake.verbs == ["show", "daemon-reload", "show"]
    checked = FakeSystemd({"t.timer": FakeUnit("enabled", "active")})
    assert sync([Wanted("t.timer", True)], checked, check=True, daemon_reload=True).daemon_reload
    assert checked.verbs == ["show"]


def test_a_missing_unit_is_an_error_naming_it_but_not_in_check_mode() -> None:
    with pytest.raises(HostStateError, match=r"nope.service: no such unit"):
        sync([Wanted("nope.service", True)], FakeSystemd({}), check=False)
    # check mode before the first run: the unit file is not written yet
    out = sync([Wanted("nope.service", True, "started")], FakeSystemd({}), check=True)
    assert out.actions == {"enable": ["nope.service"], "start": ["nope.service"]}


def test_a_missing_unit_that_only_has_to_be_off_is_no_error() -> None:
    out = sync([Wanted("gone.service", False, "stopped")], FakeSystemd({}), check=False)
    assert not out.changed


def test_a_failing_systemctl_names_the_command_and_its_message() -> None:
    fake = FakeSystemd({"a.service": FakeUnit()}, fail="start")
    with pytest.raises(HostStateError, match=r"systemctl start -- a.service failed \(rc 1\): Failed to start unit"):
        sync([Wanted("a.service", state="started")], fake, check=False)


def test_enabling_a_masked_unit_fails_as_systemctl_does() -> None:
    fake = FakeSystemd({"m.service": FakeUnit("masked", load="masked")})
    with pytest.raises(HostStateError, match="is masked"):
        sync([Wanted("m.service", enabled=True)], fake, check=False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, "bad unit name"),
        ({"name": "--now"}, "bad unit name"),
        ({"name": "a", "state": "restarted"}, "state 'restarted' is not one of started, stopped"),
        ({"name": "a", "masked": True, "enabled": True}, "a masked unit cannot be enabled or started"),
    ],
)
def test_bad_wanted_units_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(HostStateError, match=message):
        Wanted(**kwargs)


def test_a_unit_named_twice_is_refused() -> None:
    with pytest.raises(HostStateError, match=r"a\.service named more than once"):
        sync([Wanted("a.service", True), Wanted("a.service", False)], FakeSystemd({}), check=False)


def test_parse_show_needs_one_block_per_unit() -> None:
    assert parse_show("LoadState=loaded\nActiveState=active\n\nLoadState=masked\n", 2)[1].masked
    with pytest.raises(HostStateError, match="1 blocks for 2 units"):
        parse_show("LoadState=loaded\n", 2)


UNIT_STATES = st.builds(
    FakeUnit,
    file_state=st.sampled_from(["enabled", "disabled", "static", "alias", "indirect", "masked"]),
    active=st.sampled_from(["active", "inactive", "failed", "activating"]),
)
WANTS = st.fixed_dictionaries(
    {
        "enabled": st.sampled_from([None, True, False]),
        "state": st.sampled_from([None, "started", "stopped"]),
        "masked": st.sampled_from([None, False]),
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(UNIT_STATES, WANTS), min_size=1, max_size=6))
def test_check_mode_predicts_the_run_and_a_second_run_changes_nothing(pairs: list) -> None:
    def fresh() -> FakeSystemd:
        units = {}
        for i, (u, _) in enumerate(pairs):
            load = "masked" if u.file_state == "masked" else "loaded"
            units[f"u{i}.service"] = FakeUnit(u.file_state, u.active, load)
        return FakeSystemd(units)

    wanted = []
    for i, (u, want) in enumerate(pairs):
        # enabling a masked unit without unmasking it fails in systemctl (tested above)
        masked = False if u.file_state == "masked" and want["enabled"] else want["masked"]
        wanted.append(Wanted(f"u{i}.service", want["enabled"], want["state"], masked))
    checked = fresh()
    predicted = sync(wanted, checked, check=True)
    assert checked.verbs == ["show"]
    fake = fresh()
    done = sync(wanted, fake, check=False)
    assert done.actions == predicted.actions
    assert fake.verbs == ["show", *done.actions]  # one command per kind of change
    assert not sync(wanted, fake, check=False).changed


# ---- packages ----------------------------------------------------------------------------------


def dpkg(installed: dict[str, str]):
    """dpkg-query --show over ``installed`` {name: version}; rc 1 when a name is unknown."""
    calls: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str, str]:
        calls.append(argv)
        names = argv[argv.index("--") + 1 :]
        out = "".join(f"{n} ii {installed[n]}\n" for n in names if n in installed)
        err = "".join(f"dpkg-query: no packages found matching {n}\n" for n in names if n not in installed)
        return (1 if err else 0), out, err

    run.calls = calls  # type: ignore[attr-defined]
    return run


def test_missing_packages_are_named_in_order_with_one_dpkg_query() -> None:
    run = dpkg({"chrony": "4.3-2", "munge": "0.5.15-2"})
    assert missing_packages(["munge", "nftables", "chrony", "slurmd"], run) == ["nftables", "slurmd"]
    assert len(run.calls) == 1
    assert missing_packages([], run) == [] and len(run.calls) == 1


def test_a_pinned_package_counts_only_at_its_version() -> None:
    run = dpkg({"datacenter-gpu-manager": "1:3.3.9", "chrony": "4.3-2"})
    assert missing_packages(["datacenter-gpu-manager=1:3.3.8", "chrony=4.3-2", "chrony:amd64"], run) == [
        "datacenter-gpu-manager=1:3.3.8"
    ]


def test_a_failing_dpkg_query_or_a_bad_name_is_an_error() -> None:
    with pytest.raises(HostStateError, match=r"dpkg-query failed \(rc 2\): broken"):
        missing_packages(["a"], lambda argv: (2, "", "broken"))
    with pytest.raises(HostStateError, match="bad package name"):
        missing_packages(["--force"], dpkg({}))


# ---- paths ---------------------------------------------------------------------------------------

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def test_folders_are_made_with_their_mode_fixed_and_then_left_alone(tmp_path: Path) -> None:
    new, loose = tmp_path / "a" / "b", tmp_path / "loose"
    loose.mkdir(mode=0o777)
    os.chmod(loose, 0o777)
    wanted = [
        WantedPath(str(new), owner=ME, group=MY_GROUP, mode=0o750),
        WantedPath(str(loose), owner=ME, group=MY_GROUP),
    ]
    assert sync_paths(wanted, check=True) == [str(new), str(loose)] and not new.exists()
    assert sync_paths(wanted, check=False) == [str(new), str(loose)]
    assert stat.S_IMODE(new.stat().st_mode) == 0o750 and stat.S_IMODE(loose.stat().st_mode) == 0o755
    assert sync_paths(wanted, check=False) == []


def test_absent_paths_are_removed_files_links_and_trees(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "l").symlink_to(tmp_path / "d")
    wanted = [WantedPath(str(tmp_path / n), state="absent") for n in ("f", "d", "l", "never")]
    assert sync_paths(wanted, check=True) == [str(tmp_path / n) for n in ("f", "d", "l")]
    assert (tmp_path / "f").exists()
    assert sync_paths(wanted, check=False) == [str(tmp_path / n) for n in ("f", "d", "l")]
    assert list(tmp_path.iterdir()) == []
    assert sync_paths(wanted, check=False) == []


def test_a_file_where_a_folder_is_planned_or_an_unknown_owner_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(HostStateError, match="exists and is not a folder"):
        sync_paths([WantedPath(str(tmp_path / "f"), owner=ME, group=MY_GROUP)], check=False)
    with pytest.raises(HostStateError, match="no such owner or group"):
        sync_paths([WantedPath(str(tmp_path / "g"), owner="no-such-user-here")], check=False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"path": "relative/x"}, "not an absolute path"),
        ({"path": "/"}, "not an absolute path below /"),
        ({"path": "/x", "state": "file"}, "state 'file' is not one of directory, absent"),
    ],
)
def test_bad_paths_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(HostStateError, match=message):
        WantedPath(**kwargs)


def test_the_host_name_differs_when_the_running_or_the_permanent_one_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    from ansible_collections.gpucluster.tiers.plugins.module_utils.host_state import host_name

    etc = tmp_path / "hostname"
    monkeypatch.setattr(socket, "gethostname", lambda: "compute01")
    assert host_name("compute01", str(etc)) == {"current": "compute01", "permanent": "", "differs": True}
    etc.write_text("compute01\n")
    assert host_name("compute01", str(etc))["differs"] is False
    assert host_name("compute02", str(etc))["differs"] is True
    monkeypatch.setattr(socket, "gethostname", lambda: "localhost")
    assert host_name("compute01", str(etc)) == {"current": "localhost", "permanent": "compute01", "differs": True}
