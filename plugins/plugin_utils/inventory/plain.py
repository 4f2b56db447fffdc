"""Ansible's lazy and tagged containers as plain data, for the engine (used by filters and actions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def plain(value: Any) -> Any:
    """Ansible's lazy/tagged containers as plain dicts, lists and strings."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value
