"""docs/testing.md's test matrix names every lab check module, and only those.

One row per module of molecule/shared/tests/ (the checks molecule's verify runs in the lab),
one column per molecule scenario. The tier4-k8s column must show exactly the modules that
scenario's own verify.yml runs; the Slurm scenarios run molecule/shared/verify.yml, which runs
the whole folder, so none of their cells may say the scenario does not run a module.
"""

from __future__ import annotations

import re

import yaml
from conftest import ROOT

MARKS = {"✓", "part", "skip", "—"}
TESTS = ROOT / "molecule" / "shared" / "tests"


def _matrix() -> tuple[list[str], dict[str, dict[str, str]]]:
    """(the scenario columns, {module: {scenario: mark}}) of the table under '## Test matrix'."""
    text = (ROOT / "docs" / "testing.md").read_text()
    section = text.split("\n## Test matrix\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[0] == "check" and header[-1] == "what it proves", header
    scenarios = header[1:-1]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == len(header), line
        assert set(cells[1:-1]) <= MARKS, line
        assert cells[-1], f"{cells[0]}: say what it proves"
        m = re.fullmatch(r"`(test_\w+\.py)`", cells[0])
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} listed twice"
            rows[m.group(1)] = dict(zip(scenarios, cells[1:-1], strict=True))
    return scenarios, rows


def test_the_columns_are_the_molecule_scenarios() -> None:
    scenarios, _ = _matrix()
    present = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))
    assert sorted(scenarios) == present


def test_every_check_module_has_a_row_and_every_row_a_module() -> None:
    _, rows = _matrix()
    modules = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert sorted(rows) == modules, "docs/testing.md '## Test matrix': one row per molecule/shared/tests module"


def test_the_slurm_scenarios_run_every_module() -> None:
    scenarios, rows = _matrix()
    verify = (ROOT / "molecule" / "shared" / "verify.yml").read_text()
    assert '"{{ playbook_dir }}/tests"' in verify, "molecule/shared/verify.yml no longer runs the whole folder"
    for scenario in scenarios:
        config = yaml.safe_load((ROOT / "molecule" / scenario / "molecule.yml").read_text())
        if config["provisioner"]["playbooks"]["verify"] != "../shared/verify.yml":
            continue
        not_run = [m for m, marks in rows.items() if marks[scenario] == "—"]
        assert not not_run, f"{scenario} runs molecule/shared/verify.yml, so every module: {not_run}"


def test_the_k8s_column_is_what_its_verify_runs() -> None:
    _, rows = _matrix()
    verify = (ROOT / "molecule" / "tier4-k8s" / "verify.yml").read_text()
    runs = set(re.findall(r"shared/tests/(test_\w+\.py)", verify))
    assert runs, "molecule/tier4-k8s/verify.yml names no module of molecule/shared/tests"
    assert {m for m, marks in rows.items() if marks["tier4-k8s"] != "—"} == runs
