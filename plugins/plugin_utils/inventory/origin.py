"""Where an inventory value was set: the file (and line) an error message names.

ansible-core 2.19 tags each value it loads from a YAML file with its origin (file, line); the error of a
bad value names the file a user has to open. The tag is read through plugin_utils/ansible_compat.py (a
private ansible-core API); without it (another ansible-core, a value from extra vars or a plan's
defaults) nothing is added.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat


def origin(field: str, sources: Iterable[Any]) -> str:
    """Where the inventory value at the dotted ``field`` was set: `` (set in <file>:<line>)``, or "".

    The deepest tagged value along the field's path, in the first of ``sources`` that has one, names the
    file; values that come from elsewhere carry no file: nothing is added."""
    found: tuple[str, int | None] | None = None
    parts = re.findall(r"[^.\[\]]+", field)
    for source in sources:
        node = source
        for part in parts:
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                break
            tag = ansible_compat.origin_of(node)
            if tag is not None:
                found = tag
        if found is not None:
            break
    if found is None:
        return ""
    path, line = found
    return f" (set in {path}{f':{line}' if line else ''})"


def origin_path(value: object) -> str | None:
    """The file ansible-core read ``value`` from (real path), or None."""
    tag = ansible_compat.origin_of(value)
    return os.path.realpath(tag[0]) if tag is not None else None
