#!/usr/bin/python
"""Write a role's rendered files on a host in one call (the host side of the host_files action)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_files
short_description: Write a role's files on a host in one module call, only those that changed
version_added: 0.1.0
description:
  - The action of the same name renders each of a role's templates for the host on the controller
    (the same renderer and options as C(make plan) and M(ansible.builtin.template)), then calls this
    module once with all of them.
  - Each file is compared by sha256, mode and owner; only a file that differs is written, atomically
    (a temporary file in its folder, checked by the entry's C(validate) when set, then renamed over the
    old one). A file whose content is equal but mode or owner differ gets its attributes fixed.
  - Entries with C(mkdir) get their folder created (mode 0755, owner root), as
    M(ansible.builtin.file) with C(state=directory) would.
  - Entries with C(unsafe_writes) are written in place when the rename over the old file is refused
    (EBUSY, EXDEV, EPERM, EACCES, ETXTBSY), as Ansible's C(unsafe_writes) does, for C(/etc/hosts), which a
    container runtime bind-mounts.
  - Entries with C(static) name a file of the role's C(files/) folder, sent as is (no templating), a
    program such as the node health check.
  - Called through the action with O(files) as manifest entries (role, src, dest, mode, notify,
    validate, mkdir, unsafe_writes, static) of C(gpucluster_host_plan.files); the action returns
    C(changed_files), the entries that changed, so a task can notify each changed file's handlers only.
options:
  files:
    description:
      - Through the action, the plan's manifest entries of the host (C(role), C(src), C(dest), C(mode),
        and optional C(notify), C(validate), C(mkdir), C(unsafe_writes), C(static)); the action renders
        C(src) from C(<template_root>/<role>/templates/) (with C(static), reads it as is from
        C(<template_root>/<role>/files/)) and passes C(content) to the module.
      - Called directly, each item needs C(dest), C(content) and C(mode).
    type: list
    elements: dict
    required: true
  template_root:
    description: Folder that holds the roles (action only); default the parent of the calling role.
    type: path
  dest_dir:
    description:
      - Write each file into this folder under the base name of its C(dest) (action only). The
        interface units are planned under C(/etc/gpucluster/network) and go to
        C(common_network_units_dir) when systemd-networkd takes them.
    type: path
  owner:
    description: Owner of every file and created folder.
    type: str
    default: root
  group:
    description: Group of every file and created folder.
    type: str
    default: root
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
- name: Write the role's files from the plan (one module call per host)
  gpucluster.tiers.host_files:
    files: >-
      {{ gpucluster_host_plan.files[inventory_hostname] | selectattr('role', 'equalto', 'common')
         | rejectattr('task', 'defined') }}
  register: common_files_written

- name: Notify the handlers of the files that changed
  ansible.builtin.debug:
    msg: "{{ item.dest }} changed"
  changed_when: true
  notify: "{{ item.notify }}"
  loop: "{{ common_files_written.changed_files | selectattr('notify', 'defined') }}"
"""

RETURN = r"""
changed_paths:
  description: Destinations whose content, mode or owner changed (or would, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/chrony/chrony.conf]
folders:
  description: Folders created or whose mode or owner changed.
  returned: always
  type: list
  elements: str
changed_files:
  description: The manifest entries (without content) of the changed paths, in the order given (action).
  returned: always
  type: list
  elements: dict
files:
  description: How many files were compared.
  returned: always
  type: int
"""

import grp  # noqa: E402
import pwd  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils.host_files import (  # noqa: E402
    HostFilesError,
    Wanted,
    sync,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "dict", "required": True},
            # options of the action (it renders on the controller); accepted here, not used
            "template_root": {"type": "path"},
            "dest_dir": {"type": "path"},
            "owner": {"type": "str", "default": "root"},
            "group": {"type": "str", "default": "root"},
        },
        supports_check_mode=True,
    )
    try:
        uid = pwd.getpwnam(module.params["owner"]).pw_uid
        gid = grp.getgrnam(module.params["group"]).gr_gid
    except KeyError as err:
        module.fail_json(msg=f"no such owner or group: {err}")
    wanted: list[Wanted] = []
    for index, item in enumerate(module.params["files"]):
        missing = [key for key in ("dest", "content", "mode") if item.get(key) is None]
        if missing:
            module.fail_json(msg=f"files[{index}] has no {', '.join(missing)}")
        wanted.append(
            Wanted(
                dest=str(item["dest"]),
                content=str(item["content"]).encode("utf-8"),
                mode=int(str(item["mode"]), 8),
                validate=item.get("validate") or None,
                mkdir=bool(item.get("mkdir", False)),
                unsafe_writes=bool(item.get("unsafe_writes", False)),
            )
        )

    def validator(command: str) -> tuple[int, str]:
        rc, out, err = module.run_command(command, use_unsafe_shell=False)
        return rc, (err or out).strip()

    try:
        outcome = sync(wanted, uid, gid, module.check_mode, validator, diff=module._diff)
    except (HostFilesError, OSError) as err:
        module.fail_json(msg=str(err))
    result = {
        "changed": bool(outcome.changed or outcome.folders),
        "changed_paths": outcome.changed,
        "folders": outcome.folders,
        "files": len(wanted),
    }
    if module._diff and outcome.diffs:
        result["diff"] = outcome.diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
