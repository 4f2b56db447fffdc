# Copyright: gpucluster.tiers developers
# Apache License 2.0 (see LICENSE)
"""Vars plugin: an inventory's group_vars and host_vars checked for YAML nesting and aliases before they load."""

from __future__ import annotations

DOCUMENTATION = r"""
name: yaml_limits
short_description: Checks an inventory's group_vars and host_vars YAML for nesting and aliases before they load
version_added: 0.1.0
description:
  - Reads every file of C(group_vars/) and C(host_vars/) beside an inventory source (and beside the playbook)
    as YAML parser events - one pass, nothing constructed, no alias expanded - and stops the run with the
    file, the line and the limit when a file nests mappings and lists more than 256 levels deep or uses more
    than 10,000 aliases. libyaml itself stops at 1,000 levels with a message that names no file or line.
  - Provides no variables. Enable it before C(host_group_vars), which loads those files, in C(ansible.cfg) -
    C([defaults] vars_plugins_enabled = gpucluster.tiers.yaml_limits, host_group_vars).
  - The limits and why - C(docs/security.md), "Inventory trust".
author:
  - gpucluster.tiers developers (!UNKNOWN)
options: {}
"""

EXAMPLES = r"""
# ansible.cfg
#   [defaults]
#   vars_plugins_enabled = gpucluster.tiers.yaml_limits, host_group_vars
"""

from pathlib import Path  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)

from ansible.errors import AnsibleParserError  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)
from ansible.plugins.vars import BaseVarsPlugin  # noqa: E402 (after DOCUMENTATION, as ansible-doc expects)

from ansible_collections.gpucluster.tiers.plugins.inventory.tiers import (  # noqa: E402 (after DOCUMENTATION)
    check_yaml_files,
)

#: folders already checked in this run (every host and group asks again; the files do not change in a run)
_CHECKED: set[str] = set()


class VarsModule(BaseVarsPlugin):
    """Checks ``<path>/group_vars`` and ``<path>/host_vars``; returns no variables."""

    #: One instance for the run: ansible-core caches a stateless vars plugin; any other is looked up by its
    #: name again (the collection's plugin path resolved) and made anew for each host and group it is asked
    #: about: 0.8 s of the inventory's load at 17,410 hosts (docs/performance.md). The folders checked are
    #: kept at module level (``_CHECKED``), not on the instance.
    is_stateless = True

    def get_vars(self, loader, path, entities, cache=True):  # type: ignore[no-untyped-def]
        super().get_vars(loader, path, entities)
        if path not in _CHECKED:
            folder = Path(path)
            check_yaml_files([folder / "group_vars", folder / "host_vars"], AnsibleParserError)
            _CHECKED.add(path)
        return {}
