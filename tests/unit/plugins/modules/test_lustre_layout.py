"""lustre_layout: a directory's default PFL layout set only when it differs from the plan.

The recorded outputs in tests/data/lfs/ follow the printf formats of lustre-release
``lustre/utils/liblustreapi.c`` (lov_dump_comp_v1_header, lov_dump_comp_v1_entry,
lov_dump_user_lmm_header with LDF_YAML | LDF_IS_DIR); see tests/data/lfs/README.md.
A fake ``lfs`` in tmp_path prints a state file for ``getstripe`` and records every call.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from conftest import ROOT, lustre_plan

from ansible_collections.gpucluster.tiers.plugins.modules import lustre_layout

DATA = ROOT / "tests" / "data" / "lfs"

PLAN = lustre_plan()  # tier3: 2 OSS x 4 OSTs
CKPT = PLAN["checkpoints"]["components"]


FAKE_LFS = """#!/bin/sh
here=$(dirname "$0")
echo "$*" >> "$here/calls.log"
case "$1" in
  getstripe)
    if [ -f "$here/getstripe.fail" ]; then echo "lfs getstripe: $5: Inappropriate ioctl" >&2; exit 25; fi
    cat "$here/state.yaml" 2>/dev/null; exit 0 ;;
  setstripe)
    if [ -f "$here/after.yaml" ]; then cp "$here/after.yaml" "$here/state.yaml"; fi; exit 0 ;;
esac
exit 2
"""


@pytest.fixture
def fake_lfs(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    lfs = bindir / "lfs"
    lfs.write_text(FAKE_LFS)
    lfs.chmod(0o755)
    return lfs


def _state(lfs: Path, name: str | None, after: str | None = None) -> None:
    if name:
        shutil.copy(DATA / name, lfs.parent / "state.yaml")
    if after:
        shutil.copy(DATA / after, lfs.parent / "after.yaml")


def _calls(lfs: Path) -> list[str]:
    log = lfs.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def run_module(capsys: pytest.CaptureFixture[str], **args: Any) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        lustre_layout.main()
    return json.loads(capsys.readouterr().out)


def test_matching_layout_is_left_alone(tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "checkpoints"
    target.mkdir()
    _state(fake_lfs, "checkpoints_tier3.yaml")
    out = run_module(capsys, path=str(target), components=CKPT, lfs=str(fake_lfs))
    assert out["changed"] is False and out["command"] is None and out["differences"] == []
    assert _calls(fake_lfs) == [f"getstripe -d --yaml {target}"]


def test_mismatch_runs_setstripe_with_the_planned_args(
    tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "checkpoints"
    target.mkdir()
    _state(fake_lfs, "checkpoints_wide.yaml", after="checkpoints_tier3.yaml")
    out = run_module(capsys, path=str(target), components=CKPT, lfs=str(fake_lfs))
    assert out["changed"] is True
    setstripe = f"setstripe {PLAN['checkpoints']['setstripe_args']} {target}"
    assert _calls(fake_lfs) == [f"getstripe -d --yaml {target}", setstripe, f"getstripe -d --yaml {target}"]
    assert out["command"] == [str(fake_lfs), *setstripe.split()]
    # a second run finds the layout in place and changes nothing
    again = run_module(capsys, path=str(target), components=CKPT, lfs=str(fake_lfs))
    assert again["changed"] is False


def test_setstripe_that_does_not_take_fails(tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "checkpoints"
    target.mkdir()
    _state(fake_lfs, "plain_default.yaml")  # no after.yaml: lfs keeps reporting the old layout
    out = run_module(capsys, path=str(target), components=CKPT, lfs=str(fake_lfs))
    assert out["failed"] and "still differs" in out["msg"]


def test_missing_directory_fails_clearly(tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "nope"
    out = run_module(capsys, path=str(target), components=CKPT, lfs=str(fake_lfs))
    assert out["failed"] and str(target) in out["msg"] and "create: true" in out["msg"]
    assert _calls(fake_lfs) == [] and not target.exists()


def test_create_makes_the_directory_then_sets_the_layout(
    tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "new" / "datasets"
    _state(fake_lfs, "plain_default.yaml", after="datasets_tier3.yaml")
    comps = PLAN["datasets"]["components"]
    out = run_module(capsys, path=str(target), components=comps, create=True, lfs=str(fake_lfs))
    assert out["changed"] and out["created"] and target.is_dir()
    assert f"setstripe {PLAN['datasets']['setstripe_args']} {target}" in _calls(fake_lfs)


def test_check_mode_reports_without_setstripe(
    tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "checkpoints"
    target.mkdir()
    _state(fake_lfs, "checkpoints_wide.yaml", after="checkpoints_tier3.yaml")
    out = run_module(
        capsys, path=str(target), components=CKPT, lfs=str(fake_lfs), _ansible_check_mode=True, _ansible_diff=True
    )
    assert out["changed"] is True
    assert _calls(fake_lfs) == [f"getstripe -d --yaml {target}"]  # read only
    assert "stripe_count: -1" in out["diff"]["before"] and "stripe_count: 8" in out["diff"]["after"]
    assert out["command"][1:] == ["setstripe", *PLAN["checkpoints"]["setstripe_args"].split(), str(target)]


def test_check_mode_with_a_missing_directory_creates_nothing(
    tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "home"
    comps = PLAN["home"]["components"]
    out = run_module(
        capsys, path=str(target), components=comps, create=True, lfs=str(fake_lfs), _ansible_check_mode=True
    )
    assert out["changed"] and out["created"] and not target.exists() and _calls(fake_lfs) == []


def test_getstripe_failure_is_reported(tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "notlustre"
    target.mkdir()
    (fake_lfs.parent / "getstripe.fail").write_text("")
    out = run_module(capsys, path=str(target), components=CKPT, lfs=str(fake_lfs))
    assert out["failed"] and "Inappropriate ioctl" in out["msg"]


def test_missing_lfs_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_module(capsys, path=str(tmp_path), components=CKPT, lfs=str(tmp_path / "no-lfs"))
    assert out["failed"] and "no-lfs" in out["msg"] and "lfs" in out["msg"]


# -- recorded lfs getstripe output (tests/data/lfs/README.md), check and apply modes ---------------------

PFL4 = [
    {"end": 100 << 20, "stripe_count": 1, "stripe_size": 1 << 20},
    {"end": 10 << 30, "stripe_count": 8, "stripe_size": 1 << 20},
    {"end": 100 << 30, "stripe_count": 16, "stripe_size": 1 << 20},
    {"end": -1, "stripe_count": 32, "stripe_size": 1 << 20},
]


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_recorded_layout_that_matches_is_never_set_again(
    tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str], check_mode: bool
) -> None:
    """A directory whose recorded default is the wanted one: read only, no lfs setstripe (nothing restriped)."""
    target = tmp_path / "datasets"
    target.mkdir()
    _state(fake_lfs, "recorded_pfl4_dir_plain.txt")
    out = run_module(capsys, path=str(target), components=PFL4, lfs=str(fake_lfs), _ansible_check_mode=check_mode)
    assert out["changed"] is False and out["command"] is None and out["differences"] == []
    assert _calls(fake_lfs) == [f"getstripe -d --yaml {target}"]


def test_a_recorded_layout_off_the_plan_check_then_apply_then_rerun(
    tmp_path: Path, fake_lfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Check mode says what would change and runs no setstripe; apply sets the plan's layout once; a re-run
    (site.yml's second converge) changes nothing."""
    target = tmp_path / "checkpoints"
    target.mkdir()
    _state(fake_lfs, "recorded_pfl4_dir_plain.txt", after="checkpoints_tier3.yaml")
    checked = run_module(
        capsys, path=str(target), components=CKPT, lfs=str(fake_lfs), _ansible_check_mode=True, _ansible_diff=True
    )
    assert checked["changed"] is True and checked["differences"] == ["4 components, the plan has 3"]
    assert "stripe_count: 32" in checked["diff"]["before"] and "stripe_count: 8" in checked["diff"]["after"]
    assert _calls(fake_lfs) == [f"getstripe -d --yaml {target}"]
    applied = run_module(capsys, path=str(target), components=CKPT, lfs=str(fake_lfs))
    assert applied["changed"] is True
    setstripe = f"setstripe {PLAN['checkpoints']['setstripe_args']} {target}"
    assert [c for c in _calls(fake_lfs) if c.startswith("setstripe")] == [setstripe]
    again = run_module(capsys, path=str(target), components=CKPT, lfs=str(fake_lfs))
    assert again["changed"] is False and again["command"] is None
    assert [c for c in _calls(fake_lfs) if c.startswith("setstripe")] == [setstripe]  # still the one
