"""Parsers of what the audit reads on a host (target side, Python 3.10, pure, no I/O).

The ``audit_facts`` module runs the tools and hands their output here; tests hand recorded
output. Every probe has a state: ``ok`` (read), ``absent`` (the tool is not on the host: the
lab's containers have no nvidia-smi or ibstat) or ``error`` (the tool ran and failed). An absent
tool is never a finding by itself: the controller decides what the plan expects
(plugins/plugin_utils/audit/).

- :func:`parse_gpu_applied`: ``nvidia-smi --query-gpu=<APPLIED_FIELDS> --format=csv,noheader,nounits``,
  the settings the compute role applies (power limit, persistence, MIG mode) and the versions;
- :func:`parse_nvlink_status`: ``nvidia-smi nvlink -s``, active links per GPU;
- :func:`parse_ibstat`: ``ibstat``, each HCA's firmware and its ports' state and rate;
- :func:`parse_fabricmanager_version`: ``nv-fabricmanager --version``;
- :func:`parse_scontrol_nodes`: ``scontrol -o show node``, each node's Gres, features and state;
- :func:`parse_srun_env`: ``srun --label ... env`` on the compute nodes, the NCCL_* variables a job's
  tasks see on each node (:data:`JOB_ENV_SCRIPT`);
- :func:`parse_beegfs_entryinfo`: ``beegfs-ctl --getentryinfo DIR``, a directory's stripe pattern
  (Lustre layouts: module_utils/lustre_yaml.py, the lustre_layout module's reader).
"""

from __future__ import annotations

import csv
import re
from typing import Any

#: nvidia-smi --query-gpu fields read by the audit (nvidia-smi(1) "--query-gpu"; docs/sources.md [AU1]).
APPLIED_FIELDS = (
    "index",
    "pci.bus_id",
    "name",
    "power.limit",
    "persistence_mode",
    "mig.mode.current",
    "driver_version",
    "vbios_version",
)
APPLIED_ARGS = ["--query-gpu=" + ",".join(APPLIED_FIELDS), "--format=csv,noheader,nounits"]
NVLINK_ARGS = ["nvlink", "-s"]


class ProbeParseError(ValueError):
    """Output that is not what the tool prints."""


def _missing(value: str) -> bool:
    v = value.strip()
    return not v or (v.startswith("[") and v.endswith("]")) or v in ("N/A", "Not Supported")


def _enabled(value: str) -> bool | None:
    v = value.strip().lower()
    if _missing(value):
        return None
    if v in ("enabled", "on", "1"):
        return True
    if v in ("disabled", "off", "0"):
        return False
    raise ProbeParseError(f"not Enabled/Disabled: {value.strip()!r}")


def parse_gpu_applied(text: str) -> list[dict[str, Any]]:
    """One dict per GPU: index, pci_bus_id, name, power_limit_w, persistence, mig, driver_version, vbios_version."""
    out = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(APPLIED_FIELDS):
            raise ProbeParseError(f"expected {len(APPLIED_FIELDS)} fields ({','.join(APPLIED_FIELDS)}), got {len(row)}")
        f = dict(zip(APPLIED_FIELDS, (c.strip() for c in row), strict=True))
        try:
            index = int(f["index"])
            power = None if _missing(f["power.limit"]) else float(f["power.limit"])
        except ValueError as exc:
            raise ProbeParseError(f"GPU row {', '.join(row)!r}: {exc}") from exc
        out.append(
            {
                "index": index,
                "pci_bus_id": None if _missing(f["pci.bus_id"]) else f["pci.bus_id"],
                "name": f["name"],
                "power_limit_w": int(power) if power is not None and power.is_integer() else power,
                "persistence": _enabled(f["persistence_mode"]),
                "mig": _enabled(f["mig.mode.current"]),
                "driver_version": None if _missing(f["driver_version"]) else f["driver_version"],
                "vbios_version": None if _missing(f["vbios_version"]) else f["vbios_version"],
            }
        )
    return out


_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+):\s*(.*)$")


def parse_nvlink_status(text: str) -> dict[int, dict[str, int]]:
    """{GPU index: {"links": n, "active": m}} from ``nvidia-smi nvlink -s`` (docs/sources.md [AU1]).

    An active link prints its speed (``Link 3: 26.562 GB/s``); an inactive one ``<inactive>``.
    """
    out: dict[int, dict[str, int]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        m = _NVLINK_GPU.match(line.strip())
        if m:
            gpu = int(m.group(1))
            out[gpu] = {"links": 0, "active": 0}
            continue
        link = _NVLINK_LINK.match(line)
        if link and gpu is not None:
            out[gpu]["links"] += 1
            if "inactive" not in link.group(2).lower() and re.search(r"\d", link.group(2)):
                out[gpu]["active"] += 1
    return out


def parse_ibstat(text: str) -> list[dict[str, Any]]:
    """One dict per HCA port of ``ibstat``: ca, port, state, physical_state, rate_gbps, firmware, port_guid.

    ibstat(8) prints one ``CA '<name>'`` block per HCA, its ``Firmware version``, then per port
    ``State``, ``Physical state``, ``Rate`` (Gb/s) and ``Port GUID`` (docs/sources.md [AU2])."""
    out: list[dict[str, Any]] = []
    ca: dict[str, Any] = {}
    port: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        m = re.match(r"^CA '([^']+)'", line)
        if m:
            ca = {"ca": m.group(1), "firmware": None}
            port = None
            continue
        m = re.match(r"^Port (\d+):$", line)
        if m and ca:
            port = {"ca": ca["ca"], "port": int(m.group(1)), "firmware": ca.get("firmware")}
            out.append(port)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if port is None:
            if key == "Firmware version":
                ca["firmware"] = value
            continue
        if key == "State":
            port["state"] = value
        elif key == "Physical state":
            port["physical_state"] = value
        elif key == "Rate":
            try:
                port["rate_gbps"] = float(value)
            except ValueError as exc:
                raise ProbeParseError(f"{ca['ca']} port {port['port']}: Rate {value!r} is not a number") from exc
        elif key == "Port GUID":
            port["port_guid"] = value
    return out


def parse_fabricmanager_version(text: str) -> str | None:
    """``Fabric Manager version is : 535.104.05`` -> ``535.104.05``."""
    m = re.search(r"version\s+is\s*:\s*(\S+)", text, re.IGNORECASE)
    return m.group(1) if m else None


def parse_scontrol_nodes(text: str) -> dict[str, dict[str, Any]]:
    """{node: {gres, features, state, reason}} from ``scontrol -o show node`` (one line per node;
    docs/sources.md [AU3]). ``Reason=`` runs to the end of its line, without its ``[user@time]``."""
    out: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        m = re.match(r"^NodeName=(\S+)", line.strip())
        if not m:
            continue

        def field(name: str, text: str = line) -> str | None:
            # Reason= runs to the end of the line (it may hold spaces); the others are one token
            if name == "Reason":
                r = re.search(r"\bReason=(.*?)(?:\s+\[[^\]]*\])?\s*$", text)
            else:
                r = re.search(rf"\b{name}=(\S*)", text)
            v = r.group(1).strip() if r else None
            return None if v in (None, "", "(null)") else v

        out[m.group(1)] = {
            "gres": field("Gres"),
            "features": field("AvailableFeatures"),
            "state": field("State"),
            "reason": field("Reason"),
        }
    return out


#: What each task of the audit's srun prints (``/bin/sh -lc``: a login shell, so /etc/profile and
#: /etc/profile.d run as in a user's session; Slurm's TaskProlog exports are already in the task's
#: environment): the NCCL_* lines of /etc/environment (pam_env's file, read at a login; docs/sources.md
#: [AU4]) first, then the task's own NCCL_* variables and SLURMD_NODENAME. A later line wins, as the
#: profile overrides pam_env. ``exit 0``: a node without any NCCL_* line is not a failed task.
JOB_ENV_SCRIPT = (
    "grep -E '^[[:space:]]*(export[[:space:]]+)?NCCL_[A-Za-z0-9_]*=' /etc/environment 2>/dev/null; "
    "env | grep -E '^(NCCL_[A-Za-z0-9_]*|SLURMD_NODENAME)='; exit 0"
)
#: Variables named NCCL_* that NCCL does not read: NVIDIA's CUDA container images set NCCL_VERSION as
#: a label of the library they ship (not an NCCL setting; docs/sources.md [N1] lists NCCL's variables).
NOT_SETTINGS = frozenset({"NCCL_VERSION"})


def job_env_argv(nodes: str, wait: int) -> list[str]:
    """srun's arguments: one task per node of ``nodes`` (a Slurm hostlist), labelled, bounded.

    ``--immediate``: give up when the nodes are not free within ``wait`` seconds (a full production
    queue must never hang the audit); ``--export=NONE``: none of the caller's (the audit's) environment,
    only what the node gives a job; ``--time=1``: one minute at most (srun(1); docs/sources.md [AU4])."""
    return [
        "--label",
        f"--immediate={wait}",
        "--time=1",
        "--export=NONE",
        "--ntasks-per-node=1",
        f"--nodelist={nodes}",
        "--job-name=gpucluster-audit",
        "/bin/sh",
        "-lc",
        JOB_ENV_SCRIPT,
    ]


#: ``srun --label``: each line of a task's output starts with its task number, right-aligned to the
#: widest number, and ``": "`` (``" 3: NCCL_DEBUG=WARN"``).
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def _unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    return v


def parse_srun_env(text: str) -> dict[str, dict[str, str]]:
    """{node: {NCCL_* name: value}} from the labelled output of :data:`JOB_ENV_SCRIPT` (or ``srun -l env``).

    Each task names its node in SLURMD_NODENAME (srun(1), set for every task); a task's later line for
    a name wins. Lines without a label (srun's own messages) and labelled lines that are no assignment
    (the rest of a multi-line value) are skipped; variables NCCL does not read (:data:`NOT_SETTINGS`)
    and other names are left out."""
    tasks: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        label = _LABEL.match(line)
        if not label:
            continue
        assign = _ASSIGN.match(label.group(2))
        if not assign:
            continue
        tasks.setdefault(int(label.group(1)), {})[assign.group(1)] = _unquote(assign.group(2))
    out: dict[str, dict[str, str]] = {}
    for task, env in sorted(tasks.items()):
        node = env.get("SLURMD_NODENAME")
        if not node:
            raise ProbeParseError(f"srun task {task} printed no SLURMD_NODENAME")
        out[node] = {k: v for k, v in sorted(env.items()) if k.startswith("NCCL_") and k not in NOT_SETTINGS}
    return out


_SIZE = re.compile(r"^(\d+)\s*([kKmMgG]?)i?[bB]?$")
_SCALE = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_beegfs_entryinfo(text: str) -> dict[str, Any]:
    """A directory's stripe pattern from ``beegfs-ctl --getentryinfo DIR`` (docs/sources.md [AU5]).

    The lines read (BeeGFS 7; ``beegfs entry info --retro`` in BeeGFS 8 prints the same)::

        Entry type: directory
        Stripe pattern details:
        + Type: RAID0
        + Chunksize: 1M
        + Number of storage targets: desired: 4

    Returns entry_type, pattern (RAID0, Buddy Mirror, ...), chunksize (bytes) and numtargets (the
    desired count)."""
    out: dict[str, Any] = {"entry_type": None, "pattern": None, "chunksize": None, "numtargets": None}
    for raw in text.splitlines():
        line = raw.strip().lstrip("+").strip()
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "entry type":
            out["entry_type"] = value
        elif key == "type":
            out["pattern"] = value
        elif key == "chunksize":
            size = _SIZE.match(value)
            if not size:
                raise ProbeParseError(f"beegfs-ctl --getentryinfo: Chunksize {value!r} is not a size")
            out["chunksize"] = int(size.group(1)) * _SCALE[size.group(2).lower()]
        elif key == "number of storage targets":
            desired = re.search(r"desired:\s*(\d+)", value)
            if not desired:
                raise ProbeParseError(f"beegfs-ctl --getentryinfo: no desired target count in {value!r}")
            out["numtargets"] = int(desired.group(1))
    if out["chunksize"] is None or out["numtargets"] is None:
        raise ProbeParseError(f"beegfs-ctl --getentryinfo printed no stripe pattern: {text[:200]!r}")
    return out
