"""Slurm host lists: ``compute[01-03]`` <-> compute01, compute02, compute03.

The rules are Slurm's own (``src/common/hostlist.c``, docs/sources.md [SL40]), checked against
``scontrol show hostnames`` and ``scontrol show hostlistsorted`` of Slurm 22.05
(tests/data/hostlist/slurm-22.05.json), so that a host list the collection writes into
slurm.conf or gres.conf names the same hosts in Slurm, and one an inventory writes in Slurm's
form expands here as Slurm expands it.

:func:`expand` (``scontrol show hostnames``):

- tokens are separated by commas (or spaces and tabs, as in Slurm); empty tokens are skipped;
- a token may hold several bracket expressions, ``rack[1-2]-node[01-02]`` -> 4 names; nothing
  may follow the last ``]`` (Slurm rejects ``node[1-2]-ib``);
- inside brackets: numbers and ``lo-hi`` ranges separated by commas; ``lo``'s digits set the
  zero padding of every number of its range: ``[08-10]`` -> 08 09 10, ``[8-10]`` -> 8 9 10;
- order: the ranges as written; with several brackets Slurm varies the last one fastest, then the
  first, second, ... (for two brackets: the first slowest); duplicates are kept.

:func:`compress` (``scontrol show hostlistsorted`` of the names given in ascending order): one
token per prefix (the name without its trailing digits), prefixes in natural order (``r2n`` before
``r10n``); consecutive numbers join into one range when one zero padding writes them all as
given (``node8,node9,node10`` -> ``node[8-10]``, ``node08..node10`` -> ``node[08-10]``, but
``node9,node010`` stay apart: ``node[9,010]``); ranges ordered by their padded width, then
their first number. Duplicates are dropped. Where names mix padded and unpadded numbers of one
prefix, Slurm's own output depends on the order the names come in; this one is Slurm's for
names in ascending order.

Errors are :class:`HostlistError` (a ValueError) naming the expression and what is allowed.
Runs on managed hosts too (module_utils): Python 3.10, standard library only.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: most hosts one ``lo-hi`` range may hold (Slurm's MAX_RANGE, 64K hosts)
MAX_RANGE = 64 * 1024
#: most hosts one bracketed token, and one whole expression, may expand to (a guard against
#: ``a[0-65535]b[0-65535]`` and against a 1 KB list of many such tokens or ranges: tens of millions of names)
MAX_HOSTS = 1024 * 1024

_FORM = "a host list such as compute[01-04],gpu[1-2]-ib[1-2] (numbers and lo-hi ranges in brackets)"
_NUMBER = re.compile(r"(\d+)(?:-(\d+))?")
_TRAILING_DIGITS = re.compile(r"(.*?)(\d+)")
_CHUNKS = re.compile(r"\d+|\D")


class HostlistError(ValueError):
    """A host list expression or host name Slurm would not accept."""

    def __init__(self, expr: str, problem: str) -> None:
        super().__init__(f"host list {_cut(expr, 200)!r}: {problem}; expected {_FORM}")
        self.expr = expr
        self.problem = problem


def _tokens(expr: str) -> list[str]:
    """Split at commas and blanks outside brackets (Slurm's _next_tok); check bracket pairs."""
    tokens: list[str] = []
    current: list[str] = []
    inside = False
    for ch in expr:
        if ch == "[":
            if inside:
                raise HostlistError(expr, "a '[' inside brackets")
            inside = True
        elif ch == "]":
            if not inside:
                raise HostlistError(expr, "a ']' without its '['")
            inside = False
        elif not inside and (ch == "," or ch.isspace()):
            if current:
                tokens.append("".join(current))
                current = []
            continue
        current.append(ch)
    if inside:
        raise HostlistError(expr, "a '[' without its ']'")
    if current:
        tokens.append("".join(current))
    return tokens


def _numbers(expr: str, body: str) -> list[str]:
    """The numbers of one bracket, as strings padded to the width of each range's ``lo``."""
    out: list[str] = []
    for part in body.split(","):
        m = _NUMBER.fullmatch(part)
        if not m:
            raise HostlistError(expr, f"{part!r} in brackets is not a number or a lo-hi range")
        lo_text, hi_text = m.group(1), m.group(2)
        lo, hi = int(lo_text), int(hi_text if hi_text is not None else lo_text)
        if hi < lo:
            raise HostlistError(expr, f"range {part!r} ends before it starts")
        if hi - lo + 1 > MAX_RANGE:
            raise HostlistError(expr, f"range {part!r} holds more than {MAX_RANGE} hosts")
        if len(out) + hi - lo + 1 > MAX_HOSTS:
            raise HostlistError(expr, f"brackets [{_cut(body)}] hold more than {MAX_HOSTS} hosts in all")
        width = len(lo_text)
        out.extend(f"{n:0{width}d}" for n in range(lo, hi + 1))
    return out


def _expand_token(expr: str, token: str) -> list[str]:
    pieces = re.split(r"\[([^\]]*)\]", token)  # literal, bracket, literal, bracket, ..., literal
    if len(pieces) == 1:
        return [token]
    literals, brackets = pieces[0::2], [_numbers(expr, body) for body in pieces[1::2]]
    if literals[-1]:
        raise HostlistError(expr, f"{literals[-1]!r} after the last bracket of {token!r} (Slurm does not allow it)")
    total = 1
    for values in brackets:
        total *= len(values)
    if total > MAX_HOSTS:
        raise HostlistError(expr, f"{token!r} expands to more than {MAX_HOSTS} hosts")
    # Slurm's _push_range_list: the last bracket innermost, the others from the second-to-last outwards
    count = len(brackets)
    order = [*range(count - 2, -1, -1), count - 1]
    names: list[str] = []
    for combo in itertools.product(*(brackets[i] for i in order)):
        chosen = dict(zip(order, combo, strict=True))
        names.append("".join(lit + (chosen[i] if i < count else "") for i, lit in enumerate(literals)))
    return names


def expand(expr: str) -> list[str]:
    """The host names of a Slurm host list expression, in Slurm's order (``scontrol show hostnames``)."""
    if not isinstance(expr, str):
        raise HostlistError(repr(expr), "not a string")
    names: list[str] = []
    for token in _tokens(expr):
        names.extend(_expand_token(expr, token))
        if len(names) > MAX_HOSTS:  # the total, not only each token: many tokens of a million each
            raise HostlistError(_cut(expr), f"the list expands to more than {MAX_HOSTS} hosts in all")
    return names


def _cut(text: str, keep: int = 60) -> str:
    """A long expression cut for a message (its start and its length)."""
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"


@dataclass
class _Run:
    """Consecutive numbers of one prefix written with one zero padding ``width`` (a Slurm hostrange)."""

    lo: int
    hi: int
    width: int

    def takes(self, number: int, digits: int, padded: bool) -> bool:
        """Whether ``number``, written with ``digits`` digits, continues this run as written."""
        if number != self.hi + 1:
            return False
        return digits == self.width if padded else digits >= self.width

    def text(self) -> str:
        lo = f"{self.lo:0{self.width}d}"
        return lo if self.lo == self.hi else f"{lo}-{self.hi:0{self.width}d}"


def _natural(text: str) -> tuple[tuple[int, ...], ...]:
    """Slurm's strnatcmp order: digit runs compare by value, other characters by code."""
    return tuple((48, int(c)) if c.isdigit() else (ord(c),) for c in _CHUNKS.findall(text))


def _runs(numbers: list[tuple[int, str]]) -> list[_Run]:
    """Slurm's push (join the tail), sort (width, first number) and coalesce, for ascending input."""
    runs: list[_Run] = []
    for number, digits in sorted(numbers, key=lambda nd: (nd[0], len(nd[1]))):
        padded = len(digits) > len(str(number))
        if runs and runs[-1].takes(number, len(digits), padded):
            runs[-1].hi = number
        else:
            runs.append(_Run(number, number, len(digits)))
    runs.sort(key=lambda r: (r.width, r.lo))
    merged: list[_Run] = []
    for run in runs:
        lo_text = f"{run.lo:0{run.width}d}"
        if merged and merged[-1].takes(run.lo, len(lo_text), len(lo_text) > len(str(run.lo))):
            merged[-1].hi = run.hi
        else:
            merged.append(run)
    return merged


def compress(names: Iterable[str]) -> str:
    """Slurm's bracket form of ``names`` (sorted, duplicates dropped): ``node[8-10]``, ``rack1-node[01-02]``."""
    plain: set[str] = set()
    numbered: dict[str, list[tuple[int, str]]] = {}
    for name in set(names):
        if not isinstance(name, str) or not name or re.search(r"[\[\],\s]", name):
            raise HostlistError(str(name), "a host name must be non-empty, without brackets, commas or blanks")
        m = _TRAILING_DIGITS.fullmatch(name)
        if m:
            numbered.setdefault(m.group(1), []).append((int(m.group(2)), m.group(2)))
        else:
            plain.add(name)
    tokens: list[tuple[tuple[tuple[tuple[int, ...], ...], str, int], str]] = [
        ((_natural(name), name, 0), name) for name in plain
    ]
    for prefix, numbers in numbered.items():
        runs = _runs(numbers)
        body = ",".join(r.text() for r in runs)
        text = f"{prefix}{body}" if len(runs) == 1 and runs[0].lo == runs[0].hi else f"{prefix}[{body}]"
        tokens.append(((_natural(prefix), prefix, 1), text))
    return ",".join(text for _key, text in sorted(tokens))
