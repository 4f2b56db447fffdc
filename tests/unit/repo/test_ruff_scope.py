"""ruff reads the roles' Python host scripts (roles/*/files), which have no .py suffix.

ruff picks files by suffix; the scripts the roles install (/usr/local/sbin/gpucluster-*) are
Python by their shebang only, so pyproject.toml lists them in ``[tool.ruff] extend-include``.
These tests fail when a Python script in roles/*/files is outside that list, when the list
takes in a file that is not Python (ruff would fail to parse it), and when ruff itself does
not list a script among the files `ruff check .` reads (make lint).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

SCRIPTS = sorted(p for p in ROOT.glob("roles/*/files/**/*") if p.is_file())


def _is_python(path: Path) -> bool:
    first = path.read_bytes().split(b"\n", 1)[0]
    return first.startswith(b"#!") and b"python" in first


def _included() -> set[Path]:
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    patterns = ruff.get("include", []) + ruff.get("extend-include", [])
    return {p for pattern in patterns for p in ROOT.glob(pattern) if p.is_file()}


def test_the_roles_have_python_host_scripts() -> None:
    assert [p for p in SCRIPTS if _is_python(p)], "no Python script found under roles/*/files: the glob is stale"


def test_every_python_host_script_is_in_ruffs_include() -> None:
    missing = [str(p.relative_to(ROOT)) for p in SCRIPTS if _is_python(p) and p not in _included()]
    assert not missing, f"add to pyproject.toml [tool.ruff] extend-include: {missing}"


def test_ruffs_include_takes_only_python() -> None:
    other = [str(p.relative_to(ROOT)) for p in _included() if p.suffix != ".py" and not _is_python(p)]
    assert not other, f"pyproject.toml [tool.ruff] extend-include takes files that are not Python: {other}"


def _ruff() -> str | None:
    beside = Path(sys.executable).parent / "ruff"
    return str(beside) if beside.is_file() else shutil.which("ruff")


@pytest.mark.skipif(_ruff() is None, reason="ruff not installed (make setup)")
def test_ruff_reads_every_python_host_script() -> None:
    ruff = _ruff()
    assert ruff is not None
    out = subprocess.run(
        [ruff, "check", "--show-files", "roles"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    shown = {Path(line.strip()).resolve() for line in out.splitlines() if line.strip()}
    missing = [str(p.relative_to(ROOT)) for p in SCRIPTS if _is_python(p) and p.resolve() not in shown]
    assert not missing, f"ruff does not read {missing}"
