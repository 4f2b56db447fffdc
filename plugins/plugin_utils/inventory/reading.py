"""Reading an inventory and the roles' file lists from disk: the plan's inputs outside Ansible.

The engine does no I/O: what it plans from is read here. The plan play gets the site's variables and
groups from Ansible's inventory (filter and action ``cluster_plan``); tools and tests that plan an
inventory folder without Ansible (docs/settings.md, the benchmarks, make compat) read it with
:func:`read_inventory`. Both pass the roles' file lists (:func:`role_files`) to the engine, which checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

#: The collection's root (this file is plugins/plugin_utils/inventory/reading.py), in the repository and installed.
COLLECTION_ROOT = Path(__file__).resolve().parents[3]


def role_files(root: Path = COLLECTION_ROOT) -> dict[str, Any]:
    """Each role's file list: ``roles/<role>/vars/files.yml``, key ``<role>_files``, roles by name.

    The engine does no I/O: the lists are read here and passed to cluster_plan, which checks them."""
    out: dict[str, Any] = {}
    for path in sorted(root.glob("roles/*/vars/files.yml")):
        role = path.parent.parent.name
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        out[role] = data.get(f"{role}_files") if isinstance(data, Mapping) else data
    return out


def inventory_groups(node: Mapping[str, Any] | None, name: str = "all") -> dict[str, list[str]]:
    """Every group of a YAML inventory's group ``node`` (``hosts``, ``children``), with its hosts and
    those of its children, sorted: the ``groups`` the plan play sees (without ``ungrouped``)."""
    groups: dict[str, list[str]] = {}

    def collect(group: str, sub: Mapping[str, Any] | None) -> list[str]:
        sub = sub or {}
        hosts = list((sub.get("hosts") or {}).keys())
        for child, child_node in (sub.get("children") or {}).items():
            hosts += collect(str(child), child_node)
        groups[group] = sorted(set(hosts))
        return groups[group]

    collect(name, node)
    return groups


def read_inventory(base: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(gpucluster_* and other variables of group all, groups) of a YAML inventory folder such as
    inventories/tier3: ``group_vars/all/*.yml`` merged in name order, and ``hosts.yml``'s groups.

    For tools and tests that plan an inventory without Ansible (docs/settings.md, the benchmarks); the
    plan play gets the same from Ansible's inventory."""
    site: dict[str, Any] = {}
    for path in sorted((base / "group_vars" / "all").glob("*.yml")):
        site.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    hosts = yaml.safe_load((base / "hosts.yml").read_text(encoding="utf-8"))
    return site, inventory_groups(hosts["all"])


def site_variables(site_vars: Mapping[str, Any]) -> dict[str, Any]:
    """The site's data among a host's variables: the gpucluster_* ones, without a run's switches and results
    (``site.RUN_PREFIXES``: the plan ``gpucluster_plan``, a host's slice ``gpucluster_host_plan``, the lock
    and shutdown switches), which are not site data. The values are the variables' own (not converted)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import RUN_PREFIXES

    return {
        k: v for k, v in site_vars.items() if str(k).startswith("gpucluster_") and not str(k).startswith(RUN_PREFIXES)
    }
