"""How the report writes a value: numbers, yes/no, lists and labelled pairs (report/model.py renders every
value cell through :func:`fmt`)."""

from __future__ import annotations

from collections.abc import Sequence


def fmt(value: object) -> str:
    """A value as report.md shows it: n/a, yes/no, trimmed decimals, thousands separators from 100,000, lists
    joined with " / ", and ``|`` escaped for the table."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 100000 else str(value)
    if isinstance(value, (list, tuple)):
        # a bare "a, b" pair is unreadable: pairs go through pair with labels; anything else is a list
        return " / ".join(fmt(v) for v in value)
    return str(value).replace("|", "\\|")


def kw(value: float) -> str:
    """kW in a formula's inputs: enough digits that the product matches the value shown."""
    return f"{value:,.3f}".rstrip("0").rstrip(".")


def pair(labels: Sequence[str], values: Sequence[object], unit: str = "") -> str:
    """'min 1980 / max 1980 MHz': each value after its label, the unit once at the end."""
    text = " / ".join(f"{label} {fmt(v)}" for label, v in zip(labels, values, strict=True))
    return f"{text} {unit}".rstrip()


def sentences(notes: object) -> str:
    """Notes as one paragraph: each note ends with a full stop."""
    items = notes if isinstance(notes, (list, tuple)) else []
    return " ".join(n if n.rstrip().endswith((".", "!", "?")) else f"{n.rstrip()}." for n in map(str, items))
