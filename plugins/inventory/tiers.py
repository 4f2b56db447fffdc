# Copyright: gpucluster.tiers developers
# Apache License 2.0 (see LICENSE)
"""Inventory plugin: the reference tiers by name (``ansible-playbook site.yml -i tier3``)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: tiers
short_description: The collection's reference inventories by name (C(-i tier3))
version_added: 0.1.0
description:
  - Reads one of the reference inventories (C(inventories/tier1) ... C(inventories/tier4),
    C(inventories/tier4-k8s)) when an inventory source is just its name, so that
    C(ansible-playbook site.yml -i tier3) plans and configures tier3.
  - It takes only sources that name no existing file or folder and look like a tier
    (C(tier) and a digit). The name is looked up in C(inventories/) under the current directory,
    then beside the collection itself (the repository, which the collection is in place, or the installed
    collection, whose tarball carries C(inventories/)).
  - A name that is no known tier fails with a message that names the source given and the known
    tiers (with C(unparsed_is_failed), as this project's C(ansible.cfg) sets, the run stops there).
  - Reads the folder as Ansible reads an inventory folder given by path - C(hosts.yml), then
    C(group_vars/<group>.yml) or C(group_vars/<group>/*.yml) and C(host_vars) alike.
  - Every file it reads (C(hosts.yml), C(group_vars/), C(host_vars/)) is first read as YAML parser events, and a
    file nested more than 256 levels deep or with more than 10,000 aliases stops the run naming the file, the
    line and the limit (libyaml itself stops at 1,000 levels naming neither); the same for a YAML inventory file
    the yaml plugin refused. For an inventory given by path, the vars plugin C(gpucluster.tiers.yaml_limits)
    checks its C(group_vars/) and C(host_vars/).
  - Enable it in C(ansible.cfg), after the built-in plugins - C([inventory] enable_plugins).
author:
  - gpucluster.tiers developers (!UNKNOWN)
options: {}
"""

EXAMPLES = r"""
# ansible.cfg
#   [inventory]
#   enable_plugins = host_list, script, yaml, auto, ini, toml, gpucluster.tiers.tiers
#
# then, from the repository root:
#   ansible-playbook site.yml -i tier3
#   ansible-playbook playbooks/plan.yml -i tier4-k8s
# or anywhere, with the collection installed (README.md, "Quick start with the collection tarball"):
#   ansible-playbook gpucluster.tiers.plan -i tier3
# Without the enable_plugins line, -i tier3 finds no inventory and the plan stops saying which line to add.
"""

import inspect  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)
import os  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)
import re  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)
from pathlib import Path  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)

from ansible.errors import AnsibleParserError  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)
from ansible.parsing.dataloader import DataLoader  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)
from ansible.plugins.inventory import BaseInventoryPlugin  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)
from ansible.plugins.loader import inventory_loader  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)

#: what a tier's name looks like (tier1, tier4-k8s); other missing paths are left to Ansible
TIER_NAME = re.compile(r"tier\d[A-Za-z0-9_-]*")
#: the collection's root: plugins/inventory/tiers.py -> ../../
COLLECTION_ROOT = Path(__file__).resolve().parents[2]
VAR_SUFFIXES = (".yml", ".yaml", ".json")
#: group_vars and host_vars read as ansible.builtin.host_group_vars reads them: unsafe, and on
#: ansible-core >= 2.19 trusted as templates (older releases have no such option)
LOAD_OPTIONS: dict[str, bool] = {"unsafe": True}
if "trusted_as_template" in inspect.signature(DataLoader.load_from_file).parameters:
    LOAD_OPTIONS["trusted_as_template"] = True


def known_tiers(*roots: Path) -> dict[str, Path]:
    """Tier name -> its inventory folder (a folder of inventories/ that holds hosts.yml), first root first."""
    found: dict[str, Path] = {}
    for root in roots:
        folder = root / "inventories"
        if folder.is_dir():
            for child in sorted(folder.iterdir()):
                if (child / "hosts.yml").is_file():
                    found.setdefault(child.name, child)
    return found


def _var_files(base: Path, name: str) -> list[Path]:
    """group_vars/<name>.yml or group_vars/<name>/*.yml (sorted), as host_group_vars reads them."""
    files = [base / f"{name}{suffix}" for suffix in ("", *VAR_SUFFIXES) if (base / f"{name}{suffix}").is_file()]
    folder = base / name
    if folder.is_dir():
        files += sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in VAR_SUFFIXES)
    return files


def check_yaml_files(places: list[Path], error: type[Exception] = AnsibleParserError) -> None:
    """Raise ``error`` naming the file, the line and the limit for the first YAML file of ``places`` (files, or
    folders read recursively as host_group_vars reads them: .yml, .yaml, .json or no suffix, hidden ones
    skipped) that nests deeper or holds more aliases than trust.py's file limits, before Ansible loads it."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.trust import (
        yaml_limit_message,
        yaml_limits,
    )

    for place in places:
        if place.is_file():
            files = [place]
        elif place.is_dir():
            files = sorted(
                p
                for p in place.rglob("*")
                if p.is_file()
                and p.suffix in ("", *VAR_SUFFIXES)
                and not any(part.startswith(".") for part in p.relative_to(place).parts)
            )
        else:
            continue
        for file in files:
            with open(file, "rb") as handle:  # streamed: a large file is never held whole
                found = yaml_limits(handle)  # yaml.parse reads a binary stream as well as text
            if found:
                raise error(yaml_limit_message(str(file), *found))


def _too_deep(path: str) -> bool:
    """A YAML inventory file over trust.py's file limits (the yaml plugin refused it with libyaml's message)."""
    if not path.endswith((".yml", ".yaml")) or not os.path.isfile(path):
        return False
    try:
        check_yaml_files([Path(path)])
    except AnsibleParserError:
        return True
    return False


def _coerced_hosts(path: str) -> list[tuple[str, int, str]]:
    """Host names of a YAML inventory file YAML reads as no name (``yes:``, ``null:``, ``010:``): this plugin
    comes after the yaml plugin (ansible.cfg), so it is asked only for a file the yaml plugin refused."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.trust import coerced_host_names

    if not path.endswith((".yml", ".yaml")) or not os.path.isfile(path) or os.path.getsize(path) > 16 * 1024 * 1024:
        return []
    with open(path, encoding="utf-8", errors="replace") as handle:
        return coerced_host_names(handle.read())


class InventoryModule(BaseInventoryPlugin):
    """Reads inventories/<tier> for a source that is a tier's name."""

    NAME = "gpucluster.tiers.tiers"

    def verify_file(self, path: str) -> bool:
        name = os.path.basename(os.path.normpath(path))
        return (
            (not os.path.exists(path) and bool(TIER_NAME.fullmatch(name)))
            or bool(_coerced_hosts(path))
            or _too_deep(path)
        )

    def parse(self, inventory, loader, path, cache=True):  # type: ignore[no-untyped-def]
        super().parse(inventory, loader, path, cache=cache)
        if os.path.isfile(path):  # the yaml plugin refused it: too deep (libyaml names no file), or a coerced host
            check_yaml_files([Path(path)])
        coerced = _coerced_hosts(path)
        if coerced:  # the yaml plugin refused this file ("Host pattern True must be a string"): name the host
            raise AnsibleParserError(
                "; ".join(
                    f"{path}:{line}: host name {name} is read by YAML as {reading}, not as a name: quote it "
                    f'("{name}":) or rename the host (a host name is lowercase letters, digits and -)'
                    for name, line, reading in coerced
                )
            )
        name = os.path.basename(os.path.normpath(path))
        tiers = known_tiers(Path.cwd(), COLLECTION_ROOT)
        folder = tiers.get(name)
        if folder is None:
            raise AnsibleParserError(
                f"inventory source {path!r} is neither a file, a folder nor a reference tier; "
                f"known tiers: {', '.join(sorted(tiers)) or 'none (no inventories/ folder found)'}"
            )
        # every file this plugin loads, checked for nesting and aliases before any is loaded
        check_yaml_files([folder / "hosts.yml", folder / "group_vars", folder / "host_vars"])
        yaml_plugin = inventory_loader.get("ansible.builtin.yaml")
        yaml_plugin.parse(inventory, loader, str(folder / "hosts.yml"), cache=False)
        for kind, names in (("group_vars", list(inventory.groups)), ("host_vars", list(inventory.hosts))):
            for entity in names:
                for var_file in _var_files(folder / kind, entity):
                    data = loader.load_from_file(str(var_file), **LOAD_OPTIONS) or {}
                    if not isinstance(data, dict):
                        kind_of = type(data).__name__
                        raise AnsibleParserError(f"{var_file}: expected a mapping of variables, got {kind_of}")
                    for key, value in data.items():
                        inventory.set_variable(entity, key, value)
