#!/usr/bin/python
"""A role's packages (checked), folders and systemd units on a host in one module call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_state
short_description: Check a role's packages, make its folders, enable and start its units in one module call
version_added: 0.1.0
description:
  - Three things a role asks of every host on every run, each in one command instead of one module call
    per item, so an idempotent run costs one module call per host and task. All three are optional.
  - It also reads, without changing them, whether paths exist (O(exists)) and the host name (O(hostname)),
    which would otherwise cost a M(ansible.builtin.stat) or M(ansible.builtin.hostname) call each.
  - O(packages) are only checked (one C(dpkg-query)); the ones not installed are returned in
    RV(missing_packages) and the role's M(ansible.builtin.apt) task runs only when that is not empty.
  - O(paths) are folders (created with their parents, then owner, group and mode set as
    M(ansible.builtin.file) C(state=directory) would) or paths removed (C(state=absent)); only those
    that differ are touched. They are done before the units.
  - Reads the state of every unit in O(services) with one C(systemctl show), then runs one
    C(systemctl) command per kind of change (unmask, mask, disable, stop, enable, start, in that order) over the units
    that differ. When every unit is as wanted nothing else runs, so an idempotent run costs one
    C(systemctl show) per host instead of one M(ansible.builtin.systemd_service) call per unit.
  - The states are those of M(ansible.builtin.systemd_service) C(enabled), C(state=started|stopped) and
    C(masked). C(restarted) and C(reloaded) are not offered (restarts belong to handlers).
  - C(systemctl daemon-reload) runs first when systemd holds an outdated copy of a unit's file or
    drop-in (C(NeedDaemonReload=yes)), or a unit to enable or start is not loaded yet (a unit file
    written by this run), or when O(daemon_reload) is true. It does not count as a change.
  - The units start in one C(systemctl start), so systemd orders them by their dependencies
    (C(After=), C(Requires=)), not by their order in O(services).
options:
  packages:
    description:
      - Debian packages that must be installed (C(name) or C(name=version)); checked, never installed.
    type: list
    elements: str
    default: []
  paths:
    description: Folders to create or fix, or paths to remove, each a dict.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      state:
        description: A folder (V(directory)) or nothing (V(absent), a file, link or folder tree removed).
        type: str
        choices: [directory, absent]
        default: directory
      owner:
        description: Owner of the folder.
        type: str
        default: root
      group:
        description: Group of the folder.
        type: str
        default: root
      mode:
        description: Mode of the folder (octal string).
        type: str
        default: "0755"
  services:
    description: The units, each a dict.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Unit name (C(.service) is implied when there is no suffix).
        type: str
        required: true
      enabled:
        description: Enabled at boot (V(true)) or not (V(false)); left alone when absent.
        type: bool
      state:
        description: Running (V(started)) or not (V(stopped)); left alone when absent.
        type: str
        choices: [started, stopped]
      masked:
        description: Masked (V(true)) or not (V(false)); left alone when absent.
        type: bool
  daemon_reload:
    description:
      - Run C(systemctl daemon-reload) before anything else even when no unit in O(services) needs it,
        e.g. the role changed the service a timer in O(services) starts.
    type: bool
    default: false
  exists:
    description:
      - Paths whose existence is read (a link counts, as M(ansible.builtin.stat)'s C(exists)), returned in
        RV(exists); a role reads them here instead of with a M(ansible.builtin.stat) call of its own.
    type: list
    elements: path
    default: []
  hostname:
    description:
      - The host name the host must have; only read (the running name and C(/etc/hostname)), returned in
        RV(hostname). The role's M(ansible.builtin.hostname) task runs only when RV(hostname.differs).
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
extends_documentation_fragment:
  - gpucluster.tiers.attributes
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check Slurm's packages and make its folders
  gpucluster.tiers.host_state:
    packages: [slurmd, libpmix-dev]
    paths:
      - {path: /var/log/slurm, owner: slurm, group: slurm}
      - {path: /etc/nccl/topo.xml, state: absent}
  register: slurm_state

- name: Install Slurm's packages (only when some are missing)
  ansible.builtin.apt:
    name: "{{ slurm_state.missing_packages }}"
    state: present
  when: slurm_state.missing_packages | length > 0

- name: Enable and start the common services (one module call per host)
  gpucluster.tiers.host_state:
    services:
      - {name: chrony, enabled: true, state: started}
      - {name: munge, enabled: true, state: started}
      - {name: rdma-ndd.service, masked: false, state: started}
      - {name: opensm.service, enabled: false}
"""

RETURN = r"""
missing_packages:
  description: The packages of O(packages) that are not installed (or not at the pinned version), in the order given.
  returned: always
  type: list
  elements: str
changed_paths:
  description: The paths of O(paths) created, fixed or removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
actions:
  description: The systemctl verbs run (or that would run, in check mode) and their units.
  returned: always
  type: dict
  sample: {enable: [munge], start: [munge, chrony]}
changed_units:
  description: The units that changed, in the order given.
  returned: always
  type: list
  elements: str
daemon_reload:
  description: Whether C(systemctl daemon-reload) ran (or would run, in check mode).
  returned: always
  type: bool
services:
  description: How many units were compared.
  returned: always
  type: int
exists:
  description: Whether each path of O(exists) exists.
  returned: always
  type: dict
  sample: {/usr/bin/nvidia-smi: false}
hostname:
  description: The running host name, the permanent one (C(/etc/hostname)), and whether either differs from O(hostname).
  returned: when O(hostname) is set
  type: dict
  contains:
    current:
      description: The running host name.
      type: str
    permanent:
      description: The content of C(/etc/hostname), stripped; empty when it is absent.
      type: str
    differs:
      description: Whether either name differs from O(hostname).
      type: bool
  sample: {current: compute01, permanent: compute01, differs: false}
"""

import json  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils.host_state import (  # noqa: E402
    HostStateError,
    Wanted,
    WantedPath,
    existing,
    host_name,
    missing_packages,
    sync,
    sync_paths,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "packages": {"type": "list", "elements": "str", "default": []},
            "paths": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "path", "required": True},
                    "state": {"type": "str", "choices": ["directory", "absent"], "default": "directory"},
                    "owner": {"type": "str", "default": "root"},
                    "group": {"type": "str", "default": "root"},
                    "mode": {"type": "str", "default": "0755"},
                },
            },
            "services": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "enabled": {"type": "bool"},
                    "state": {"type": "str", "choices": ["started", "stopped"]},
                    "masked": {"type": "bool"},
                },
            },
            "daemon_reload": {"type": "bool", "default": False},
            "exists": {"type": "list", "elements": "path", "default": []},
            "hostname": {"type": "str"},
        },
        supports_check_mode=True,
    )

    def run(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv, environ_update={"SYSTEMD_PAGER": "", "LC_ALL": "C"})

    missing: list[str] = []
    changed_paths: list[str] = []
    try:
        if module.params["packages"]:
            dpkg_query = module.get_bin_path("dpkg-query", required=True)
            missing = missing_packages(module.params["packages"], run, dpkg_query=dpkg_query)
        paths = []
        for p in module.params["paths"]:
            try:
                mode = int(p["mode"], 8)
            except ValueError:
                module.fail_json(msg=f"{p['path']}: mode {p['mode']!r} is not an octal mode like 0755")
            paths.append(WantedPath(path=p["path"], state=p["state"], owner=p["owner"], group=p["group"], mode=mode))
        changed_paths = sync_paths(paths, module.check_mode)
    except (HostStateError, OSError) as err:
        module.fail_json(msg=str(err))
    systemctl = module.get_bin_path("systemctl", required=bool(module.params["services"])) or "systemctl"
    try:
        wanted = [
            Wanted(name=s["name"], enabled=s.get("enabled"), state=s.get("state"), masked=s.get("masked"))
            for s in module.params["services"]
        ]
        outcome = sync(
            wanted, run, module.check_mode, systemctl=systemctl, daemon_reload=module.params["daemon_reload"]
        )
    except HostStateError as err:
        module.fail_json(msg=str(err))
    result = {
        "changed": outcome.changed or bool(changed_paths),
        "missing_packages": missing,
        "changed_paths": changed_paths,
        "actions": outcome.actions,
        "changed_units": outcome.changed_units,
        "daemon_reload": outcome.daemon_reload,
        "services": len(wanted),
        "exists": existing(module.params["exists"]),
    }
    if module.params["hostname"]:
        result["hostname"] = host_name(module.params["hostname"])
    if module._diff and (outcome.changed or changed_paths):
        units = outcome.changed_units
        before: dict[str, dict[str, str] | str] = {u: outcome.before[u] for u in units}
        after: dict[str, dict[str, str] | str] = {u: outcome.after[u] for u in units}
        for path in changed_paths:
            before[path] = "present" if path in {p.path for p in paths if p.state == "absent"} else "differs"
            after[path] = "absent" if before[path] == "present" else "as planned"
        result["diff"] = {
            "before": json.dumps(before, indent=2, sort_keys=True) + "\n",
            "after": json.dumps(after, indent=2, sort_keys=True) + "\n",
        }
    module.exit_json(**result)


if __name__ == "__main__":
    main()
