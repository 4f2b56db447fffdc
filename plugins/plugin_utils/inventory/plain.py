"""Ansible's lazy and tagged containers as plain data, for the engine (used by filters and actions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def plain(value: Any) -> Any:
    """Ansible's lazy/tagged containers as plain dicts, lists, strings and numbers (a value Ansible tagged
    with its origin is a subclass of str, int or float, which yaml.safe_dump refuses). A new object
    for every container: no object twice in the result, which YAML would write as an anchor and alias."""
    if isinstance(value, Mapping):
        return {_text(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def _text(value: Any) -> str:
    """A plain str: ansible-core before 2.19 wraps text as AnsibleUnsafeText, whose ``__str__`` returns
    itself (``str(x)`` keeps the subclass); ``str.__str__`` gives the exact str in every release."""
    return str.__str__(value) if isinstance(value, str) else str(value)
