"""The inventory's JSON Schema (schema_v1.json beside this file) and its check, in the house style.

The schema (draft 2020-12, ``$id`` .../inventory/v1.json) closes every ``gpucluster_*`` section
(unknown keys are errors, with a "did you mean" from the known keys) and types every value; strings
have the form of what they are (interface names, RFC 1123 host and domain names, absolute paths,
/dev paths, NTP servers), so none can carry a newline, a ';', a '$(' or a '..' into a file or a
command. Ranges and cross-field rules stay in the engine (site.py and the section modules).

Editors use the same file through yaml-language-server (docs/inventory.md). Loading it at import is,
as for catalog.yml, a read of package data with pkgutil, so it works from an installed collection.
"""

from __future__ import annotations

import difflib
import json
import math
import pkgutil
import re
from collections.abc import Iterable, Mapping
from typing import Any

try:
    import jsonschema
    import jsonschema.validators
    from jsonschema.exceptions import ValidationError
except ImportError as exc:  # a controller without jsonschema: check_inventory says so when it runs
    jsonschema = None
    ValidationError = Exception
    JSONSCHEMA_IMPORT_ERROR: ImportError | None = exc
else:
    JSONSCHEMA_IMPORT_ERROR = None

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError

SCHEMA_FILE = "schema_v1.json"
_data = pkgutil.get_data(__name__, SCHEMA_FILE)
if _data is None:  # pragma: no cover - package data missing from a broken install
    raise ImportError(f"{SCHEMA_FILE} missing beside {__name__}")
SCHEMA: dict[str, Any] = json.loads(_data)
SCHEMA_ID: str = SCHEMA["$id"]


def _python_pattern(pattern: str) -> str:
    """A schema pattern with ECMA-262's ``$`` (end of the string) for Python's re, whose ``$`` also
    matches before a final newline: ``"pool.ntp.org\n"`` must not pass ``^...$``. Every unescaped
    ``$`` (the last one and those inside look-aheads such as ``(/|$)``) becomes ``\\Z``."""
    return re.sub(r"(?<!\\)\$", r"\\Z", pattern)


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterable[ValidationError]:
    if validator.is_type(instance, "string") and not re.search(_python_pattern(pattern), instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_VALIDATOR = (
    jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _pattern})(SCHEMA) if jsonschema else None
)

#: Variables that match ``gpucluster_*`` but are results, not inventory: facts and registered
#: values the collection's own playbooks and modules set (gpu_facts, validate.yml). A fact cache can
#: hold them for localhost, so the plan task may see them; they are not checked.
RUNTIME_NAMES = frozenset({"gpucluster_gpus", "gpucluster_validate_results", "gpucluster_validate_cluster"})

_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "nothing (null)",
}
_NUMBER_WITH_UNIT = re.compile(r"^\s*[-+]?[0-9]+(\.[0-9]+)?\s*[A-Za-z%/]+\s*\Z")
_NUMBER_TEXT = re.compile(r"^\s*[-+]?[0-9]+(\.[0-9]+)?\s*\Z")
#: Characters no inventory string may hold, whatever its field (one rule, checked before the schema):
#: C0 and C1 controls (newline, tab, escape, NEL...), DEL, and the Unicode line and paragraph
#: separators. A newline in a host name, an NQN or a mount option splits the line of /etc/hosts, a
#: systemd unit or slurm.conf it lands in.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHOWN = 80  # characters of a bad value shown in a message (a 5,000-character name is cut)


def field_path(path: Iterable[Any]) -> str:
    """``["gpucluster_node", "nics", 3, "netdev"]`` -> ``gpucluster_node.nics[3].netdev``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "gpucluster_*"


def _shown(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _SHOWN:
        return f"{value[:_SHOWN]}... ({len(value)} characters)"
    return value


def _types(schema: dict[str, Any]) -> str:
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    return " or ".join(_TYPE_WORDS.get(k, k) for k in kinds)


def _did_you_mean(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _plan_error(error: ValidationError) -> PlanError:
    """One schema error as a PlanError naming the field, the value and what is allowed."""
    path = list(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties":
        known = sorted(schema.get("properties") or {})
        unknown = sorted(k for k in error.instance if k not in known)
        key = unknown[0]
        where = field_path(path) if path else "the inventory"
        return PlanError(
            field_path([*path, key]),
            key,  # the key is what is wrong (its value may be a whole section)
            f"no such key in {where}; known keys: {', '.join(known)}{_did_you_mean(key, known)}",
        )
    if error.validator == "required":
        missing = [k for k in error.validator_value if not isinstance(error.instance, dict) or k not in error.instance]
        key = missing[0] if missing else "?"
        what = _described([*path, key])
        return PlanError(
            field_path([*path, key]),
            None,
            f"a value: the key {key} is missing from {field_path(path)}{' (' + what + ')' if what else ''}",
        )
    value = _shown(error.instance)
    field = field_path(path)
    if error.validator == "type":
        allowed = _types(schema)
        described = str(schema.get("description") or "")
        if described:
            allowed = described if described.startswith(allowed) else f"{allowed}: {described}"
        if isinstance(error.instance, str) and schema.get("type") in ("number", "integer"):
            if _NUMBER_WITH_UNIT.match(error.instance):
                number = re.match(r"\s*[-+]?[0-9.]+", error.instance).group(0).strip()  # type: ignore[union-attr]
                allowed += f" without a unit or quotes (write {number}, not '{error.instance.strip()}')"
            elif _NUMBER_TEXT.match(error.instance):
                allowed += f" (write {error.instance.strip()} without quotes)"
        return PlanError(field, value, allowed)
    allowed = schema.get("description") or error.message
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") and not schema.get(
        "description"
    ):
        allowed = error.message
    return PlanError(field, value, allowed)


def _order(error: ValidationError) -> tuple[int, str]:
    # the first error in document order, an unknown key before the values inside it
    return (0 if error.validator == "additionalProperties" else 1, field_path(error.absolute_path))


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        target = SCHEMA["$defs"][schema["$ref"].rsplit("/", 1)[1]]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _described(path: list[Any]) -> str:
    """What the schema says a field is (its description), or "" when it says nothing."""
    schema: Any = SCHEMA
    for step in path:
        schema = _resolve(schema)
        schema = schema.get("items") if isinstance(step, int) else (schema.get("properties") or {}).get(step)
        if not isinstance(schema, dict):
            return ""
    return str(_resolve(schema).get("description") or "")


def _control_or_non_finite(value: Any, path: list[Any]) -> PlanError | None:
    """The first string (value or key) with a control character, or number that is not finite, in
    ``value``, as a PlanError naming its field; None when there is none."""
    if isinstance(value, str):
        found = _CONTROL.search(value)
        if found:
            what = _described(path)
            return PlanError(
                field_path(path),
                _shown(value),
                f"{what + ', ' if what else ''}without control characters (found {found.group(0)!r} at position"
                f" {found.start()}: a newline, tab or escape would split the line of the file it is written to)",
            )
    elif isinstance(value, float) and not math.isfinite(value):
        what = _described(path)
        return PlanError(
            field_path(path),
            value,
            f"{what + ': ' if what else ''}a finite number (.nan, .inf and -.inf are not values a plan can compare"
            " or write)",
        )
    elif isinstance(value, dict):
        for key, sub in value.items():
            if isinstance(key, str) and _CONTROL.search(key):
                return PlanError(field_path([*path, key]), key, "a key without control characters")
            error = _control_or_non_finite(sub, [*path, key])
            if error:
                return error
    elif isinstance(value, (list, tuple)):
        for i, sub in enumerate(value):
            error = _control_or_non_finite(sub, [*path, i])
            if error:
                return error
    return None


def check_text_and_numbers(data: Any, path: list[Any] | None = None) -> None:
    """One rule for every field: no string holds a control character and every number is finite
    (NaN passes every range check, since each comparison with it is false)."""
    error = _control_or_non_finite(data, list(path or []))
    if error:
        raise error


def check_inventory(raw: Mapping[str, object]) -> None:
    """Raise PlanError for the first place ``raw`` (the ``gpucluster_*`` variables) breaks the schema:
    first a control character in any string or a non-finite number anywhere, then the schema."""
    check_text_and_numbers({k: v for k, v in raw.items() if k not in RUNTIME_NAMES})
    if _VALIDATOR is None:  # declared in pyproject.toml and execution-environment.yml
        raise ImportError("the inventory check needs the Python package jsonschema on the controller") from (
            JSONSCHEMA_IMPORT_ERROR
        )
    data = {k: v for k, v in raw.items() if k not in RUNTIME_NAMES}
    errors = sorted(_VALIDATOR.iter_errors(data), key=_order)
    if errors:
        raise _plan_error(errors[0])


def known_keys(schema: dict[str, Any] | None = None, prefix: str = "") -> set[str]:
    """Every key path the schema knows (``gpucluster_node.nics[].netdev``), for docs and tests."""
    schema = SCHEMA if schema is None else schema
    if "$ref" in schema:
        schema = SCHEMA["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    out: set[str] = set()
    for key, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{key}" if prefix else key
        out.add(path)
        out |= known_keys(sub, path)
    if isinstance(schema.get("items"), dict):
        out |= known_keys(schema["items"], f"{prefix}[]")
    return out


__all__ = [
    "RUNTIME_NAMES",
    "SCHEMA",
    "SCHEMA_ID",
    "check_inventory",
    "check_text_and_numbers",
    "field_path",
    "known_keys",
]
