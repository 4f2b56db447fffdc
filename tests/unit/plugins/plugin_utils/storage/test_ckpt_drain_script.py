"""The checkpoint drain service's script (roles/compute/files/gpucluster-ckpt-drain) on temp folders.

The script is loaded as a module. rsync is a fake first on PATH (a Python copy that honours the
options the script passes: --archive, --delete, --exclude=/NAME, --bwlimit) and records its
arguments, so the tests run where rsync is not installed; one test runs the real rsync when there
is one. The staging and remote folders are temp folders; the config is the plan's tier2 values.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, cluster_plan, load_inventory, load_script, render_role_template_with_filters

SCRIPT = ROOT / "roles" / "compute" / "files" / "gpucluster-ckpt-drain"

FAKE_RSYNC = """#!{python}
import json, os, shutil, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_RSYNC_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if os.environ.get("FAKE_RSYNC_FAIL"):
    print("rsync: connection unexpectedly closed", file=sys.stderr)
    sys.exit(12)
excl = {a.split("=/", 1)[1] for a in args if a.startswith("--exclude=/")}
src, dst = (Path(a.rstrip("/")) for a in args if not a.startswith("--"))
if dst.exists() and not dst.is_dir():
    print(f'rsync: mkdir "{dst}" failed: Not a directory (20)', file=sys.stderr)
    sys.exit(23)
dst.mkdir(exist_ok=True)
for root, dirs, files in os.walk(src):
    rel = Path(root).relative_to(src)
    for name in files:
        if rel == Path(".") and name in excl:
            continue
        (dst / rel).mkdir(parents=True, exist_ok=True)
        target = dst / rel / name
        if os.environ.get("FAKE_RSYNC_CORRUPT") == name:
            target.write_bytes(b"x" * (Path(root, name).stat().st_size))
        else:
            shutil.copy2(Path(root, name), target)
for root, dirs, files in os.walk(dst, topdown=False):
    rel = Path(root).relative_to(dst)
    for name in files:
        if not (src / rel / name).exists() and not (rel == Path(".") and name in excl):
            (Path(root) / name).unlink()
"""


drain = load_script(SCRIPT, "gpucluster_ckpt_drain")


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "rsync"
    fake.write_text(FAKE_RSYNC.replace("{python}", sys.executable, 1))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_RSYNC_LOG", str(tmp_path / "rsync.log"))
    (tmp_path / "staging").mkdir()
    config = {
        "staging_path": str(tmp_path / "staging"),
        "remote_path": str(tmp_path / "shared" / "checkpoints"),
        "marker": ".complete",
        "keep_local": 2,
        "bwlimit_kib": 7324218,
        "remote_mount": None,
        "lock": str(tmp_path / "drain.lock"),
    }
    (tmp_path / "drain.json").write_text(json.dumps(config))
    return config


def _ckpt(cfg: dict[str, Any], name: str, complete: bool = True, mtime: float | None = None) -> Path:
    folder = Path(cfg["staging_path"]) / name
    (folder / "shards").mkdir(parents=True)
    for rank in range(3):
        (folder / "shards" / f"rank{rank}.pt").write_bytes(os.urandom(1000 + rank))
    (folder / "meta.json").write_text(json.dumps({"step": name}))
    if complete:
        mark = folder / cfg["marker"]
        mark.touch()
        if mtime is not None:
            os.utime(mark, (mtime, mtime))
    return folder


def _run(cfg: dict[str, Any]) -> int:
    return drain.main(["--config", str(Path(cfg["lock"]).parent / "drain.json")])


def _rsync_calls(cfg: dict[str, Any]) -> list[list[str]]:
    log = Path(cfg["lock"]).parent / "rsync.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _same_tree(a: Path, b: Path, skip: set[str]) -> bool:
    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    fa = {k: v for k, v in files(a).items() if k not in skip}
    fb = {k: v for k, v in files(b).items() if k not in skip}
    return fa == fb


def test_a_complete_checkpoint_drains_and_is_verified(cfg: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    local = _ckpt(cfg, "step-100")
    assert _run(cfg) == 0
    remote = Path(cfg["remote_path"]) / "step-100"
    assert _same_tree(local, remote, {".complete", ".drained"})
    record = json.loads((remote / ".complete").read_text())
    assert record["checkpoint"] == "step-100"
    assert set(record["files"]) == {"meta.json", "shards/rank0.pt", "shards/rank1.pt", "shards/rank2.pt"}
    assert (local / ".drained").read_text() == (remote / ".complete").read_text()
    call = _rsync_calls(cfg)[0]
    assert "--bwlimit=7324218" in call and "--exclude=/.complete" in call and "--delete" in call
    assert "<6>step-100: drained to" in capsys.readouterr().out


def test_an_incomplete_checkpoint_is_neither_copied_nor_deleted(cfg: dict[str, Any]) -> None:
    writing = _ckpt(cfg, "step-050", complete=False)
    assert _run(cfg) == 0
    assert not (Path(cfg["remote_path"]) / "step-050").exists()
    assert writing.is_dir() and _rsync_calls(cfg) == []


def test_a_second_run_copies_nothing(cfg: dict[str, Any]) -> None:
    _ckpt(cfg, "step-100")
    assert _run(cfg) == 0 and _run(cfg) == 0
    assert len(_rsync_calls(cfg)) == 1


def test_a_failed_copy_keeps_the_local_copy_and_fails(cfg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    for i, name in enumerate(("step-1", "step-2", "step-3", "step-4")):
        _ckpt(cfg, name, mtime=1_000_000 + i)
    monkeypatch.setenv("FAKE_RSYNC_FAIL", "1")
    assert _run(cfg) == 1
    # nothing verified: all four stay, beyond keep_local 2
    assert sorted(p.name for p in Path(cfg["staging_path"]).iterdir()) == ["step-1", "step-2", "step-3", "step-4"]
    monkeypatch.delenv("FAKE_RSYNC_FAIL")
    assert _run(cfg) == 0
    assert sorted(p.name for p in Path(cfg["staging_path"]).iterdir()) == ["step-3", "step-4"]
    assert sorted(p.name for p in Path(cfg["remote_path"]).iterdir()) == ["step-1", "step-2", "step-3", "step-4"]


def test_an_unwritable_target_keeps_the_local_copy(cfg: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    """The remote name is taken by a file (the lab's failure case): rsync cannot make the folder."""
    for i, name in enumerate(("step-1", "step-2", "step-3")):
        _ckpt(cfg, name, mtime=1_000_000 + i)
    Path(cfg["remote_path"]).mkdir(parents=True)
    (Path(cfg["remote_path"]) / "step-1").write_text("not a folder")
    assert _run(cfg) == 1
    assert (Path(cfg["staging_path"]) / "step-1").is_dir()  # oldest, beyond keep_local, not verified
    out = capsys.readouterr().out
    assert "<3>step-1: drain failed, local copy kept" in out
    assert "<4>step-1: kept locally beyond keep_local 2" in out


def test_a_corrupt_remote_file_is_deleted_and_redone(cfg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    local = _ckpt(cfg, "step-7")
    monkeypatch.setenv("FAKE_RSYNC_CORRUPT", "rank1.pt")
    assert _run(cfg) == 1
    remote = Path(cfg["remote_path"]) / "step-7"
    assert not (remote / ".complete").exists() and not (local / ".drained").exists()
    assert not (remote / "shards" / "rank1.pt").exists()  # deleted: rsync's quick check cannot skip it
    monkeypatch.delenv("FAKE_RSYNC_CORRUPT")
    assert _run(cfg) == 0
    assert _same_tree(local, remote, {".complete", ".drained"})


def test_a_partial_remote_copy_is_redone(cfg: dict[str, Any]) -> None:
    """An interrupted drain: part of the files there, no remote marker."""
    local = _ckpt(cfg, "step-9")
    remote = Path(cfg["remote_path"]) / "step-9"
    (remote / "shards").mkdir(parents=True)
    (remote / "shards" / "rank0.pt").write_bytes(b"half")
    (remote / "stale.tmp").write_bytes(b"left over")
    assert _run(cfg) == 0
    assert _same_tree(local, remote, {".complete", ".drained"})


def test_a_removed_remote_copy_is_drained_again_and_never_pruned_before(cfg: dict[str, Any]) -> None:
    for i, name in enumerate(("a", "b", "c")):
        _ckpt(cfg, name, mtime=1_000_000 + i)
    cfg_keep_all = {**cfg, "keep_local": 3}
    Path(cfg["lock"]).parent.joinpath("drain.json").write_text(json.dumps(cfg_keep_all))
    assert _run(cfg) == 0
    shutil.rmtree(Path(cfg["remote_path"]) / "a")  # someone deleted the shared copy
    Path(cfg["lock"]).parent.joinpath("drain.json").write_text(json.dumps(cfg))
    assert _run(cfg) == 0  # re-drained first, then pruned
    assert (Path(cfg["remote_path"]) / "a" / ".complete").is_file()
    assert not (Path(cfg["staging_path"]) / "a").exists()


def test_a_changed_local_file_is_not_counted_as_drained(cfg: dict[str, Any]) -> None:
    local = _ckpt(cfg, "s")
    assert _run(cfg) == 0
    (local / "meta.json").write_text("rewritten after the marker, longer than before")
    assert not drain.verified(local, Path(cfg["remote_path"]) / "s", ".complete")


def test_symlinks_are_refused(cfg: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / ".complete").touch()
    os.symlink(tmp_path / "elsewhere", Path(cfg["staging_path"]) / "link")  # not a checkpoint at all
    local = _ckpt(cfg, "with-link")
    os.symlink("/etc/hostname", local / "shards" / "evil")
    assert _run(cfg) == 1
    assert not (Path(cfg["remote_path"]) / "link").exists()
    assert not (Path(cfg["remote_path"]) / "with-link" / ".complete").exists()


def test_an_unmounted_remote_stops_everything(cfg: dict[str, Any], tmp_path: Path) -> None:
    for i, name in enumerate(("a", "b", "c")):
        _ckpt(cfg, name, mtime=1_000_000 + i)
    cfg["remote_mount"] = str(tmp_path / "shared")  # a folder, not a mount point
    (tmp_path / "drain.json").write_text(json.dumps(cfg))
    assert _run(cfg) == 1
    assert _rsync_calls(cfg) == [] and len(list(Path(cfg["staging_path"]).iterdir())) == 3


def test_one_run_at_a_time(cfg: dict[str, Any]) -> None:
    import fcntl

    _ckpt(cfg, "x")
    with open(cfg["lock"], "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert _run(cfg) == 0
    assert _rsync_calls(cfg) == []


@pytest.mark.skipif(shutil.which("rsync", path="/usr/bin:/bin") is None, reason="rsync is not installed here")
def test_with_the_real_rsync(cfg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    local = _ckpt(cfg, "real")
    assert _run(cfg) == 0
    assert _same_tree(local, Path(cfg["remote_path"]) / "real", {".complete", ".drained"})


def test_the_config_file_is_the_plans() -> None:
    """The role renders the plan's values into the script's config (tier2: NFS, /shared)."""
    plan = cluster_plan(*load_inventory("tier2"))
    drain_plan = plan["storage"]["checkpoint_drain"]
    entry = {"role": "compute", "src": "ckpt-drain.json.j2", "dest": drain_plan["config"]}
    config = json.loads(render_role_template_with_filters("compute", entry["src"], plan, "compute01"))
    assert config == {
        "staging_path": "/raid/checkpoint-staging",
        "remote_path": "/shared/checkpoints",
        "remote_mount": "/shared",
        "marker": ".complete",
        "keep_local": 2,
        "bwlimit_kib": 7324218,
    }
    assert stat.S_IMODE(SCRIPT.stat().st_mode) == 0o755
