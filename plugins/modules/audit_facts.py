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
  - Never reports a change and runs the same in check mode.
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
        driver_version, vbios_version) and C(nvlink) ({index, links, active}).
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
"""

import hashlib  # noqa: E402
import os  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils import audit_probe  # noqa: E402


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
            nv_state, nv_text, _nv_reason = probe.run("nvidia-smi", audit_probe.NVLINK_ARGS)
            gpu["nvlink_state"] = nv_state
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
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    bad = [p for p in module.params["files"] if not os.path.isabs(p)]
    if bad:
        module.fail_json(msg=f"files must be absolute paths: {', '.join(bad)}")
    try:
        audit = collect(module.params, Probe(module, module.params["timeout"]))
    except audit_probe.ProbeParseError as exc:
        module.fail_json(msg=f"cannot read a tool's output: {exc}")
    module.exit_json(changed=False, audit=audit)


if __name__ == "__main__":
    main()
