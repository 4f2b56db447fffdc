"""Slurm controller high availability: the controllers, in order, and where their state lives.

A site lists backup controllers in group ``slurm_backup``; the head stays the primary (it also runs
slurmdbd, Prometheus and the converge lock). slurm.conf then names every controller, primary first
(``SlurmctldHost`` once per controller: "the first entry will run as the primary and all other
entries as backups"), and ``StateSaveLocation`` must be "readable and writable from both the primary
and backup controllers" (slurm.conf(5), docs/sources.md [SL20]): a shared file system, never a
controller's own disk. The inventory names it (``gpucluster_slurm.state_save_location`` and the mount
of the site's shared storage there, ``gpucluster_slurm.state_save_mount``); the slurm role mounts it
on every controller before slurmctld starts. A backup takes control when the primary has not
answered for ``SlurmctldTimeout`` seconds (default 120, slurm.conf(5) [SL20]); the primary takes
control back when it starts again. Without a backup nothing changes: the state stays in
/var/lib/slurm/slurmctld on the head. No I/O; pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.model import (
    ControllerRow,
    Ha,
    PrimaryOn,
    StateMountRow,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.nfs import systemd_mount_unit_name

#: every host's addresses by network, as ``{"hosts": {name: {network: address}}}``
Addresses = Mapping[str, Mapping[str, Mapping[str, object]]]

FIELD = "gpucluster_slurm"
#: The single controller's state folder (unchanged from the collection's first release).
LOCAL_STATE = "/var/lib/slurm/slurmctld"
#: slurm.conf(5) SlurmctldTimeout: "The default value is 120 seconds" (docs/sources.md [SL20]).
DEFAULT_TIMEOUT_S = 120
#: slurm.conf(5) SlurmctldTimeout: "May not exceed 65533" (docs/sources.md [SL20]).
MAX_TIMEOUT_S = 65533
MOUNT_TYPES = ("nfs", "nfs4", "lustre")
#: Hard NFS mounts: a filer failover stalls slurmctld's writes instead of losing its state (nfs(5)).
DEFAULT_OPTIONS = {
    "nfs": "rw,hard,proto=tcp,vers=4.2",
    "nfs4": "rw,hard,proto=tcp,vers=4.2",
    "lustre": "defaults,_netdev,flock",
}
#: The controllers' takeover hook (slurm.conf SlurmctldPrimaryOnProg); its settings: roles/slurm/vars/files.yml.
PRIMARY_ON_PROGRAM = "/usr/local/sbin/gpucluster-slurmctld-primary-on"
#: SlurmctldPrimaryOffProg: a shell wrapper (roles/slurm/templates) that runs the hook's off mode only on a
#: backup that had control.
PRIMARY_OFF_PROGRAM = "/usr/local/sbin/gpucluster-slurmctld-primary-off"
#: Where the hook notes a backup's control and asks for its restart (owned by SlurmUser).
HOOK_STATE_DIR = "/var/lib/gpucluster/slurmctld"
#: The root path unit that restarts a backup's slurmctld once it has handed control back.
STANDBY_RESTART_UNIT = "gpucluster-slurmctld-standby"
#: The hook's drain reason: not the health check's "gpucluster: " prefix, so neither resumes the other's drains.
PRIMARY_ON_REASON = "slurmctld-takeover: slurmd not registered yet"
#: Seconds for slurmctld's registration agent (it starts about 5 s after the controller does) and slow hosts.
REGISTRATION_MARGIN_S = 30
#: How often the hook asks whether its controller is in control yet: a user's job submitted the moment
#: a controller answers must find the unregistered GPU nodes drained already (a scontrol ping is cheap).
ANSWER_POLL_S = 0.1
_PATH = re.compile(r"^/[A-Za-z0-9._/-]*\Z")
_WHAT = re.compile(r"^[A-Za-z0-9.@_-]+(,[A-Za-z0-9.@_-]+)*:/[A-Za-z0-9._/-]*\Z")
_OPTIONS = re.compile(r"^[A-Za-z0-9_.=,:/-]+\Z")


@dataclass(frozen=True)
class Controller:
    """One slurmctld host: its name, its management address, primary or backup."""

    name: str
    address: str
    role: str  # primary | backup


@dataclass(frozen=True)
class StateMount:
    """The shared storage mounted at StateSaveLocation on every controller, as a systemd mount unit."""

    what: str
    where: str
    type: str
    options: str

    @property
    def unit_name(self) -> str:
        return systemd_mount_unit_name(self.where)

    def unit_text(self) -> str:
        return (
            "# Planned by gpucluster.tiers: Slurm's StateSaveLocation on shared storage (every controller).\n"
            "[Unit]\n"
            f"Description=Slurm controller state {self.where} from {self.what}\n"
            "Wants=network-online.target\n"
            "After=network-online.target\n"
            "Before=slurmctld.service\n"
            "\n"
            "[Mount]\n"
            f"What={self.what}\n"
            f"Where={self.where}\n"
            f"Type={self.type}\n"
            f"Options={self.options}\n"
            "TimeoutSec=90\n"
            "\n"
            "[Install]\n"
            "WantedBy=remote-fs.target\n"
        )

    def as_dict(self) -> StateMountRow:
        return {
            "what": self.what,
            "where": self.where,
            "type": self.type,
            "options": self.options,
            "unit_name": self.unit_name,
            "unit_path": f"/etc/systemd/system/{self.unit_name}",
        }


def state_mount_unit_text(mount: Mapping[str, object]) -> str:
    """The systemd mount unit of the plan's ``slurm.ha.state_save_mount`` (what, where, type, options):
    rendered on the way to the controllers (filter gpucluster.tiers.slurm_state_mount_unit), not stored."""
    return StateMount(str(mount["what"]), str(mount["where"]), str(mount["type"]), str(mount["options"])).unit_text()


def controllers(primary: str, backups: list[str], addresses: Addresses) -> list[Controller]:
    """Every controller in SlurmctldHost order: the head first, then the backups by name."""
    names = [primary, *sorted(backups)]
    return [
        Controller(name, str(addresses["hosts"][name]["management"]), "primary" if i == 0 else "backup")
        for i, name in enumerate(names)
    ]


def _path(value: object, field: str) -> str:
    if not (isinstance(value, str) and bool(_PATH.match(value)) and ".." not in value.split("/") and value != "/"):
        raise PlanError(
            field, value, "an absolute path of letters, digits, '.', '_', '-' and '/' (not '/' itself, no '..')"
        )
    return value.rstrip("/")


def state_mount(raw: object, where: str, field: str = f"{FIELD}.state_save_mount") -> StateMount:
    """The checked ``{what, type, options}`` of the shared state storage, mounted at ``where``."""
    if not isinstance(raw, dict):
        raise PlanError(field, raw, "a mapping {what, type, options}")
    unknown = sorted(set(raw) - {"what", "type", "options"})
    require(not unknown, f"{field}.{unknown[0] if unknown else ''}", unknown, "only the keys what, type, options")
    kind = check_choice(raw.get("type", "nfs"), f"{field}.type", MOUNT_TYPES)
    what = raw.get("what")
    if not (isinstance(what, str) and bool(_WHAT.match(what))):
        raise PlanError(
            f"{field}.what",
            what,
            "SERVER:/PATH of the shared storage (an NFS server and export, or a Lustre MGS NID and /fsname/subdir)",
        )
    options = raw.get("options", DEFAULT_OPTIONS[kind])
    if not (isinstance(options, str) and bool(_OPTIONS.match(options))):
        raise PlanError(
            f"{field}.options",
            options,
            "mount options separated by ',' (letters, digits, '=', '.', ':', '/', '_', '-')",
        )
    return StateMount(what=what, where=where, type=kind, options=options)


def ha_plan(
    section: object, *, primary: str, backups: list[str], addresses: Addresses, lab: Mapping[str, object]
) -> Ha:
    """The controllers, StateSaveLocation, its mount and SlurmctldTimeout.

    ``section``: ``gpucluster_slurm`` (or None); ``lab``: ``gpucluster_lab`` when enabled, whose
    ``slurmctld_timeout_s`` shortens the failover wait of the lab's test and whose ``slurmctld_kill_mode``
    goes into slurmctld's drop-in (docs/lab.md)."""
    section = section if isinstance(section, dict) else {}
    kill_mode = lab.get("slurmctld_kill_mode")
    location = section.get("state_save_location")
    mount = section.get("state_save_mount")
    if backups:
        need = f"when groups.slurm_backup lists a backup controller ({', '.join(sorted(backups))})"
        require(
            location is not None,
            f"{FIELD}.state_save_location",
            location,
            f"a path on shared storage {need}: every controller reads and writes the same state",
        )
        require(
            mount is not None,
            f"{FIELD}.state_save_mount",
            mount,
            f"the shared storage mounted there on every controller, {{what, type, options}}, {need}",
        )
    where = _path(location, f"{FIELD}.state_save_location") if location is not None else LOCAL_STATE
    state = state_mount(mount, where) if mount is not None else None
    timeout = lab.get("slurmctld_timeout_s", section.get("slurmctld_timeout_s", DEFAULT_TIMEOUT_S))
    timeout_field = (
        "gpucluster_lab.slurmctld_timeout_s" if "slurmctld_timeout_s" in lab else f"{FIELD}.slurmctld_timeout_s"
    )
    timeout = int(check_range(timeout, timeout_field, 5, MAX_TIMEOUT_S, integer=True))
    ctls = controllers(primary, backups, addresses)
    return {
        "primary_on": primary_on(timeout, [c.name for c in ctls]) if backups else None,
        "enabled": bool(backups),
        "controllers": [ControllerRow(name=c.name, address=c.address, role=c.role) for c in ctls],
        "backups": [c.name for c in ctls if c.role == "backup"],
        "state_save_location": where,
        "state_save_mount": state.as_dict() if state else None,
        "slurmctld_timeout_s": timeout,
        # the lab's KillMode for slurmctld's drop-in (gpucluster_lab.slurmctld_kill_mode; none on real hosts)
        "slurmctld_kill_mode": None if kill_mode is None else str(kill_mode),
    }


def primary_on(timeout_s: int, hosts: list[str]) -> PrimaryOn:
    """The takeover hook's settings: hold GPU nodes until their slurmd has registered with the new controller.

    Slurm 22.05 (seen in the lab, tier4): a controller that takes control recovers each node's GRES
    count from the saved state but its GRES types and device files only when the node's slurmd
    registers again (``scontrol show node`` says ``SlurmdStartTime=None`` until then). A GPU job
    scheduled in between gets untyped GPUs, its step is refused ("Invalid generic resource (gres)
    specification"), the job fails, and its GPUs stay allocated on the idle node. That window opens at
    every change of controller: after a takeover the new controller asks every node to register about
    MIN_CHECKIN_TIME (3 s) after it starts (src/slurmctld/ping_nodes.c, controller.c); after a hand-back
    a slurmd that last talked to the backup asks it first, hears "standby", sleeps SlurmctldTimeout/2
    and retries, for up to 1.5 x SlurmctldTimeout (src/common/slurm_protocol_api.c, docs/sources.md
    [SL20]). So every controller (``hosts``) runs the hook when it takes control: as soon as it is the
    one in control (``scontrol ping``, asked every ``answer_poll_s`` so that the drain comes before a
    user's first job), it drains the GPU nodes not registered yet with its own reason, resumes each one
    as it registers, gives up holding after ``hold_s`` (1.5 x SlurmctldTimeout + REGISTRATION_MARGIN_S:
    every slurmd has registered or stopped retrying), stops at once when another controller takes
    control (a backup whose primary is back: no hook keeps running into a hand-back), and then runs
    ``scontrol reconfigure`` if an idle node still holds GPUs (a reconfigure recomputes every node's
    allocations from the running jobs).

    The same script runs in its off mode for SlurmctldPrimaryOffProg (``off_program``, a shell wrapper
    that starts it only when ``standby_restart.in_control`` exists): a backup that drops back to
    standby after having had control restarts its slurmctld (``standby_restart``: a request file that
    a root path unit acts on). Anywhere else the wrapper exits at once: at the primary's stop slurmctld
    does not wait for SlurmctldPrimaryOffProg, and a Python start outlived it in the unit (in the lab,
    systemd then waited TimeoutStopSec, 90 s, on every stop of the primary).
    Slurm 22.05's main_sched_fini() joins the main scheduler thread but never
    clears thread_id_sched (src/slurmctld/job_scheduler.c), so in one slurmctld process a second
    takeover starts no main scheduler and its hand-back joins a stale thread handle: the lab's backup
    hung there ("REQUEST_CONTROL reply but backup not completely done relinquishing control", gdb: the
    main thread in sched_g_fini joining the purge thread). A fresh process per takeover never does."""
    return {
        "program": PRIMARY_ON_PROGRAM,
        "off_program": PRIMARY_OFF_PROGRAM,
        "config": {
            "hold_s": timeout_s * 3 // 2 + REGISTRATION_MARGIN_S,
            "poll_s": 2,
            "answer_poll_s": ANSWER_POLL_S,
            "reason": PRIMARY_ON_REASON,
            "hosts": hosts,
            "state_dir": HOOK_STATE_DIR,
        },
        "standby_restart": {
            "unit": STANDBY_RESTART_UNIT,
            "request": f"{HOOK_STATE_DIR}/restart-request",
            # written by the on-program when a backup takes control; SlurmctldPrimaryOffProg does nothing without it
            "in_control": f"{HOOK_STATE_DIR}/in-control",
        },
    }


#: The report's words for the section (report/sections.py, only with a backup controller).
INTRO = (
    "SlurmctldHost once per controller, the head first: a backup takes control after SlurmctldTimeout "
    "without the primary and hands it back when the primary starts; both share StateSaveLocation "
    "(slurm.conf(5)). slurmdbd stays on the head."
)


def ha_rows(ha: Ha) -> list[list[str]]:
    """[setting, value, why] rows of the report's "Slurm controllers" section."""
    rows = [[f"SlurmctldHost ({c['role']})", f"{c['name']}({c['address']})", "slurm.conf, in this order"]
            for c in ha["controllers"]]  # fmt: skip
    mount = ha["state_save_mount"]
    rows.append(["StateSaveLocation", ha["state_save_location"], "shared by every controller"])
    if mount:
        rows.append(["state mount", f"{mount['what']} ({mount['type']}, {mount['options']})", mount["unit_name"]])
    rows.append(["SlurmctldTimeout", f"{ha['slurmctld_timeout_s']} s", "the backup's wait before it takes control"])
    if ha["primary_on"]:
        hold = ha["primary_on"]["config"]["hold_s"]
        rows.append(["SlurmctldPrimaryOnProg", ha["primary_on"]["program"],
                     f"holds GPU nodes until they register with a new controller (at most {hold} s)"])  # fmt: skip
    return rows


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "INTRO",
    "LOCAL_STATE",
    "Controller",
    "StateMount",
    "controllers",
    "ha_plan",
    "ha_rows",
    "primary_on",
    "state_mount",
]
