"""The plan's file list and the roles' template tasks name the same templates and paths.

make plan renders each host's files from the manifest; the roles install them with their
own tasks. This test keeps the two from drifting apart.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.gpucluster.tiers.plugins.module_utils.plan import FILES

ROOT = Path(__file__).resolve().parents[2]


def _tasks(items: list[dict]) -> list[dict]:
    out = []
    for task in items or []:
        out.append(task)
        out += _tasks(task.get("block", [])) + _tasks(task.get("rescue", [])) + _tasks(task.get("always", []))
    return out


def _role_templates() -> set[tuple[str, str, str]]:
    found = set()
    for tasks in ROOT.glob("roles/*/tasks/*.yml"):
        role = tasks.parts[-3]
        for task in _tasks(yaml.safe_load(tasks.read_text())):
            spec = task.get("ansible.builtin.template")
            if spec and "{{" not in str(spec["dest"]):
                found.add((role, spec["src"], spec["dest"]))
    return found


def test_every_manifest_file_is_installed_by_its_role() -> None:
    roles_present = {p.name for p in (ROOT / "roles").iterdir()}
    templates = _role_templates()
    for f in FILES:
        if f["role"] not in roles_present or not (ROOT / "roles" / f["role"] / "tasks").exists():
            continue  # that role's tasks are not written yet; its templates still render in make plan
        assert (f["role"], f["src"], f["dest"]) in templates, f


def test_every_manifest_template_exists() -> None:
    for f in FILES:
        assert (ROOT / "roles" / f["role"] / "templates" / f["src"]).is_file(), f
