"""Write a role's files on a host with one module call (gpucluster.tiers.host_files).

The controller renders each manifest entry's template for the host with the renderer of
``make plan`` (render_files.render: the same bytes the plan shows), then calls the host_files
module ONCE with every file's content, mode, validate command and folder creation. The module
writes only what differs (sha256, mode, owner). The result's ``changed_files`` are the entries
that changed, so the calling task notifies the handlers of those files only.

An idempotent re-run costs one module call per host and role instead of one template call per
file (docs/performance.md).
"""

from __future__ import annotations

import os
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpucluster.tiers.plugins.action.render_files import render, source_path, template_variables
from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat

#: Fields of a manifest entry the module needs besides the content (the rest stays on the controller).
SENT = ("mode", "validate", "mkdir", "unsafe_writes")


def module_files(files: list[dict[str, Any]], contents: list[str], dest_dir: str | None = None) -> list[dict[str, Any]]:
    """The module's ``files``: each entry's destination (moved into ``dest_dir`` if set) and content."""
    out: list[dict[str, Any]] = []
    for item, content in zip(files, contents, strict=True):
        if not item.get("mode"):
            raise AnsibleActionFail(f"host_files: {item.get('dest')} has no mode in the plan's files manifest")
        dest = os.path.join(dest_dir, os.path.basename(item["dest"])) if dest_dir else item["dest"]
        sent = {key: item[key] for key in SENT if item.get(key) is not None}
        out.append({"dest": dest, "content": content, **sent})
    return out


def changed_entries(
    files: list[dict[str, Any]], sent: list[dict[str, Any]], changed_paths: list[str]
) -> list[dict[str, Any]]:
    """The manifest entries whose file changed, in manifest order (dest as written)."""
    changed = set(changed_paths)
    return [{**item, "dest": out["dest"]} for item, out in zip(files, sent, strict=True) if out["dest"] in changed]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        files = list(args.get("files") or [])
        template_root = args.get("template_root")
        if not template_root:
            role_path = ansible_compat.task_role_path(self._task)
            if role_path is None:
                raise AnsibleActionFail("host_files: template_root is required outside a role")
            template_root = os.path.dirname(role_path)
        for item in files:
            if not isinstance(item, dict) or not item.get("role") or not item.get("src") or not item.get("dest"):
                raise AnsibleActionFail(
                    f"host_files: each file needs role, src and dest (a plan manifest entry): {item!r}"
                )
        variables = template_variables(self, task_vars)
        contents = [render(self, variables, item, source_path(template_root, item)) for item in files]
        sent = module_files(files, contents, args.get("dest_dir"))
        module_args = {"files": sent}
        for key in ("owner", "group"):
            if args.get(key):
                module_args[key] = args[key]
        out = self._execute_module(
            module_name="gpucluster.tiers.host_files", module_args=module_args, task_vars=task_vars
        )
        out.pop("invocation", None)  # the files' content: not echoed back
        result.update(out)
        if result.get("failed"):
            return result
        result["changed_files"] = changed_entries(files, sent, out.get("changed_paths") or [])
        return result
