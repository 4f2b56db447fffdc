"""Host side of gpucluster.tiers.host_state: a role's packages, folders and units in one call.

Packages (``missing_packages``): one ``dpkg-query`` says which of the role's packages are not
installed; nothing is installed here (the role's apt task runs only when some are missing).

Paths (``sync_paths``): folders created with their owner, group and mode (parents as
ansible.builtin.file creates them), or paths removed, only where they differ.

Reads a role would otherwise ask of the host with a module call of their own: whether paths exist
(``existing``, as ansible.builtin.stat's ``exists``) and the host name (``host_name``: the running
one and /etc/hostname's, as ansible.builtin.hostname compares them).

Units (``sync``):
One ``systemctl show`` reads the state of every unit the role names (load state, active state,
unit file state, whether systemd holds an outdated copy of its unit file); one ``systemctl``
command per kind of change (daemon-reload, unmask, mask, enable, disable, start, stop) then acts
on the units that differ, all of them at once. Nothing runs when every unit is as wanted: an
idempotent run costs one ``systemctl show``. The states are those of
ansible.builtin.systemd_service: ``enabled`` as ``systemctl is-enabled`` answers it (exit 0, an
alias or an indirect unit alone counts as disabled), ``started`` when the unit is active,
activating or reloading. No controller import: this runs on the host.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import socket
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: Run a systemctl command line (argv): (rc, stdout, stderr).
Runner = Callable[[list[str]], tuple[int, str, str]]

#: The properties read for every unit (``systemctl show --property=...``), in this order.
PROPERTIES = ("Id", "LoadState", "ActiveState", "UnitFileState", "NeedDaemonReload")

#: Unit file states ``systemctl is-enabled`` exits 0 for, except alias and indirect, which
#: ansible.builtin.systemd_service counts as disabled (systemctl(1), "is-enabled").
ENABLED_STATES = frozenset({"enabled", "enabled-runtime", "static", "generated", "transient"})

#: Active states ansible.builtin.systemd_service counts as running (no start needed).
RUNNING_STATES = frozenset({"active", "activating", "reloading"})

STATES = ("started", "stopped")


class HostStateError(Exception):
    """A unit could not be read or changed: which and why (the module fails with this text)."""


@dataclass(frozen=True)
class Wanted:
    """One unit as the role wants it; None leaves that aspect alone."""

    name: str
    enabled: bool | None = None
    state: str | None = None
    masked: bool | None = None

    def __post_init__(self) -> None:
        if not self.name or self.name.startswith("-"):
            raise HostStateError(f"services: bad unit name {self.name!r}")
        if self.state is not None and self.state not in STATES:
            raise HostStateError(f"{self.name}: state {self.state!r} is not one of {', '.join(STATES)}")
        if self.masked and (self.enabled or self.state == "started"):
            raise HostStateError(f"{self.name}: a masked unit cannot be enabled or started")


@dataclass(frozen=True)
class Unit:
    """What systemd says about one unit."""

    load: str
    active: str
    file_state: str
    need_reload: bool

    @property
    def enabled(self) -> bool:
        return self.file_state in ENABLED_STATES

    @property
    def running(self) -> bool:
        return self.active in RUNNING_STATES

    @property
    def masked(self) -> bool:
        return self.load == "masked" or self.file_state.startswith("masked")


@dataclass
class Outcome:
    """What was done (or would be, in check mode): ``actions`` maps a systemctl verb to its units."""

    actions: dict[str, list[str]] = field(default_factory=dict)
    daemon_reload: bool = False
    before: dict[str, dict[str, str]] = field(default_factory=dict)
    after: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return any(self.actions.values())

    @property
    def changed_units(self) -> list[str]:
        return list(dict.fromkeys(u for units in self.actions.values() for u in units))


def parse_show(text: str, count: int) -> list[Unit]:
    """``systemctl show`` of ``count`` units: one block of KEY=value lines per unit, in order."""
    blocks: list[dict[str, str]] = []
    for chunk in text.strip("\n").split("\n\n"):
        props: dict[str, str] = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                props[key] = value
        blocks.append(props)
    if len(blocks) != count:
        raise HostStateError(f"systemctl show answered {len(blocks)} blocks for {count} units")
    return [
        Unit(
            load=b.get("LoadState", ""),
            active=b.get("ActiveState", ""),
            file_state=b.get("UnitFileState", ""),
            need_reload=b.get("NeedDaemonReload", "no") == "yes",
        )
        for b in blocks
    ]


def _run(run: Runner, argv: list[str]) -> str:
    rc, out, err = run(argv)
    if rc != 0:
        raise HostStateError(f"{' '.join(argv)} failed (rc {rc}): {(err or out).strip()}")
    return out


def _show(run: Runner, systemctl: str, names: Sequence[str]) -> list[Unit]:
    out = _run(run, [systemctl, "show", f"--property={','.join(PROPERTIES)}", "--", *names])
    return parse_show(out, len(names))


def _view(unit: Unit) -> dict[str, str]:
    return {"enabled": str(unit.enabled).lower(), "state": unit.active, "masked": str(unit.masked).lower()}


def plan_actions(wanted: Sequence[Wanted], units: Sequence[Unit]) -> dict[str, list[str]]:
    """The systemctl verbs to run and their units, in the order they must run."""
    # off before on: a unit to stop or disable (a socket that would activate a service) goes first
    actions: dict[str, list[str]] = {"unmask": [], "mask": [], "disable": [], "stop": [], "enable": [], "start": []}
    for want, unit in zip(wanted, units, strict=True):
        masked = unit.masked
        if want.masked is False and masked:
            actions["unmask"].append(want.name)
            masked = False
        elif want.masked is True and not masked:
            actions["mask"].append(want.name)
            masked = True
        if want.enabled is True and not unit.enabled:
            actions["enable"].append(want.name)
        elif want.enabled is False and unit.enabled:
            actions["disable"].append(want.name)
        if want.state == "started" and not unit.running:
            actions["start"].append(want.name)
        elif want.state == "stopped" and unit.running:
            actions["stop"].append(want.name)
    return {verb: names for verb, names in actions.items() if names}


def sync(
    wanted: Sequence[Wanted], run: Runner, check: bool, systemctl: str = "systemctl", daemon_reload: bool = False
) -> Outcome:
    """Bring ``wanted`` units to their state with one systemctl command per kind of change.

    ``daemon_reload`` reloads systemd even when no named unit needs it (a unit file the role changed
    that none of ``wanted`` names, e.g. the service a timer starts).
    """
    out = Outcome(daemon_reload=daemon_reload)
    if not wanted:
        return out
    names = [w.name for w in wanted]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise HostStateError(f"services: {', '.join(twice)} named more than once")
    units = _show(run, systemctl, names)
    for want, unit in zip(wanted, units, strict=True):
        if unit.load == "not-found" and (want.enabled or want.state == "started"):
            # a unit file written since systemd last read its folders: a daemon-reload may find it
            out.daemon_reload = True
    if any(u.need_reload for u in units):
        out.daemon_reload = True
    if out.daemon_reload and not check:
        _run(run, [systemctl, "daemon-reload"])
        units = _show(run, systemctl, names)
    for want, unit in zip(wanted, units, strict=True):
        if not check and unit.load == "not-found" and (want.enabled or want.state == "started"):
            raise HostStateError(f"{want.name}: no such unit (systemd: LoadState=not-found)")
    out.before = {w.name: _view(u) for w, u in zip(wanted, units, strict=True)}
    out.actions = plan_actions(wanted, units)
    if not check:
        for verb, targets in out.actions.items():
            _run(run, [systemctl, verb, "--", *targets])
    after = dict(out.before)
    for verb, targets in out.actions.items():
        for name in targets:
            view = dict(after[name])
            key, value = {
                "unmask": ("masked", "false"),
                "mask": ("masked", "true"),
                "enable": ("enabled", "true"),
                "disable": ("enabled", "false"),
                "start": ("state", "active"),
                "stop": ("state", "inactive"),
            }[verb]
            view[key] = value
            after[name] = view
    out.after = after
    return out


# ---- packages -------------------------------------------------------------------------------


def missing_packages(names: Sequence[str], run: Runner, dpkg_query: str = "dpkg-query") -> list[str]:
    """The packages of ``names`` dpkg does not hold as installed (``ii``), in the order given.

    A name may carry an apt version pin (``name=version``): it counts as installed only at that
    version. One dpkg-query for all of them (rc 1 with names it does not know: they are missing).
    """
    if not names:
        return []
    bare = [n.split("=", 1)[0] for n in names]
    if any(not b or b.startswith("-") for b in bare):
        raise HostStateError(f"packages: bad package name in {list(names)!r}")
    rc, out, err = run([dpkg_query, "--show", "--showformat=${Package} ${db:Status-Abbrev} ${Version}\n", "--", *bare])
    if rc not in (0, 1):
        raise HostStateError(f"dpkg-query failed (rc {rc}): {(err or out).strip()}")
    installed: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "ii":
            installed[parts[0]] = parts[2]
    missing = []
    for name, plain in zip(names, bare, strict=True):
        version = name.split("=", 1)[1] if "=" in name else None
        pkg = plain.split(":", 1)[0]  # dpkg-query prints the name without :arch
        if pkg not in installed or (version is not None and installed[pkg] != version):
            missing.append(name)
    return missing


# ---- paths ----------------------------------------------------------------------------------

PATH_STATES = ("directory", "absent")


@dataclass(frozen=True)
class WantedPath:
    """A folder with its owner, group and mode, or a path that must not exist."""

    path: str
    state: str = "directory"
    owner: str = "root"
    group: str = "root"
    mode: int = 0o755

    def __post_init__(self) -> None:
        if not os.path.isabs(self.path) or os.path.normpath(self.path) == "/":
            raise HostStateError(f"paths: {self.path!r} is not an absolute path below /")
        if self.state not in PATH_STATES:
            raise HostStateError(f"{self.path}: state {self.state!r} is not one of {', '.join(PATH_STATES)}")


def _ids(want: WantedPath) -> tuple[int, int]:
    try:
        return pwd.getpwnam(want.owner).pw_uid, grp.getgrnam(want.group).gr_gid
    except KeyError as err:
        raise HostStateError(f"{want.path}: no such owner or group: {err}") from None


def sync_paths(wanted: Sequence[WantedPath], check: bool) -> list[str]:
    """Create or fix the folders, remove the absent paths; the paths that changed, in order."""
    changed: list[str] = []
    for want in wanted:
        if want.state == "absent":
            if os.path.lexists(want.path):
                changed.append(want.path)
                if not check:
                    if os.path.isdir(want.path) and not os.path.islink(want.path):
                        shutil.rmtree(want.path)
                    else:
                        os.unlink(want.path)
            continue
        uid, gid = _ids(want)
        try:
            st = os.lstat(want.path)
        except FileNotFoundError:
            changed.append(want.path)
            if not check:
                os.makedirs(want.path, exist_ok=True)
                os.chmod(want.path, want.mode)
                os.chown(want.path, uid, gid)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise HostStateError(f"{want.path} exists and is not a folder")
        if stat.S_IMODE(st.st_mode) != want.mode or st.st_uid != uid or st.st_gid != gid:
            changed.append(want.path)
            if not check:
                os.chmod(want.path, want.mode)
                os.chown(want.path, uid, gid)
    return changed


def existing(paths: Sequence[str]) -> dict[str, bool]:
    """Whether each path exists; a link counts, even a broken one (ansible.builtin.stat's ``exists``
    without ``follow``)."""
    return {path: os.path.lexists(path) for path in paths}


def host_name(wanted: str, hostname_file: str = "/etc/hostname") -> dict[str, str | bool]:
    """The running host name and the permanent one (/etc/hostname, stripped; empty when absent), and
    whether either differs from ``wanted`` (ansible.builtin.hostname would then change it)."""
    try:
        with open(hostname_file, encoding="utf-8") as handle:
            permanent = handle.read().strip()
    except FileNotFoundError:
        permanent = ""
    current = socket.gethostname()
    return {"current": current, "permanent": permanent, "differs": current != wanted or permanent != wanted}


__all__ = [
    "ENABLED_STATES",
    "PATH_STATES",
    "PROPERTIES",
    "RUNNING_STATES",
    "HostStateError",
    "Outcome",
    "Runner",
    "Unit",
    "Wanted",
    "WantedPath",
    "existing",
    "host_name",
    "missing_packages",
    "parse_show",
    "plan_actions",
    "sync",
    "sync_paths",
]
