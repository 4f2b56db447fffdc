"""Typed reads of the inventory's raw sections, for the site model's readers (site.py, node.py).

The schema (schema.py) has checked every field's type before these run, so a read here narrows a raw value to
the type the schema gave it and returns the value itself (no conversion: the plan and its files keep what the
inventory wrote). A value of another type means a caller skipped the schema: the PlanError names its field.
A section a domain module checks itself is read as :data:`JsonValue` (free JSON), never as ``Any``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeGuard, TypeVar

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue

T = TypeVar("T")

#: The words of :class:`PlanError` for a value of the wrong type, by the type wanted.
_WANTED = {
    "number": "a number",
    "integer": "an integer",
    "text": "a string",
    "flag": "true or false",
    "mapping": "a mapping",
    "list": "a list",
    "json": "plain YAML values (mappings, lists, strings, numbers, true/false, null)",
}


def is_json(value: object) -> TypeGuard[JsonValue]:
    """Whether ``value`` is free JSON: None, a bool, number or string, or lists and string-keyed mappings of those."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, list):
        return all(is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json(v) for k, v in value.items())
    return False


def json_value(value: object, field: str) -> JsonValue:
    """``value`` (a section as written) as :data:`JsonValue`."""
    if not is_json(value):
        raise PlanError(field, type(value).__name__, _WANTED["json"])
    return value


def section(raw: Mapping[str, object], name: str, required: bool = True) -> dict[str, JsonValue]:
    """The mapping ``raw[name]`` (a copy); unset and not ``required``: empty."""
    value = raw.get(name)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise PlanError(name, value, "a mapping (see inventories/tier3/group_vars/all/ for an example)")
    return dict(json_mapping(value, name))


def json_mapping(value: object, field: str) -> dict[str, JsonValue]:
    """``value``, a mapping of free JSON."""
    checked = json_value(value, field)
    if not isinstance(checked, dict):
        raise PlanError(field, value, _WANTED["mapping"])
    return checked


def get(section: Mapping[str, JsonValue], prefix: str, key: str) -> JsonValue:
    """``section[key]``, required: unset or null is an error naming ``prefix.key``."""
    value = section.get(key)
    if value is None:
        raise PlanError(f"{prefix}.{key}", None, "a value is required here")
    return value


def text(section: Mapping[str, JsonValue], prefix: str, key: str, default: str | None = None) -> str:
    """``section[key]``, a string; unset or null: ``default`` (None: required)."""
    value = section.get(key)
    if value is None:
        if default is None:
            raise PlanError(f"{prefix}.{key}", None, "a value is required here")
        return default
    if not isinstance(value, str):
        raise PlanError(f"{prefix}.{key}", value, "a string")
    return value


def _typed(section: Mapping[str, JsonValue], field: str, key: str, kind: str) -> JsonValue:
    """``section[key]`` if it is of ``kind`` (or null), else a PlanError naming ``field.key``."""
    value = section.get(key)
    ok = {
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        # JSON Schema's integer: a number with no fraction (2.0 too)
        "integer": isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer(),
        "text": isinstance(value, str),
        "flag": isinstance(value, bool),
        "mapping": isinstance(value, dict),
        "list": isinstance(value, list),
    }[kind]
    if value is not None and not ok:
        raise PlanError(f"{field}.{key}", value, _WANTED[kind])
    return value


def opt_number(section: Mapping[str, JsonValue], field: str, key: str) -> float | None:
    """``section[key]``, a number, or None (unset or null)."""
    value = _typed(section, field, key, "number")
    return value if isinstance(value, (int, float)) else None


def opt_integer(section: Mapping[str, JsonValue], field: str, key: str) -> int | None:
    """``section[key]``, an integer, or None (unset or null)."""
    value = _typed(section, field, key, "integer")
    return value if isinstance(value, int) else int(value) if isinstance(value, float) else None


def opt_text(section: Mapping[str, JsonValue], field: str, key: str) -> str | None:
    """``section[key]``, a string, or None (unset or null)."""
    value = _typed(section, field, key, "text")
    return value if isinstance(value, str) else None


def opt_flag(section: Mapping[str, JsonValue], field: str, key: str) -> bool | None:
    """``section[key]``, true or false, or None (unset or null)."""
    value = _typed(section, field, key, "flag")
    return value if isinstance(value, bool) else None


def opt_mapping(section: Mapping[str, JsonValue], field: str, key: str) -> dict[str, JsonValue] | None:
    """``section[key]``, a mapping as written, or None (unset or null)."""
    value = _typed(section, field, key, "mapping")
    return value if isinstance(value, dict) else None


def opt_list(section: Mapping[str, JsonValue], field: str, key: str) -> list[JsonValue] | None:
    """``section[key]``, a list as written, or None (unset or null)."""
    value = _typed(section, field, key, "list")
    return value if isinstance(value, list) else None


def opt_texts(section: Mapping[str, JsonValue], field: str, key: str) -> list[str] | None:
    """``section[key]``, a list of strings, or None (unset or null)."""
    items = opt_list(section, field, key)
    if items is None:
        return None
    if not all(isinstance(item, str) for item in items):
        raise PlanError(f"{field}.{key}", items, "a list of strings")
    return [item for item in items if isinstance(item, str)]


def opt_mappings(section: Mapping[str, JsonValue], field: str, key: str) -> list[dict[str, JsonValue]] | None:
    """``section[key]``, a list of mappings as written, or None (unset or null)."""
    items = opt_list(section, field, key)
    if items is None:
        return None
    if not all(isinstance(item, dict) for item in items):
        raise PlanError(f"{field}.{key}", items, "a list of mappings")
    return [item for item in items if isinstance(item, dict)]


def given(value: T | None, default: T) -> T:
    """``value``, or ``default`` when it is None (a field unset or null keeps the model's default)."""
    return default if value is None else value
