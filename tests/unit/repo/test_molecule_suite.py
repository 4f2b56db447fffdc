"""make molecule's summary of a verify: counts, xfails with their reasons and the slowest checks, read
from the JUnit file pytest writes (a real pytest run here, so the format is pytest's own)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
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


def _fake_runs(monkeypatch: Any, tmp_path: Path, fail: tuple[str, str] | None = None) -> list[tuple[str, str, str]]:
    """Replace molecule by a recorder: ("start"|"end", tier, stage) in the order they happen."""
    events: list[tuple[str, str, str]] = []
    lock = threading.Lock()

    def run(tier: str, stage: str) -> tuple[int, float]:
        with lock:
            events.append(("start", tier, stage))
        time.sleep(0.01)
        with lock:
            events.append(("end", tier, stage))
        return (1 if (tier, stage) == fail else 0), 0.01

    monkeypatch.setattr(SUITE, "run", run)
    monkeypatch.setattr(SUITE, "ROOT", tmp_path)
    return events


def _at(events: list[tuple[str, str, str]], kind: str, tier: str, stage: str, nth: int = 0) -> int:
    return [i for i, e in enumerate(events) if e == (kind, tier, stage)][nth]


@pytest.mark.parametrize("overlap", [False, True])
def test_the_scenarios_overlap_only_where_their_labs_do_not_meet(
    monkeypatch: Any, tmp_path: Path, overlap: bool
) -> None:
    events = _fake_runs(monkeypatch, tmp_path)
    tiers = ["tier1", "tier2", "tier3"]
    assert SUITE.main(tiers, overlap=overlap) == 0
    for tier in tiers:  # each scenario's own stages in order, cleaned first and destroyed last
        own = [stage for kind, t, stage in events if t == tier and kind == "start"]
        assert own == list(SUITE.STAGES), (tier, own)
    for prev, this in itertools.pairwise(tiers):
        # never two verifies at once; the next clean only once the previous verify has begun
        assert _at(events, "start", this, "verify") > _at(events, "end", prev, "verify")
        assert _at(events, "start", this, "destroy") > _at(events, "start", prev, "verify")
        # without overlap a lab is created only after the previous verify; with it, while it runs
        assert _at(events, "start", this, "create") > _at(events, "start" if overlap else "end", prev, "verify")
    assert "| tier3 |" in (tmp_path / "build" / "testing" / "molecule-times.md").read_text()


def test_a_failed_stage_destroys_its_lab_and_stops_the_later_scenarios(monkeypatch: Any, tmp_path: Path) -> None:
    events = _fake_runs(monkeypatch, tmp_path, fail=("tier2", "converge"))
    assert SUITE.main(["tier1", "tier2", "tier3"]) == 1
    assert ("start", "tier2", "verify") not in events
    assert [e for e in events if e[1] == "tier2" and e[0] == "start"][-1] == ("start", "tier2", "destroy")
    assert not any(t == "tier3" and stage in ("create", "converge") for _, t, stage in events)
