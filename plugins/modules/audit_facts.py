#!/usr/bin/python
"""Read, on one host, what the audit compares with the plan (read-only)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: audit_facts
short_description: Read a host's planned files, services, GPU, NVLink, HCA and Slurm state for the audit
version_added: 0.1.0
description:
  - Reads, never changes, what C(playbooks/audit.yml) compares with the plan; the comparison
    itself runs on the controller (C(gpucluster.tiers.audit_findings)).
  - "Each probe returns a C(state): C(ok) (read), C(absent) (the tool is not on the host, as in the
    lab's containers, which have no nvidia-smi or ibstat) or C(error) (the tool ran and failed).
    A probe not asked for is C(skipped)."
  - Files are read as sha256 of their bytes (null when the file does not exist); services with one
    C(systemctl show) call; GPUs with C(nvidia-smi --query-gpu) (power limit, persistence, MIG mode,
    driver and VBIOS versions) and C(nvidia-smi nvlink -s); HCAs with C(ibstat); Fabric Manager with
    C(nv-fabricmanager --version); the firewall with C(nft list table); Slurm with C(scontrol -o show node).
  - "The NCCL environment a job sees (O(job_env_nodes)): one C(srun --label --immediate=<job_env_wait> --export=NONE
    --ntasks-per-node=1 --nodelist=<job_env_nodes> /bin/sh -lc ...) from the head, one short task per compute
    node that prints the NCCL_* lines of C(/etc/environment) and the NCCL_* variables of its environment
    (login profile, C(/etc/profile.d), Slurm's TaskProlog). Nodes not free within C(job_env_wait) seconds:
    C(error), with srun's message."
  - "The planned directories' layouts (O(layouts.dirs)), on one client: Lustre with
    C(lfs getstripe -d --yaml DIR) (the reader of M(gpucluster.tiers.lustre_layout)), BeeGFS with
    C(beegfs-ctl --getentryinfo DIR). A directory that does not exist is C(missing)."
  - Never reports a change and runs the same in check mode (the srun starts a one-task-per-node job that
    only prints its environment).
options:
  files:
    description: Absolute paths whose sha256 to read.
    type: list
    elements: path
    default: []
  services:
    description: systemd units whose active and enabled state to read.
    type: list
    elements: str
    default: []
  gpu:
    description: Read the GPUs with nvidia-smi (settings, versions, NVLink).
    type: bool
    default: false
  hca:
    description: Read the HCAs with ibstat.
    type: bool
    default: false
  fabric_manager:
    description: Read the Fabric Manager version.
    type: bool
    default: false
  nft_table:
    description: Name of the nftables table (family inet) that must be loaded; empty to skip.
    type: str
    default: ""
  slurm_nodes:
    description: Read every node as slurmctld sees it (run on the head).
    type: bool
    default: false
  job_env_nodes:
    description: Slurm hostlist of the compute nodes whose job environment to read with one srun (run on the
      head); empty to skip.
    type: str
    default: ""
  job_env_wait:
    description: Seconds srun waits for the nodes (C(--immediate)); not free by then, the probe is C(error).
    type: int
    default: 30
  layouts:
    description: The planned directories whose layout to read (one client of the parallel file system).
    type: dict
    suboptions:
      kind:
        description: C(lustre) (C(lfs getstripe)) or C(beegfs) (C(beegfs-ctl --getentryinfo)).
        type: str
        choices: [lustre, beegfs]
        required: true
      mount:
        description: The file system's mount point; not mounted, the probe is C(error).
        type: path
        required: true
      dirs:
        description: Absolute paths of the planned directories.
        type: list
        elements: path
        required: true
  timeout:
    description: Seconds allowed for each tool call (coreutils C(timeout)).
    type: int
    default: 60
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
extends_documentation_fragment:
  - gpucluster.tiers.attributes
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read what the plan decides on this host
  gpucluster.tiers.audit_facts:
    files: [/etc/slurm/slurm.conf, /etc/nccl.conf]
    services: [slurmd, munge]
    gpu: true
    hca: true
    nft_table: gpucluster
  register: audit_host

- name: On the head, the NCCL environment of a job on each compute node
  gpucluster.tiers.audit_facts:
    slurm_nodes: true
    job_env_nodes: compute[01-04]
    job_env_wait: 30

- name: On one Lustre client, the planned directories' default layouts
  gpucluster.tiers.audit_facts:
    layouts:
      kind: lustre
      mount: /lustre/aifs
      dirs: [/lustre/aifs/checkpoints, /lustre/aifs/datasets]
"""

RETURN = r"""
audit:
  description: What was read, by probe.
  returned: always
  type: dict
  contains:
    files:
      description: Path to sha256 (null when the file does not exist).
      type: dict
    services:
      description: Unit to C(active) (ActiveState) and C(enabled) (UnitFileState).
      type: dict
    gpu:
      description: C(state), C(reason), C(gpus) (index, pci_bus_id, name, power_limit_w, persistence, mig,
        driver_version, vbios_version), C(nvlink) ({index, links, active}; a GPU that C(nvidia-smi nvlink -s)
        does not list is absent; the audit counts a planned GPU missing there as 0 active links), and
        C(nvlink_state) and C(nvlink_reason) (that command's state and why it could not be read).
      type: dict
    hca:
      description: C(state), C(reason), C(ports) (ca, port, state, physical_state, rate_gbps, firmware, port_guid).
      type: dict
    fabric_manager:
      description: C(state), C(reason), C(version).
      type: dict
    firewall:
      description: C(state), C(reason), C(table_loaded).
      type: dict
    slurm:
      description: C(state), C(reason), C(nodes) (node to gres, features, state, reason).
      type: dict
    job_env:
      description: C(state), C(reason), C(nodes) (node to its job's NCCL_* variables, name to value).
      type: dict
    layouts:
      description: C(state), C(reason), C(kind), C(dirs) (path to C(state) ok, missing or error, C(reason),
        and C(layout) - Lustre components (start, end, stripe_count, stripe_size, layout, pool) or the
        BeeGFS pattern (entry_type, pattern, chunksize, numtargets)).
      type: dict
"""

import hashlib  # noqa: E402
import os  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils import audit_probe  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.module_utils.lustre_yaml import (  # noqa: E402
    LayoutError,
    parse_getstripe_yaml,
)


def sha256_of(path: str) -> str | None:
    """sha256 of a file's bytes; None when it does not exist."""
    try:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except FileNotFoundError:
        return None


def parse_systemctl_show(text: str) -> dict[str, dict[str, str]]:
    """Blocks of ``systemctl show -p Id,ActiveState,UnitFileState u1 u2 ...`` by unit name (``.service`` dropped)."""
    out: dict[str, dict[str, str]] = {}
    for block in text.strip().split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        unit = props.get("Id", "")
        if unit:
            name = unit[: -len(".service")] if unit.endswith(".service") else unit
            out[name] = {"active": props.get("ActiveState", ""), "enabled": props.get("UnitFileState", "")}
    return out


class Probe:
    """Runs tools under coreutils timeout; a tool not on the host is ``absent``."""

    def __init__(self, module: AnsibleModule, timeout: int) -> None:
        self.module = module
        self.timeout = timeout

    def run(self, tool: str, args: list[str]) -> tuple[str, str, str | None]:
        """(state, stdout, reason)."""
        path = self.module.get_bin_path(tool)
        if not path:
            return "absent", "", f"{tool} not found in PATH"
        argv = ["timeout", str(self.timeout), path, *args]
        rc, out, err = self.module.run_command(argv)
        if rc != 0:
            return "error", out, f"{tool} {' '.join(args)} failed (rc {rc}): {(err or out).strip()[:300]}"
        return "ok", out, None


def collect(params: dict[str, Any], probe: Probe) -> dict[str, Any]:
    skipped: dict[str, Any] = {"state": "skipped", "reason": None}
    out: dict[str, Any] = {"files": {p: sha256_of(p) for p in params["files"]}}

    services: dict[str, dict[str, str]] = {}
    if params["services"]:
        units = [u if "." in u else u + ".service" for u in params["services"]]
        state, text, reason = probe.run("systemctl", ["show", "-p", "Id,ActiveState,UnitFileState", *units])
        shown = parse_systemctl_show(text) if state == "ok" else {}
        for unit in params["services"]:
            services[unit] = shown.get(unit, {"active": "unknown", "enabled": "unknown"})
    out["services"] = services

    gpu = dict(skipped)
    if params["gpu"]:
        state, text, reason = probe.run("nvidia-smi", audit_probe.APPLIED_ARGS)
        gpu = {"state": state, "reason": reason, "gpus": [], "nvlink": []}
        if state == "ok":
            gpu["gpus"] = audit_probe.parse_gpu_applied(text)
            nv_state, nv_text, nv_reason = probe.run("nvidia-smi", audit_probe.NVLINK_ARGS)
            gpu["nvlink_state"] = nv_state
            gpu["nvlink_reason"] = nv_reason
            if nv_state == "ok":
                links = audit_probe.parse_nvlink_status(nv_text)
                gpu["nvlink"] = [{"index": i, **v} for i, v in sorted(links.items())]
    out["gpu"] = gpu

    hca = dict(skipped)
    if params["hca"]:
        state, text, reason = probe.run("ibstat", [])
        hca = {"state": state, "reason": reason, "ports": audit_probe.parse_ibstat(text) if state == "ok" else []}
    out["hca"] = hca

    fm = dict(skipped)
    if params["fabric_manager"]:
        state, text, reason = probe.run("nv-fabricmanager", ["--version"])
        fm = {"state": state, "reason": reason, "version": audit_probe.parse_fabricmanager_version(text)}
    out["fabric_manager"] = fm

    fw = dict(skipped)
    if params["nft_table"]:
        state, _text, reason = probe.run("nft", ["list", "table", "inet", params["nft_table"]])
        # a table that is not loaded makes nft fail: that is the finding, not an error of the probe
        fw = {"state": "absent" if state == "absent" else "ok", "reason": reason, "table_loaded": state == "ok"}
    out["firewall"] = fw

    slurm = dict(skipped)
    if params["slurm_nodes"]:
        state, text, reason = probe.run("scontrol", ["-o", "show", "node"])
        slurm = {
            "state": state,
            "reason": reason,
            "nodes": audit_probe.parse_scontrol_nodes(text) if state == "ok" else {},
        }
    out["slurm"] = slurm

    job_env = dict(skipped)
    if params.get("job_env_nodes"):
        argv = audit_probe.job_env_argv(params["job_env_nodes"], params.get("job_env_wait", 30))
        state, text, reason = probe.run("srun", argv)
        if reason:  # the script is long: name the nodes instead
            reason = reason.replace(" ".join(argv), f"(one task on each of {params['job_env_nodes']})")
        job_env = {"state": state, "reason": reason, "nodes": audit_probe.parse_srun_env(text) if state == "ok" else {}}
    out["job_env"] = job_env
    out["layouts"] = read_layouts(params.get("layouts"), probe)
    return out


def read_layouts(want: dict[str, Any] | None, probe: Probe) -> dict[str, Any]:
    """Each planned directory's layout, from one client (lfs getstripe -d --yaml, beegfs-ctl --getentryinfo)."""
    if not want:
        return {"state": "skipped", "reason": None}
    kind, mount = want["kind"], want["mount"]
    tool, args = ("lfs", ["getstripe", "-d", "--yaml"]) if kind == "lustre" else ("beegfs-ctl", ["--getentryinfo"])
    out: dict[str, Any] = {"state": "ok", "reason": None, "kind": kind, "dirs": {}}
    if not os.path.ismount(mount):
        return {**out, "state": "error", "reason": f"{mount} is not mounted on this host"}
    for path in want["dirs"]:
        if not os.path.isdir(path):
            out["dirs"][path] = {"state": "missing", "reason": "no such directory", "layout": None}
            continue
        state, text, reason = probe.run(tool, [*args, path])
        if state == "absent":
            return {**out, "state": "absent", "reason": reason, "dirs": {}}
        layout = None
        if state == "ok":
            try:
                layout = parse_getstripe_yaml(text) if kind == "lustre" else audit_probe.parse_beegfs_entryinfo(text)
            except (LayoutError, audit_probe.ProbeParseError) as exc:
                state, reason = "error", str(exc)
        out["dirs"][path] = {"state": state, "reason": reason, "layout": layout}
    return out


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "path", "default": []},
            "services": {"type": "list", "elements": "str", "default": []},
            "gpu": {"type": "bool", "default": False},
            "hca": {"type": "bool", "default": False},
            "fabric_manager": {"type": "bool", "default": False},
            "nft_table": {"type": "str", "default": ""},
            "slurm_nodes": {"type": "bool", "default": False},
            "job_env_nodes": {"type": "str", "default": ""},
            "job_env_wait": {"type": "int", "default": 30},
            "layouts": {
                "type": "dict",
                "options": {
                    "kind": {"type": "str", "choices": ["lustre", "beegfs"], "required": True},
                    "mount": {"type": "path", "required": True},
                    "dirs": {"type": "list", "elements": "path", "required": True},
                },
            },
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    layouts = module.params["layouts"] or {}
    bad = [p for p in [*module.params["files"], *layouts.get("dirs", [])] if not os.path.isabs(p)]
    if bad:
        module.fail_json(msg=f"files and layouts.dirs must be absolute paths: {', '.join(bad)}")
    try:
        audit = collect(module.params, Probe(module, module.params["timeout"]))
    except audit_probe.ProbeParseError as exc:
        module.fail_json(msg=f"cannot read a tool's output: {exc}")
    module.exit_json(changed=False, audit=audit)


if __name__ == "__main__":
    main()
