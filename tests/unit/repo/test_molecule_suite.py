"""make molecule's summary of a verify: counts, xfails with their reasons and the slowest checks, read
from the JUnit file pytest writes (a real pytest run here, so the format is pytest's own)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT, load_script

SUITE = load_script(ROOT / "tools" / "lab" / "molecule_suite.py", "molecule_suite")

CHECKS = """
import pytest

def test_ok():
    pass

def test_skipped():
    pytest.skip("no backup controller")

def test_known_defect():
    pytest.xfail("GPU allocations left on idle nodes")

def test_broken():
    assert False
"""


def test_the_summary_counts_outcomes_and_names_each_xfail(tmp_path: Path) -> None:
    (tmp_path / "test_checks.py").write_text(CHECKS)
    junit = tmp_path / "out" / "verify-tier4.xml"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", "test_checks.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stdout
    lines = SUITE.verify_summary(junit).splitlines()
    assert lines[0].startswith("  1 failure, 1 passed, 1 skipped, 1 xfailed; slowest: ")
    assert lines[1:] == ["  xfailed test_checks::test_known_defect: GPU allocations left on idle nodes"]


def test_no_junit_file_is_said(tmp_path: Path) -> None:
    assert SUITE.verify_summary(tmp_path / "missing.xml") == "no JUnit file"


def test_make_molecule_runs_every_scenario() -> None:
    """Every scenario folder under molecule/ is in make molecule's default TIERS and the suite's default."""
    scenarios = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))
    assert "tier4-k8s" in scenarios
    make = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("TIERS ?="))
    assert sorted(make.split("=", 1)[1].split()) == scenarios
    assert sorted(SUITE.DEFAULT_SCENARIOS) == scenarios
