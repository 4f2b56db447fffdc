"""Render many role templates for one host on the controller, in-process.

``make plan`` renders every file the roles will install, per host, with the same
template engine and options as ``ansible.builtin.template`` (trim_blocks, "\\n"), but
writes them under a local folder without a module round trip per file: a tier4 plan
renders ~300 files in seconds instead of minutes. No host is contacted.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat


def _inside(root: str, relative: str) -> str:
    """``relative`` joined under ``root``; refuse a destination that resolves outside it.

    A file name comes from the plan (a NIC's netdev, a unit name): ``x/../../tmp/somewhere`` must not
    make a controller run write outside the output root, whatever the inventory checks let through.
    Symbolic links are resolved (realpath), so a link inside the root cannot lead out either.
    """
    base = os.path.realpath(root)
    dest = os.path.realpath(os.path.join(base, str(relative).lstrip("/")))
    if os.path.commonpath([base, dest]) != base or dest == base:
        raise AnsibleActionFail(
            f"render_files: destination {relative!r} resolves to {dest}, outside the output root {base}; "
            "refusing to write it (a file name in the plan has '..' or a link out of the root)"
        )
    return dest


def source_path(template_root: str, item: dict[str, Any]) -> str:
    """Where a manifest entry's source is: ``<role>/templates/<src>``, or ``<role>/files/<src>`` for
    an entry with ``static`` (a file such as a program: sent as is, as ansible.builtin.copy would)."""
    return os.path.join(template_root, item["role"], "files" if item.get("static") else "templates", item["src"])


def render(action: ActionBase, task_vars: dict[str, Any], item: dict[str, Any], source: str) -> str:
    """One manifest entry's template rendered for the host, as ansible.builtin.template would.

    The host's variables plus ``item`` (the entry: a per-unit file reads ``item.unit``) and the
    template variables (ansible_managed, template_path, ...); trim_blocks on, backslashes kept.
    An entry with ``static`` is the file's text as is (not a template). Shared by this action (make
    plan) and gpucluster.tiers.host_files (the roles), so what a host gets is what make plan shows,
    byte for byte.
    """
    if not os.path.isfile(source):
        raise AnsibleActionFail(f"no {'file' if item.get('static') else 'template'} {source}")
    if ansible_compat.LEGACY_TEMPLAR:
        return _render_legacy(action, task_vars, item, source)
    if item.get("static"):
        return action._loader.get_text_file_contents(source)
    data = ansible_compat.trust_as_template(action._loader.get_text_file_contents(source))
    variables = dict(task_vars)
    variables["item"] = item
    variables.update(ansible_compat.template_file_variables(item["src"], source, item["dest"]))
    return ansible_compat.render_template(action._templar, data, os.path.dirname(source), variables)


#: play variables the templates read many times each: their expression (the host's view of the plan,
#: site.yml's ``gpucluster_host_plan: "{{ hostvars | gpucluster.tiers.host_plan(...) }}"``)
VIEW_VARIABLES = ("gpucluster_host_plan",)


class _Resolved(dict):  # type: ignore[type-arg]
    """A variable's value templated once; ``__UNSAFE__``: ansible-core 2.16-2.18 read it as is."""

    __UNSAFE__ = True


def template_variables(action: ActionBase, task_vars: dict[str, Any]) -> dict[str, Any]:
    """The task's variables for :func:`render`, once per task.

    ansible-core 2.16-2.18 template a play variable's expression on every read: a role template that
    reads ``gpucluster_host_plan`` ten times would compute the host's view ten times (make plan three
    times slower than on 2.19). There it is computed once here; 2.19 gets the variables unchanged."""
    if not ansible_compat.LEGACY_TEMPLAR:
        return task_vars
    variables = dict(task_vars)
    for name in VIEW_VARIABLES:
        value = variables.get(name)
        if isinstance(value, str) and "{{" in value:
            resolved = ansible_compat.template_value(action._templar, value, task_vars)
            if isinstance(resolved, dict):
                variables[name] = _Resolved(resolved)
    return variables


def _render_legacy(action: ActionBase, task_vars: dict[str, Any], item: dict[str, Any], source: str) -> str:
    """:func:`render` on ansible-core 2.16-2.18, as their ansible.builtin.template action renders."""
    with open(action._loader.get_real_file(source), "rb") as handle:
        data = handle.read().decode("utf-8")
    if item.get("static"):
        return data
    variables = dict(task_vars)
    variables["item"] = item
    variables.update(ansible_compat.template_file_variables(item["src"], source, item["dest"]))
    return ansible_compat.render_template(action._templar, data, os.path.dirname(source), variables)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        files = self._task.args.get("files") or []
        root = self._task.args.get("dest_root")
        template_root = self._task.args.get("template_root")
        if not root or not template_root:
            raise AnsibleActionFail("dest_root and template_root are required")
        changed: list[str] = []
        checksums: dict[str, str] = {}
        task_vars = template_variables(self, task_vars)
        for item in files:
            source = source_path(template_root, item)
            dest = _inside(root, item["dest"])
            content = render(self, task_vars, item, source).encode("utf-8")
            checksums[item["dest"]] = hashlib.sha256(content).hexdigest()
            try:
                with open(dest, "rb") as handle:
                    if handle.read() == content:
                        continue
            except FileNotFoundError:
                pass
            changed.append(item["dest"])
            if not self._task.check_mode:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as handle:
                    handle.write(content)
        result.update(changed=bool(changed), rendered=len(files), written=changed, checksums=checksums)
        return result
