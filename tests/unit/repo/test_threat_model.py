"""docs/security.md's threat model: every boundary row names a test, and every test it names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "security.md"
#: `path/to/test_x.py::test_name` or, after a full path in the same row, `test_x.py::test_name` / `::test_name`
REF = re.compile(r"`((?:[\w/.-]+/)?(test_[\w]+\.py))?(::(test_\w+))?`")


def _rows() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("### Boundaries", 1)[1].split("\n\n", 2)[1]
    return [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| boundary")]


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _find(name: str) -> Path:
    found = [p for p in [*ROOT.glob("tests/**/" + name), *ROOT.glob("molecule/**/" + name)] if p.is_file()]
    assert len(found) == 1, f"docs/security.md names {name}: found {found or 'no such file'}"
    return found[0]


def test_every_boundary_names_tests_that_exist() -> None:
    rows = _rows()
    assert len(rows) >= 15
    for row in rows:
        test_cell = row.rstrip(" |").rsplit(" | ", 1)[1]
        refs = REF.findall(test_cell)
        assert refs, f"a boundary without a test: {row[:80]}"
        current: Path | None = None
        for full, base, _, func in refs:
            if base:
                current = ROOT / full if "/" in full else _find(base)
                assert current.is_file(), f"docs/security.md names {full}, which does not exist"
            if func:
                assert current is not None, f"{func} without its file in: {row[:80]}"
                assert func in _functions(current), f"docs/security.md names {current.name}::{func}, not defined there"
