"""Dead code in plugins/ and tools/ (make lint): vulture, with the project's false positives left out.

Reported: an unused function, class, method, module constant, attribute, import or unreachable code that no
file of plugins/ or tools/ uses (vulture's lowest confidence, 60%). Not reported:

- the names in tools/lint/vulture_whitelist.py: what Ansible or another tool uses by name (a filter
  plugin's ``FilterModule``, a module's ``DOCUMENTATION``), and what only the tests or the lab use;
- the fields of a class (an annotated name in a class body: a TypedDict's keys, a dataclass's fields):
  they are data, read as JSON keys by the roles' templates and the plan's readers, which vulture cannot see.

Exit status 1 with one line per finding (path:line: message), 0 when there is none.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

import vulture

ROOT = Path(__file__).resolve().parents[2]
PATHS = ("plugins", "tools")
WHITELIST = ROOT / "tools" / "lint" / "vulture_whitelist.py"
MIN_CONFIDENCE = 60


@cache
def _fields(path: Path) -> frozenset[int]:
    """The lines of the annotated names directly in a class body (fields of a TypedDict or dataclass)."""
    tree = ast.parse(path.read_text(), str(path))
    return frozenset(
        stmt.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for stmt in node.body
        if isinstance(stmt, ast.AnnAssign)
    )


def findings() -> list[str]:
    """``path:line: message`` of every finding, in file order."""
    found = vulture.Vulture(verbose=False)
    found.scavenge([str(ROOT / p) for p in PATHS] + [str(WHITELIST)])
    out = []
    for item in found.get_unused_code(min_confidence=MIN_CONFIDENCE, sort_by_size=False):
        path = Path(item.filename)
        if item.typ == "variable" and item.first_lineno in _fields(path):
            continue
        out.append(f"{path.relative_to(ROOT)}:{item.first_lineno}: {item.message} ({item.confidence}% confidence)")
    return out


def main() -> int:
    lines = findings()
    for line in lines:
        print(line)
    if lines:
        print(f"{len(lines)} unused names: remove them, or add a used-by-name entry to {WHITELIST.relative_to(ROOT)}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
