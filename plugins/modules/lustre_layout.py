#!/usr/bin/python
"""Apply a planned PFL layout to a Lustre directory, only when its default layout differs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: lustre_layout
short_description: Set a Lustre directory's default (PFL) layout idempotently
version_added: 0.1.0
description:
  - Reads the directory's default layout with C(lfs getstripe -d --yaml DIR), compares it with the
    wanted components (extent start and end, stripe count, stripe size, Data-on-MDT, pool when
    given) and runs C(lfs setstripe) only when they differ. A matching layout is left alone.
  - The C(lfs setstripe) options come from the planning engine (C(lustre.setstripe_args)), so the
    command is the one C(make plan) shows in C(plan.json).
  - After C(lfs setstripe) the layout is read again; the module fails when Lustre reports
    something other than what was asked.
options:
  path:
    description: Directory on a mounted Lustre file system.
    type: path
    required: true
  components:
    description:
      - The layout, first component first; items of C(gpucluster_host_plan.storage.lustre.layouts.<role>.components).
      - Each item has C(end) (bytes, C(-1) = end of file), C(stripe_count) (C(-1) = all OSTs),
        C(stripe_size) (bytes, a multiple of 64 KiB), C(layout) (C(raid0) or C(mdt) for
        Data-on-MDT, first component only) and optionally C(pool).
    type: list
    elements: dict
    required: true
  create:
    description: Create the directory (and its parents) when it is missing; otherwise a missing directory fails.
    type: bool
    default: false
  lfs:
    description: The C(lfs) command (a name looked up in PATH, or a full path).
    type: str
    default: lfs
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
notes:
  - C(lfs setstripe) on a directory replaces its default layout; files that already exist keep theirs.
extends_documentation_fragment:
  - gpucluster.tiers.attributes
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Checkpoint directory layout from the plan
  gpucluster.tiers.lustre_layout:
    path: "{{ item.value.path }}"
    components: "{{ item.value.components }}"
    create: true
  loop: "{{ gpucluster_host_plan.storage.lustre.layouts | dict2items }}"
  loop_control:
    label: "{{ item.key }}"
"""

RETURN = r"""
before:
  description: The directory's default layout before the task (null when it had none or did not exist).
  returned: always
  type: list
  elements: dict
after:
  description: The wanted layout (start, end, stripe_count, stripe_size, layout, pool per component).
  returned: always
  type: list
  elements: dict
differences:
  description: Why the layout was changed (empty when it already matched).
  returned: always
  type: list
  elements: str
command:
  description: The C(lfs setstripe) command run (or that would run in check mode); null when nothing to do.
  returned: always
  type: list
  elements: str
created:
  description: Whether the directory was (or in check mode would be) created.
  returned: always
  type: bool
"""

import os  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils.lustre_yaml import (  # noqa: E402
    LayoutError,
    differences,
    layout_text,
    normalize_wanted,
    parse_getstripe_yaml,
    setstripe_argv,
)


def _lfs(module: AnsibleModule) -> str:
    name = module.params["lfs"]
    if os.path.sep in name:
        if not os.access(name, os.X_OK):
            module.fail_json(msg=f"lfs command {name} is missing or not executable (option lfs)")
        return name
    return module.get_bin_path(name, required=True)


def _read_layout(module: AnsibleModule, lfs: str, path: str) -> list[dict[str, Any]] | None:
    rc, out, err = module.run_command([lfs, "getstripe", "-d", "--yaml", path])
    if rc != 0:
        module.fail_json(msg=f"lfs getstripe -d --yaml {path} failed (rc {rc}): {err.strip() or out.strip()}")
    try:
        return parse_getstripe_yaml(out)
    except LayoutError as exc:
        module.fail_json(msg=f"cannot read the layout of {path}: {exc}", stdout=out)
    return None  # not reached


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "components": {"type": "list", "elements": "dict", "required": True},
            "create": {"type": "bool", "default": False},
            "lfs": {"type": "str", "default": "lfs"},
        },
        supports_check_mode=True,
    )
    path = module.params["path"]
    try:
        wanted = normalize_wanted(module.params["components"])
    except LayoutError as exc:
        module.fail_json(msg=f"bad components for {path}: {exc}")
    result: dict[str, Any] = {"changed": False, "path": path, "after": wanted, "command": None, "created": False}
    lfs = _lfs(module)

    if os.path.exists(path) and not os.path.isdir(path):
        module.fail_json(msg=f"{path} exists and is not a directory", **result)
    if not os.path.isdir(path):
        if not module.params["create"]:
            module.fail_json(msg=f"directory {path} does not exist (set create: true to create it)", **result)
        result["created"] = True
        if not module.check_mode:
            os.makedirs(path, mode=0o755)

    if module.check_mode and result["created"]:
        before, why = None, ["the directory does not exist"]
    else:
        before = _read_layout(module, lfs, path)
        why = differences(before, wanted)
    result.update(before=before, differences=why, changed=bool(why) or result["created"])
    if why:
        argv = [lfs, "setstripe", *setstripe_argv(wanted), path]
        result["command"] = argv
        if not module.check_mode:
            rc, out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(msg=f"{' '.join(argv)} failed (rc {rc}): {err.strip() or out.strip()}", **result)
            left = differences(_read_layout(module, lfs, path), wanted)
            if left:
                module.fail_json(msg=f"after lfs setstripe, {path} still differs: {'; '.join(left)}", **result)
    if module._diff and result["changed"]:
        result["diff"] = {
            "before": layout_text(before),
            "after": layout_text(wanted),
            "before_header": f"{path} (default layout)",
            "after_header": f"{path} (default layout)",
        }
    module.exit_json(**result)


if __name__ == "__main__":
    main()
