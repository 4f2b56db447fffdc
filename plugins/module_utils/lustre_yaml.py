"""A directory's default Lustre layout, as ``lfs getstripe -d --yaml DIR`` prints it, against the plan's.

Pure: text in, plain data out. Used by the ``lustre_layout`` module to apply a PFL layout only when
the directory's default differs from the plan (docs/sources.md [L1]/[L2]).

Output format, from lustre-release ``lustre/utils/liblustreapi.c`` (``lov_dump_comp_v1_header``,
``lov_dump_comp_v1_entry``, ``lov_dump_user_lmm_header`` with ``LDF_YAML | LDF_IS_DIR``; for a
directory the sub-layout keys carry no ``lmm_`` prefix and no objects are listed):

Composite (PFL) default::

    lcm_layout_gen:    0
    lcm_mirror_count:  1
    lcm_entry_count:   2
    components:
      - lcme_id:             N/A
        lcme_mirror_id:      N/A
        lcme_flags:          0
        lcme_extent.e_start: 0
        lcme_extent.e_end:   67108864
        sub_layout:
          stripe_count:  1
          stripe_size:   4194304
          pattern:       raid0
          stripe_offset: -1
      - ...
        lcme_extent.e_end:   EOF

Plain (one layout for the whole file)::

    stripe_count:  1
    stripe_size:   1048576
    pattern:       raid0
    stripe_offset: -1

A Data-on-MDT component has ``pattern: mdt`` (``mdt_index:`` instead of ``stripe_offset:`` in
newer releases); a pool shows as ``pool:``. Releases before the ``!yaml`` check print the path on
the first line: lines before the first top-level key are skipped.
"""

from __future__ import annotations

import re
from typing import Any

#: sizes of ``lfs setstripe`` (the controller's Lustre plan, plugin_utils/storage/lustre.py, uses these too)
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
STRIPE_UNIT = 64 * KIB
EOF_END = -1


def _human(n: int) -> str:
    if n == EOF_END:
        return "-1"
    for unit, scale in (("G", GIB), ("M", MIB), ("K", KIB)):
        if n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def setstripe_args(components: list[dict[str, Any]]) -> str:
    parts = []
    for comp in components:
        end = _human(comp["end"])
        if comp["layout"] == "mdt":
            parts.append(f"-E {end} -L mdt")
        else:
            parts.append(f"-E {end} -c {comp['stripe_count']} -S {_human(comp['stripe_size'])}")
    return " ".join(parts)


_TOP_KEY = re.compile(r"^[A-Za-z_][\w.]*:")
_KEY_VALUE = re.compile(r"^([A-Za-z_][\w.]*):(?:\s+(.*))?\Z")


class LayoutError(ValueError):
    """Unparseable ``lfs getstripe`` output or a bad wanted component."""


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise LayoutError(f"{what}: {value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    raise LayoutError(f"{what}: {value!r} is not an integer")


def _end(value: Any, what: str) -> int:
    if isinstance(value, str) and value.strip().upper() in ("EOF", "-1"):
        return EOF_END
    end = _int(value, what)
    return EOF_END if end in (-1, 2**64 - 1) else end


def _pattern(value: Any) -> str:
    """raid0 or mdt; lfs prints names (raid0, mdt, raid0,overstriped) or, in old releases, numbers."""
    text = str(value).strip().lower()
    if "mdt" in text.split(",") or text in ("100", "0x100"):
        return "mdt"
    return "raid0"


def _sub_layout(sub: dict[str, Any], start: int, end: int, what: str) -> dict[str, Any]:
    layout = _pattern(sub.get("pattern", "raid0"))
    pool = sub.get("pool")
    return {
        "start": start,
        "end": end,
        "stripe_count": _int(sub.get("stripe_count", 0), f"{what}.stripe_count"),
        "stripe_size": _int(sub.get("stripe_size", 0), f"{what}.stripe_size"),
        "layout": layout,
        "pool": str(pool) if pool not in (None, "") else None,
    }


def _key_value(line: str) -> tuple[str, str] | None:
    match = _KEY_VALUE.match(line.strip())
    if not match:
        return None
    key = match.group(1)
    return (key[4:] if key.startswith("lmm_") else key), (match.group(2) or "").strip()


def _read(text: str) -> tuple[dict[str, str], list[dict[str, Any]] | None]:
    """(top-level keys, components or None): the few YAML shapes lfs prints, read line by line.

    A small reader rather than a YAML library: the module runs on hosts that may lack PyYAML.
    """
    header: dict[str, str] = {}
    comps: list[dict[str, Any]] | None = None
    current: dict[str, Any] | None = None
    sub_indent: int | None = None
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        stripped = raw.strip()
        if comps is None:
            if stripped == "components:":
                comps = []
                continue
            kv = _key_value(stripped)
            if kv and indent == 0:
                header.setdefault(*kv)
            continue
        if stripped.startswith("- ") and (sub_indent is None or indent <= sub_indent):
            current = {"sub_layout": {}}
            comps.append(current)
            sub_indent = None
            stripped = stripped[2:]
        if current is None:
            raise LayoutError(f"lfs getstripe --yaml: a line outside any component: {raw!r}")
        if stripped == "sub_layout:":
            sub_indent = indent
            continue
        if stripped.startswith("-"):
            continue  # objects of an instantiated (file) component
        kv = _key_value(stripped)
        if kv is None:
            continue
        if sub_indent is not None and indent > sub_indent:
            current["sub_layout"].setdefault(*kv)
        else:
            current.setdefault(*kv)
    return header, comps


_PAIR = re.compile(r"([A-Za-z_][\w.]*):[ \t]+(\S+)")


def _parse_plain(text: str) -> list[dict[str, Any]] | None:
    """The same layout as ``lfs getstripe -d DIR`` prints it without ``--yaml``: the path first, the
    header and component keys indented, and a directory's sub-layout on one line of ``key: value``
    pairs (``lov_dump_user_lmm_v1v3``: the separator is a space for a directory unless yaml)."""
    comps: list[dict[str, Any]] = []
    header: dict[str, str] = {}
    current: dict[str, Any] | None = None
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith(("-", "#")) or "{" in stripped:
            continue  # blank, objects of a file's component
        for key, value in _PAIR.findall(stripped):
            key = key[4:] if key.startswith("lmm_") else key
            if key == "lcme_id":
                current = {"sub_layout": {}}
                comps.append(current)
            if key.startswith("lcme_") and current is not None:
                current.setdefault(key, value)
            elif current is not None:
                current["sub_layout"].setdefault(key, value)
            else:
                header.setdefault(key, value)
    if comps:
        out = []
        for i, comp in enumerate(comps):
            what = f"components[{i}]"
            if not comp["sub_layout"]:
                raise LayoutError(f"lfs getstripe: {what} has no stripe_count/stripe_size")
            start = _int(comp.get("lcme_extent.e_start", 0), f"{what}.lcme_extent.e_start")
            end = _end(comp.get("lcme_extent.e_end", "EOF"), f"{what}.lcme_extent.e_end")
            out.append(_sub_layout(comp["sub_layout"], start, end, what))
        return out
    if "stripe_count" in header or "stripe_size" in header:
        return [_sub_layout(header, 0, EOF_END, "layout")]
    return None


def parse_getstripe_yaml(text: str) -> list[dict[str, Any]] | None:
    """Components of a directory's default layout; None when the directory has none (empty output).

    Each component: start, end (-1 = EOF), stripe_count, stripe_size, layout (raid0|mdt), pool.
    Reads ``lfs getstripe -d --yaml DIR`` and, as recorded on real clients, the same without ``--yaml``
    (tests/data/lfs/README.md).
    """
    if any(len(_PAIR.findall(line)) > 1 for line in text.splitlines()):
        return _parse_plain(text)  # a directory's sub-layout on one line: the output without --yaml
    lines = text.splitlines()
    while lines and not _TOP_KEY.match(lines[0]):
        lines.pop(0)  # the path, printed first by releases before the yaml check
    if not lines:
        return _parse_plain(text) if _PAIR.search(text) else None  # keys, all indented: without --yaml
    header, comps = _read("\n".join(lines))
    if comps is not None:
        out = []
        for i, comp in enumerate(comps):
            what = f"components[{i}]"
            if not comp["sub_layout"]:
                raise LayoutError(f"lfs getstripe --yaml: {what} has no sub_layout")
            start = _int(comp.get("lcme_extent.e_start", 0), f"{what}.lcme_extent.e_start")
            end = _end(comp.get("lcme_extent.e_end", "EOF"), f"{what}.lcme_extent.e_end")
            out.append(_sub_layout(comp["sub_layout"], start, end, what))
        if not out:
            raise LayoutError("lfs getstripe --yaml: 'components:' without any component")
        return out
    if "stripe_count" in header or "stripe_size" in header:
        return [_sub_layout(header, 0, EOF_END, "layout")]
    raise LayoutError(f"lfs getstripe --yaml output has neither components nor stripe_count: {text[:200]!r}")


def normalize_wanted(components: Any) -> list[dict[str, Any]]:
    """The plan's components (lustre.default_layouts / lustre_layouts) with starts filled in."""
    if not isinstance(components, list) or not components:
        raise LayoutError("components must be a non-empty list of {end, stripe_count, stripe_size, layout}")
    out = []
    start = 0
    for i, comp in enumerate(components):
        what = f"components[{i}]"
        if not isinstance(comp, dict):
            raise LayoutError(f"{what} must be a mapping")
        end = _end(comp.get("end", EOF_END), f"{what}.end")
        layout = _pattern(comp.get("layout", "raid0"))
        if layout == "mdt" and i != 0:
            raise LayoutError(f"{what}.layout: mdt (Data-on-MDT) only for the first component")
        last = i == len(components) - 1
        if last and end != EOF_END:
            raise LayoutError(f"{what}.end: the last component must end at EOF (-1)")
        if not last and (end == EOF_END or end <= start):
            raise LayoutError(f"{what}.end: {end} must lie above the previous end {start}")
        given_start = comp.get("start")
        if given_start is not None and _int(given_start, f"{what}.start") != start:
            raise LayoutError(f"{what}.start: {given_start} must equal the previous end {start}")
        pool = comp.get("pool")
        out.append(
            {
                "start": start,
                "end": end,
                "stripe_count": _int(comp.get("stripe_count", 1), f"{what}.stripe_count"),
                "stripe_size": _int(comp.get("stripe_size", 4 * MIB), f"{what}.stripe_size"),
                "layout": layout,
                "pool": str(pool) if pool not in (None, "") else None,
            }
        )
        start = end
    return out


def differences(actual: list[dict[str, Any]] | None, wanted: list[dict[str, Any]]) -> list[str]:
    """Why ``actual`` is not ``wanted`` (empty when they match).

    Compared: extents, layout (raid0/mdt), and for raid0 components stripe count and size, and the
    pool when the plan names one. A Data-on-MDT component's size is its extent (lfs sets it so).
    """
    if actual is None:
        return ["the directory has no default layout"]
    if len(actual) != len(wanted):
        return [f"{len(actual)} components, the plan has {len(wanted)}"]
    out = []
    for i, (a, w) in enumerate(zip(actual, wanted, strict=True)):
        for key in ("start", "end", "layout"):
            if a[key] != w[key]:
                out.append(f"component {i}: {key} {_show(key, a[key])}, the plan has {_show(key, w[key])}")
        if w["layout"] == "mdt" or a["layout"] != w["layout"]:
            continue
        for key in ("stripe_count", "stripe_size"):
            if a[key] != w[key]:
                out.append(f"component {i}: {key} {_show(key, a[key])}, the plan has {_show(key, w[key])}")
        if w["pool"] is not None and a["pool"] != w["pool"]:
            out.append(f"component {i}: pool {a['pool']!r}, the plan has {w['pool']!r}")
    return out


def _show(key: str, value: Any) -> str:
    if key == "end" and value == EOF_END:
        return "EOF"
    return str(value)


def setstripe_argv(components: list[dict[str, Any]]) -> list[str]:
    """``lfs setstripe`` options: lustre.setstripe_args per component, plus ``-p POOL`` where set."""
    argv: list[str] = []
    for comp in components:
        argv += setstripe_args([comp]).split()
        if comp.get("pool"):
            argv += ["-p", str(comp["pool"])]
    return argv


def layout_text(components: list[dict[str, Any]] | None) -> str:
    """A stable, readable rendering for --diff."""
    if components is None:
        return "# no default layout\n"
    rows = []
    for c in components:
        end = "EOF" if c["end"] == EOF_END else str(c["end"])
        row = f"- extent: [{c['start']}, {end}]\n  layout: {c['layout']}\n"
        if c["layout"] != "mdt":
            row += f"  stripe_count: {c['stripe_count']}\n  stripe_size: {c['stripe_size']}\n"
        if c.get("pool"):
            row += f"  pool: {c['pool']}\n"
        rows.append(row)
    return "".join(rows)
