"""Which role file goes on which host: the plan's files manifest, and each host's list.

Each role lists the files it installs in ``roles/<role>/vars/files.yml`` (key ``<role>_files``):
the role's tasks write them (tasks/configure.yml) and the plan renders them per host (make plan,
molecule's byte-for-byte check). The engine does no I/O: the ``cluster_plan`` filter reads those
lists and passes them in as ``role_files`` ({role: [entry, ...]}); here they are checked and kept
when their ``if`` condition holds in the plan (plan.files, :func:`files_manifest`). A host's list
(:func:`host_files`, its host view's ``files[<host>]``) is each kept entry whose ``hosts`` matches the
host's roles, once, or once per unit of the host. Fields of an entry: docs/guide.md, "Changing things".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import choices as groups
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan, PlanView
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import (
    FileEntry,
    FileRule,
    FilesSection,
    HostEntry,
    HostFiles,
)

#: Who gets a file: every host, one host role, or a union of roles.
HOSTS: dict[str, frozenset[str] | None] = {
    "all": None,
    groups.HEAD: frozenset({groups.HEAD}),
    groups.COMPUTE: frozenset({groups.COMPUTE}),
    groups.NFS_SERVER: frozenset({groups.NFS_SERVER}),
    groups.LUSTRE_MDS: frozenset({groups.LUSTRE_MDS}),
    groups.LUSTRE_OSS: frozenset({groups.LUSTRE_OSS}),
    "slurm": groups.SLURM_HOSTS,
    "slurm_controller": groups.SLURM_CONTROLLERS,  # every slurmctld host (slurm/ha.py)
    "lustre_server": groups.LUSTRE_SERVERS,
    groups.NVMEOF_TARGET: frozenset({groups.NVMEOF_TARGET}),
    groups.BEEGFS_MGMTD: frozenset({groups.BEEGFS_MGMTD}),
    groups.BEEGFS_META: frozenset({groups.BEEGFS_META}),
    groups.BEEGFS_STORAGE: frozenset({groups.BEEGFS_STORAGE}),
    "beegfs_server": groups.BEEGFS_SERVERS,
}

#: The fields an entry may have (the engine reads src, dest, hosts, if, plan, each; the role's
#: tasks read mode, notify, mkdir, validate, task, unsafe_writes; static is read by both renderers:
#: the entry's src is a file of the role's files/ folder, installed as is, not a template).
FIELDS: frozenset[str] = frozenset(
    {
        "src",
        "dest",
        "hosts",
        "if",
        "mode",
        "notify",
        "mkdir",
        "validate",
        "task",
        "plan",
        "each",
        "unsafe_writes",
        "static",
    }
)

#: Roles that belong to one scheduler path: their files go only to a plan with that scheduler
#: (``gpucluster_cluster.scheduler``). The Kubernetes path has no slurm.conf, gres.conf or slurmdbd.conf:
#: site.yml does not run the slurm role there, so the plan must not list its files either.
SCHEDULER_ROLES: dict[str, str] = {"slurm": "slurm"}

#: Per-unit files, one per unit of the plan at <dest>/<unit name>, the unit as ``item.unit``:
#: ``network_unit`` the host's interface units (name); ``nfs_mount`` the NFS client mount units of an
#: NFS plan (storage.nfs.client_mounts, unit_name); ``lustre_mount`` the Lustre client mount unit of a
#: Lustre plan (storage.lustre.client_mount, unit_name); ``slurm_state_mount`` the mount unit of Slurm's
#: shared StateSaveLocation (slurm.ha.state_save_mount, unit_name).
EACH: tuple[str, ...] = ("network_unit", "nfs_mount", "lustre_mount", "slurm_state_mount")


def _units(kind: str, plan: Plan | PlanView, host: HostEntry) -> list[tuple[str, Mapping[str, Any]]]:
    """(file name, unit) of each unit of a per-unit kind for this host."""
    if kind == "network_unit":
        return [(unit["name"], unit) for unit in host["network_units"]]
    if kind == "nfs_mount":
        nfs = plan["storage"].get("nfs")
        mounts = nfs["client_mounts"] if nfs and plan["storage"]["type"] == "nfs" else []
        return [(unit["unit_name"], unit) for unit in mounts]
    if kind == "lustre_mount":
        lustre = plan["storage"].get("lustre") if plan["storage"]["type"] == "lustre" else None
        client = lustre["client_mount"] if lustre else None
        return [(client["unit_name"], client)] if client else []
    slurm = plan.get("slurm")
    mount = slurm["ha"]["state_save_mount"] if slurm else None
    return [(mount["unit_name"], mount)] if mount else []


_MODE = re.compile(r"^0[0-7]{3}\Z")

#: Where NCCL reads the topology file (nccl.conf's NCCL_TOPO_FILE); the compute role's list
#: installs nccl-topo.xml.j2 there (tests/unit keeps the two equal).
NCCL_TOPO_FILE = "/etc/nccl/topo.xml"


@dataclass(frozen=True)
class RoleFile:
    """One checked entry of a role's file list."""

    role: str
    src: str
    dest: str
    hosts: str
    condition: str | None
    planned: bool
    each: str | None
    mode: str = "0644"
    notify: tuple[str, ...] = ()
    validate: str | None = None
    mkdir: bool = False
    own: bool = False
    unsafe_writes: bool = False
    static: bool = False

    def entry(self) -> FileEntry:
        """The manifest entry: role, template, destination and how the host_files writer installs it
        (mode; notify, validate, mkdir, unsafe_writes, static and task only when set, as in the role's list)."""
        out: FileEntry = {"role": self.role, "src": self.src, "dest": self.dest, "mode": self.mode}
        if self.notify:
            out["notify"] = list(self.notify)
        if self.validate:
            out["validate"] = self.validate
        if self.mkdir:
            out["mkdir"] = True
        if self.unsafe_writes:
            out["unsafe_writes"] = True
        if self.static:
            out["static"] = True
        if self.own:
            out["task"] = "own"
        return out

    def rule(self) -> FileRule:
        """The plan's rule: who gets the file (``hosts``), once or per unit (``each``), and its entry."""
        out: FileRule = {"hosts": self.hosts, "file": self.entry()}
        if self.each is not None:
            out["each"] = self.each
        return out


def conditions(plan: PlanView) -> dict[str, bool]:
    """The named conditions an entry's ``if`` may use, decided by the plan."""
    fabric_hosts = plan.get("fabric_host")
    nfs = plan["storage"].get("nfs")
    nfs_impl = nfs.get("server_impl") if nfs else None
    beegfs = plan["storage"].get("beegfs")
    bringup = plan["gpu"].get("bringup") or {}
    containers = plan.get("containers")
    runtime = containers["runtime"] if containers else None
    return {
        "opensm": bool(fabric_hosts and fabric_hosts["opensm"]),
        "roce": bool(fabric_hosts and fabric_hosts["roce_hosts"]),
        "lab_chrony": bool(plan["time"]["no_clock_control"]),
        "lab": bool(plan["cluster"]["lab"]),  # the container lab (gpucluster_lab)
        "nccl": bool(plan["nccl"]["enabled"]),
        "mpi": bool(plan["slurm"]["mpi"]["files"]),
        "nccl_topo": bool(plan["nccl"].get("topo_file")),
        "topology": bool(plan["fabric"]["slurm_topology"]) or bool(plan["slurm"].get("topology_blocks")),
        "lustre": plan["storage"]["type"] == "lustre",
        "nfs_kernel": nfs_impl == "kernel",
        "nfs_ganesha": nfs_impl == "ganesha",
        "mig": bool(plan["gpu"].get("mig")),  # a MIG layout is planned (compute/mig.py)
        "nvmeof": plan["storage"]["type"] == "nvmeof",
        "beegfs": plan["storage"]["type"] == "beegfs",
        "ckpt_drain": bool((plan["storage"].get("checkpoint_drain") or {}).get("enabled")),  # storage/checkpoint.py
        "beegfs_rdma": bool(beegfs.get("rdma")) if beegfs else False,
        "slurm": plan["cluster"]["scheduler"] == "slurm",
        "kubernetes": plan["cluster"]["scheduler"] == "kubernetes",
        # GPU bring-up (compute/bringup.py): Fabric Manager on NVSwitch boards, nvidia_peermem when planned
        "fabric_manager": bool(bringup.get("fabric_manager", {}).get("required")),
        "peermem": (bringup.get("gpudirect") or {}).get("method") == "nvidia_peermem",
        # PCIe ACS off at boot and iommu=pt, where GPUDirect RDMA is used (compute/bringup.py pcie_plan)
        "pcie_acs": bool(((bringup.get("gpudirect") or {}).get("pcie") or {}).get("acs_disable")),
        "iommu_pt": bool(((bringup.get("gpudirect") or {}).get("pcie") or {}).get("kernel_args")),
        # NVLink5 boards: NVLSM's ib_umad at boot (compute/bringup.py nvlsm_plan)
        "nvlsm": bool(((bringup.get("fabric_manager") or {}).get("nvlsm") or {}).get("required")),
        "slurm_state_mount": bool(plan["slurm"]["ha"]["state_save_mount"]),
        "slurm_backup": bool(plan["slurm"]["ha"]["primary_on"]),  # a backup controller (slurm/ha.py)
        # training jobs in containers (compute/containers.py): Enroot + Pyxis, or Slurm's oci.conf + runc
        "containers_pyxis": runtime == "pyxis",
        "containers_oci": runtime == "oci",
    }


def _entry(role: str, index: int, raw: Any, known: Mapping[str, bool]) -> RoleFile:
    where = f"roles/{role}/vars/files.yml {role}_files[{index}]"
    require(isinstance(raw, Mapping), where, raw, "a mapping with src, dest, hosts and mode")
    unknown = sorted(set(raw) - FIELDS)
    require(not unknown, f"{where}.{unknown[0] if unknown else ''}", unknown, "fields " + ", ".join(sorted(FIELDS)))
    for key in ("src", "dest", "hosts", "mode"):
        require(isinstance(raw.get(key), str) and bool(raw.get(key)), f"{where}.{key}", raw.get(key), "a string")
    require(str(raw["dest"]).startswith("/"), f"{where}.dest", raw["dest"], "an absolute path")
    require(raw["hosts"] in HOSTS, f"{where}.hosts", raw["hosts"], "one of " + ", ".join(HOSTS))
    require(bool(_MODE.match(raw["mode"])), f"{where}.mode", raw["mode"], 'a quoted octal mode such as "0644"')
    condition = raw.get("if")
    require(condition is None or condition in known, f"{where}.if", condition, "one of " + ", ".join(known))
    notify = raw.get("notify", [])
    require(
        isinstance(notify, list) and all(isinstance(n, str) and n for n in notify),
        f"{where}.notify",
        notify,
        "a list of handler names",
    )
    for key in ("mkdir", "plan", "unsafe_writes", "static"):
        require(isinstance(raw.get(key, True), bool), f"{where}.{key}", raw.get(key), "true or false")
    require(
        not (raw.get("static") and raw.get("each")),
        f"{where}.static",
        raw.get("static"),
        "false for a per-unit file (each: one file per unit needs a template)",
    )
    validate = raw.get("validate")
    require(
        validate is None or (isinstance(validate, str) and "%s" in validate),
        f"{where}.validate",
        validate,
        "a command with %s for the new file, such as 'nft --check --file %s'",
    )
    require(raw.get("task", "own") == "own", f"{where}.task", raw.get("task"), "own")
    require(raw.get("each") in (None, *EACH), f"{where}.each", raw.get("each"), "one of " + ", ".join(EACH))
    require(
        raw.get("each") != "network_unit" or raw.get("task") == "own",
        f"{where}.task",
        raw.get("task"),
        "own for the interface units (each: network_unit; tasks/network.yml picks their folder)",
    )
    return RoleFile(
        role=role,
        src=raw["src"],
        dest=raw["dest"],
        hosts=raw["hosts"],
        condition=condition,
        planned=raw.get("plan", True),
        each=raw.get("each"),
        mode=raw["mode"],
        notify=tuple(notify),
        validate=raw.get("validate"),
        mkdir=bool(raw.get("mkdir", False)),
        own=raw.get("task") == "own",
        unsafe_writes=bool(raw.get("unsafe_writes", False)),
        static=bool(raw.get("static", False)),
    )


def role_file_entries(role_files: Mapping[str, Any], known: Mapping[str, bool]) -> list[RoleFile]:
    """Every role's list, checked, in the given role order and list order."""
    out: list[RoleFile] = []
    for role, entries in role_files.items():
        require(
            isinstance(entries, list),
            f"roles/{role}/vars/files.yml {role}_files",
            entries,
            "a list of files (src, dest, hosts, mode, ...)",
        )
        checked = [_entry(role, i, raw, known) for i, raw in enumerate(entries)]
        sources = [f.src for f in checked]
        dupes = sorted({s for s in sources if sources.count(s) > 1})
        require(not dupes, f"roles/{role}/vars/files.yml {role}_files", dupes, "each template (src) once")
        out += checked
    return out


def files_manifest(plan: PlanView, role_files: Mapping[str, Any] | None) -> FilesSection:
    """The role files this plan installs: each with the hosts that get it (``hosts``) and, for a per-unit
    file, its kind of unit (``each``). The entry (``file``) is the role, template, destination and how it
    is installed (mode; notify, validate, mkdir, task when set). The roles write each entry without a task
    of its own with gpucluster.tiers.host_files (roles/common/tasks/configure.yml), from the host's list
    (:func:`host_files`, the host view's ``files[<host>]``).

    The same size at any cluster size: a host's list is derived from these rules, its roles and its own units
    when its view is made (at 16,384 nodes the per-host lists were 145 MiB of the plan's JSON, most of the time
    spent hashing and handing over the plan; docs/performance.md).

    ``role_files``: each role's list from ``roles/<role>/vars/files.yml``; None (a caller without
    the roles, e.g. a benchmark) gives no files. Entries with ``plan: false`` (slurmdbd.conf: a secret)
    are left out: make plan does not render them; so are those whose ``if`` the plan does not meet and the
    files of another scheduler's roles."""
    known = conditions(plan)
    scheduler = plan["cluster"]["scheduler"]
    entries = [
        f
        for f in role_file_entries(role_files or {}, known)
        if f.planned
        and SCHEDULER_ROLES.get(f.role, scheduler) == scheduler
        and (f.condition is None or known[f.condition])
    ]
    # a host's list: the files installed once, in role order, then the per-unit ones, the interface units
    # last (as before the other kinds existed; a stable sort keeps role order)
    per_unit = sorted((f for f in entries if f.each is not None), key=lambda f: f.each == "network_unit")
    return [f.rule() for f in entries if f.each is None] + [f.rule() for f in per_unit]


def host_files(plan: Plan | PlanView, host: str) -> list[FileEntry]:
    """The role files ``host`` gets, in order: each rule whose ``hosts`` match the host's roles, once, or
    once per unit of the host (``dest`` the folder, the unit's name appended, the unit as ``unit``).
    The entries of the files installed once are the plan's own objects (read, never changed)."""
    entry = plan["hosts"][host]
    roles = set(entry["roles"])
    out: list[FileEntry] = []
    for rule in plan["files"]:
        wanted = HOSTS[rule["hosts"]]
        if wanted is not None and not wanted & roles:
            continue
        each = rule.get("each")
        if each is None:
            out.append(rule["file"])
            continue
        for unit_name, unit in _units(each, plan, entry):
            out.append({**rule["file"], "dest": f"{rule['file']['dest']}/{unit_name}", "unit": unit})
    return out


def files_by_host(plan: Plan | PlanView) -> HostFiles:
    """:func:`host_files` of every host of the plan: host name -> its role files (the report's table)."""
    return {host: host_files(plan, host) for host in plan["hosts"]}


__all__ = [
    "EACH",
    "FIELDS",
    "HOSTS",
    "NCCL_TOPO_FILE",
    "SCHEDULER_ROLES",
    "RoleFile",
    "conditions",
    "files_by_host",
    "files_manifest",
    "host_files",
    "role_file_entries",
]
