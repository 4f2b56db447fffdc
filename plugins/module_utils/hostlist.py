"""Slurm-style host lists: compute01,compute02,compute03 <-> compute[01-03]."""

from __future__ import annotations

import re

_SPLIT = re.compile(r"^(.*?)(\d+)\Z")


def compress(names: list[str]) -> str:
    """Compress host names into Slurm's bracket form (zero padding kept, sorted)."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for name in sorted(set(names)):
        m = _SPLIT.match(name)
        if not m:
            plain.append(name)
            continue
        groups.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
    parts = list(plain)
    for (prefix, width), numbers in sorted(groups.items()):
        numbers.sort()
        ranges: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        if len(numbers) == 1:
            parts.append(f"{prefix}{ranges[0]}")
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


def expand(expr: str) -> list[str]:
    """Expand a host list expression; inverse of :func:`compress`."""
    out: list[str] = []
    for token in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", expr):
        m = re.match(r"^(.*)\[([^\]]*)\](.*)\Z", token)
        if not m:
            out.append(token)
            continue
        prefix, body, suffix = m.groups()
        for part in body.split(","):
            lo, _dash, hi = part.partition("-")
            width = len(lo)
            for n in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{n:0{width}d}{suffix}")
    return out
