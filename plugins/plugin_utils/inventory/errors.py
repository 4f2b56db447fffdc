"""The one error type of the planning engine.

Every bad input raises :class:`PlanError`, naming the inventory field (a dotted path
such as ``gpucluster_fabric.roce.dscp``), the value found and what is allowed, so the
plan play can fail before any host is contacted with a message a user can act on.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal, overload


@dataclass
class PlanError(ValueError):
    """Bad inventory input: ``field`` had ``value``; ``allowed`` says what would do."""

    field: str
    value: Any
    allowed: str

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        return (
            f"inventory field '{self.field}': value {self.value!r} is not allowed; allowed: {self.allowed}"
            + did_you_mean(self.value, self.allowed)
            + changed_in(self.field, self.value)
        )


#: Inventory fields an inventory written for an earlier release may lack (``required``) or still set
#: (``removed``): the release of gpucluster.tiers that made the change. The error naming such a field says
#: so, and where the migration is (docs/inventory.md "Upgrading"; the changelog's breaking changes).
CHANGED_IN: dict[str, tuple[str, str]] = {
    "gpucluster_fabric.infiniband.sm_hcas": ("required", "0.1.0"),
    "gpucluster_storage.server_interfaces": ("required", "0.1.0"),
    "gpucluster_node.gpu_temp_limits.max_operating_c": ("required", "0.1.0"),
    "gpucluster_storage.nfs.server_nics": ("removed", "0.1.0"),
}


def changed_in(field: str, value: Any) -> str:
    """`` (required since gpucluster.tiers X: ...)`` for a missing field :data:`CHANGED_IN` names as required,
    `` (removed in ...)`` for a removed one still set; else ""."""
    change = CHANGED_IN.get(field)
    if change is None:
        return ""
    kind, release = change
    if kind == "required" and value not in (None, "", [], {}):
        return ""  # given, but wrong: the message above says what is allowed
    what = f"{kind} {'since' if kind == 'required' else 'in'} gpucluster.tiers {release}"
    return f' ({what}; docs/inventory.md, "Upgrading")'


def did_you_mean(value: Any, allowed: str) -> str:
    """``; did you mean 'x'?`` when ``allowed`` lists choices (``one of a, b, c``) and one is close to
    ``value`` (a misspelt model or policy name), else ""."""
    if not isinstance(value, str) or not allowed.startswith("one of "):
        return ""
    choices = [c.strip() for c in allowed.removeprefix("one of ").split(";", 1)[0].split(",")]
    close = difflib.get_close_matches(value, [c for c in choices if c], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close and close[0] != value else ""


def require(condition: bool, field: str, value: Any, allowed: str) -> None:
    """Raise :class:`PlanError` unless ``condition`` holds."""
    if not condition:
        raise PlanError(field, value, allowed)


# an integer range returns an int (int(value)), any other a float; an int is a float where a caller reads one
# (PEP 484's numeric tower), which mypy's overlap check does not count
@overload
def check_range(  # type: ignore[overload-overlap]
    value: object,
    field: str,
    low: float | None = None,
    high: float | None = None,
    *,
    integer: Literal[True],
    unit: str = "",
) -> int: ...


@overload
def check_range(
    value: object,
    field: str,
    low: float | None = None,
    high: float | None = None,
    *,
    integer: bool = False,
    unit: str = "",
) -> float: ...


def check_range(
    value: object,
    field: str,
    low: float | None = None,
    high: float | None = None,
    *,
    integer: bool = False,
    unit: str = "",
) -> float:
    """Return ``value`` as a number if it lies in [low, high]; otherwise raise PlanError."""
    kind = "an integer" if integer else "a number"
    bounds = []
    if low is not None:
        bounds.append(f">= {low:g}{unit}")
    if high is not None:
        bounds.append(f"<= {high:g}{unit}")
    allowed = f"{kind} {' and '.join(bounds)}".strip()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlanError(field, value, allowed)
    if integer and not float(value).is_integer():
        raise PlanError(field, value, allowed)
    if (low is not None and value < low) or (high is not None and value > high):
        raise PlanError(field, value, allowed)
    return int(value) if integer else float(value)


def check_choice(value: object, field: str, choices: list[str] | tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``; otherwise raise PlanError."""
    if not isinstance(value, str) or value not in choices:
        raise PlanError(field, value, "one of " + ", ".join(choices))
    return value
