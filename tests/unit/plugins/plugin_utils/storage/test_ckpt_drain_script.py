"""The checkpoint drain service's script (roles/compute/files/gpucluster-ckpt-drain) on temp folders.

The script is loaded as a module. rsync is a fake first on PATH (a Python copy that honours the
options the script passes: --archive, --delete, --exclude=/NAME, --bwlimit) and records its
arguments, so the tests run where rsync is not installed; one test runs the real rsync when there
is one. The staging and remote folders are temp folders; the config is the plan's tier2 values.
Copies are scoped by owner (<remote>/<user>/<name>): here the owner is the user running the tests,
so the drain runs in-process; the tests that drop root for another user run only as root.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import sys
import tempfile
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
ME = pwd.getpwuid(os.geteuid()).pw_name
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="dropping root for another user needs root")


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
        "user_dir_mode": "0700",
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


def _remote(cfg: dict[str, Any], name: str = "", user: str = ME) -> Path:
    """Where ``user``'s checkpoint ``name`` is copied (``user``'s folder without a name)."""
    folder = Path(cfg["remote_path"]) / user
    return folder / name if name else folder


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
    remote = _remote(cfg, "step-100")
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
    assert not _remote(cfg, "step-050").exists()
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
    assert sorted(p.name for p in _remote(cfg).iterdir()) == ["step-1", "step-2", "step-3", "step-4"]


def test_an_unwritable_target_keeps_the_local_copy(cfg: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    """The remote name is taken by a file (the lab's failure case): rsync cannot make the folder."""
    for i, name in enumerate(("step-1", "step-2", "step-3")):
        _ckpt(cfg, name, mtime=1_000_000 + i)
    _remote(cfg).mkdir(parents=True)
    _remote(cfg, "step-1").write_text("not a folder")
    assert _run(cfg) == 1
    assert (Path(cfg["staging_path"]) / "step-1").is_dir()  # oldest, beyond keep_local, not verified
    out = capsys.readouterr().out
    assert "<3>step-1: drain failed, local copy kept" in out
    assert "<4>step-1: kept locally beyond keep_local 2" in out


def test_a_corrupt_remote_file_is_deleted_and_redone(cfg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    local = _ckpt(cfg, "step-7")
    monkeypatch.setenv("FAKE_RSYNC_CORRUPT", "rank1.pt")
    assert _run(cfg) == 1
    remote = _remote(cfg, "step-7")
    assert not (remote / ".complete").exists() and not (local / ".drained").exists()
    assert not (remote / "shards" / "rank1.pt").exists()  # deleted: rsync's quick check cannot skip it
    monkeypatch.delenv("FAKE_RSYNC_CORRUPT")
    assert _run(cfg) == 0
    assert _same_tree(local, remote, {".complete", ".drained"})


def test_a_partial_remote_copy_is_redone(cfg: dict[str, Any]) -> None:
    """An interrupted drain: part of the files there, no remote marker."""
    local = _ckpt(cfg, "step-9")
    remote = _remote(cfg, "step-9")
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
    shutil.rmtree(_remote(cfg, "a"))  # someone deleted the shared copy
    Path(cfg["lock"]).parent.joinpath("drain.json").write_text(json.dumps(cfg))
    assert _run(cfg) == 0  # re-drained first, then pruned
    assert (_remote(cfg, "a") / ".complete").is_file()
    assert not (Path(cfg["staging_path"]) / "a").exists()


def test_a_changed_local_file_is_not_counted_as_drained(cfg: dict[str, Any]) -> None:
    local = _ckpt(cfg, "s")
    assert _run(cfg) == 0
    (local / "meta.json").write_text("rewritten after the marker, longer than before")
    assert not drain.verified(local, _remote(cfg, "s"), ".complete")


def test_symlinks_are_refused(cfg: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / ".complete").touch()
    os.symlink(tmp_path / "elsewhere", Path(cfg["staging_path"]) / "link")  # not a checkpoint at all
    local = _ckpt(cfg, "with-link")
    os.symlink("/etc/hostname", local / "shards" / "evil")
    assert _run(cfg) == 1
    assert not _remote(cfg, "link").exists() and not (Path(cfg["remote_path"]) / "link").exists()
    assert not (_remote(cfg, "with-link") / ".complete").exists()


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
    assert _same_tree(local, _remote(cfg, "real"), {".complete", ".drained"})


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
        "user_dir_mode": "0700",
    }
    assert stat.S_IMODE(SCRIPT.stat().st_mode) == 0o755


# Copies scoped by owner (issue 37): <remote>/<user>/<name>, made as that user.


def _st(mode: int, uid: int = 1000) -> os.stat_result:
    """An lstat result with only the fields the drain reads (mode, uid)."""
    return os.stat_result((mode, 0, 0, 1, uid, uid, 0, 0, 0, 0))


def test_owners_groups_real_folders_by_uid_and_skips_symlinks_files_and_hidden() -> None:
    entries = [
        ("a-step-2", _st(stat.S_IFDIR | 0o755, 1001)),
        ("a-step-1", _st(stat.S_IFDIR | 0o700, 1001)),
        ("b-step-1", _st(stat.S_IFDIR | 0o755, 1002)),
        ("to-etc", _st(stat.S_IFLNK | 0o777, 1002)),  # a symlink is never a checkpoint
        ("file", _st(stat.S_IFREG | 0o644, 1002)),
        (".hidden", _st(stat.S_IFDIR | 0o755, 1002)),
    ]
    assert drain.owners(entries) == {1001: ["a-step-1", "a-step-2"], 1002: ["b-step-1"]}


@pytest.mark.parametrize(
    ("st", "problem"),
    [
        (None, "missing"),
        (_st(stat.S_IFLNK | 0o777, 1001), "a symlink"),
        (_st(stat.S_IFREG | 0o600, 1001), "not a folder"),
        (_st(stat.S_IFDIR | 0o700, 1002), "owned by uid 1002, not 1001"),  # another user squatted the name
        (_st(stat.S_IFDIR | 0o700, 0), "owned by uid 0, not 1001"),  # e.g. an earlier version's copy
        (_st(stat.S_IFDIR | 0o700, 1001), None),
    ],
)
def test_a_user_folder_takes_copies_only_when_it_is_that_users_real_folder(st: Any, problem: str | None) -> None:
    assert drain.folder_problem(st, 1001) == problem


def test_remote_targets_stay_inside_the_users_folder() -> None:
    root = Path("/shared/checkpoints")
    assert drain.remote_target(root, "alice", "step-100") == root / "alice" / "step-100"
    for user in ("", ".", "..", "../bob", ".hidden", "a/b"):
        with pytest.raises(drain.DrainError):
            drain.remote_target(root, user, "step-100")
    for name in ("", ".", "..", "../x", "x/y", ".complete"):
        with pytest.raises(drain.DrainError):
            drain.remote_target(root, "alice", name)


def test_copies_go_under_the_owners_folder_made_private(cfg: dict[str, Any]) -> None:
    _ckpt(cfg, "step-1")
    assert _run(cfg) == 0
    assert (_remote(cfg, "step-1") / ".complete").is_file()
    assert not (Path(cfg["remote_path"]) / "step-1").exists()  # never the unscoped name
    assert sorted(p.name for p in Path(cfg["remote_path"]).iterdir()) == [ME]
    st = os.lstat(_remote(cfg))
    assert st.st_uid == os.geteuid() and stat.S_ISDIR(st.st_mode)


def test_an_earlier_versions_unscoped_copy_is_left_alone(cfg: dict[str, Any]) -> None:
    """Migration: <remote>/<name> from before is not touched; the staged checkpoint drains again, scoped."""
    old = Path(cfg["remote_path"]) / "step-1"
    old.mkdir(parents=True)
    (old / "meta.json").write_text("the earlier copy")
    local = _ckpt(cfg, "step-1")
    (local / ".drained").write_text("an earlier version's record")
    assert _run(cfg) == 0
    assert (
        sorted(p.name for p in old.iterdir()) == ["meta.json"] and (old / "meta.json").read_text() == "the earlier copy"
    )
    assert _same_tree(local, _remote(cfg, "step-1"), {".complete", ".drained"})


def test_a_symlinked_remote_target_is_refused_and_delete_reaches_nothing(cfg: dict[str, Any], tmp_path: Path) -> None:
    """The user's own remote folder holds a symlink named like the next checkpoint: rsync --delete would
    empty whatever it points to. Nothing is copied, nothing there deleted, the local copy stays."""
    victim = tmp_path / "someone-elses"
    victim.mkdir()
    (victim / "precious.pt").write_bytes(b"keep me")
    _remote(cfg).mkdir(parents=True)
    os.symlink(victim, _remote(cfg, "step-1"))
    local = _ckpt(cfg, "step-1")
    assert _run(cfg) == 1
    assert sorted(p.name for p in victim.iterdir()) == ["precious.pt"]
    assert _rsync_calls(cfg) == [] and local.is_dir() and not (local / ".drained").exists()


def test_a_user_folder_that_is_a_symlink_stops_that_users_drain(
    cfg: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    Path(cfg["remote_path"]).mkdir(parents=True)
    os.symlink(elsewhere, _remote(cfg))
    _ckpt(cfg, "step-1")
    assert _run(cfg) == 1
    assert list(elsewhere.iterdir()) == [] and _rsync_calls(cfg) == []
    assert f"<3>{_remote(cfg)}: a symlink: {ME}'s checkpoints not drained, nothing deleted" in capsys.readouterr().out


def test_a_remote_root_that_is_a_symlink_stops_everything(cfg: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    Path(cfg["remote_path"]).parent.mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere", cfg["remote_path"])
    _ckpt(cfg, "step-1")
    assert _run(cfg) == 1
    assert list((tmp_path / "elsewhere").iterdir()) == [] and _rsync_calls(cfg) == []


def test_the_owner_is_the_current_user_no_fork(cfg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise AssertionError("forked for the user already running")

    monkeypatch.setattr(drain.os, "fork", no_fork)
    _ckpt(cfg, "step-1")
    assert _run(cfg) == 0


def test_privileges_are_dropped_groups_then_group_then_user(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    ids = {"uid": (0, 0, 0), "gid": (0, 0, 0)}

    def setresgid(*g: int) -> None:
        calls.append(("setresgid", *g))
        ids["gid"] = g

    def setresuid(*u: int) -> None:
        calls.append(("setresuid", *u))
        ids["uid"] = u

    def setuid(u: int) -> None:
        calls.append(("setuid", u))
        raise PermissionError("root is gone")

    monkeypatch.setattr(drain.os, "initgroups", lambda name, gid: calls.append(("initgroups", name, gid)))
    monkeypatch.setattr(drain.os, "setresgid", setresgid)
    monkeypatch.setattr(drain.os, "setresuid", setresuid)
    monkeypatch.setattr(drain.os, "getresuid", lambda: ids["uid"])
    monkeypatch.setattr(drain.os, "getresgid", lambda: ids["gid"])
    monkeypatch.setattr(drain.os, "setuid", setuid)
    monkeypatch.setattr(drain.os, "umask", lambda m: calls.append(("umask", m)))
    monkeypatch.setattr(drain.os, "environ", {})
    alice = pwd.struct_passwd(("alice", "x", 3917, 3917, "", "/home/alice", "/bin/sh"))
    drain.drop_privileges(alice)
    assert calls == [
        ("initgroups", "alice", 3917),
        ("setresgid", 3917, 3917, 3917),
        ("setresuid", 3917, 3917, 3917),
        ("setuid", 0),  # the check that root cannot be taken back
        ("umask", 0o077),
    ]
    assert drain.os.environ == {"HOME": "/home/alice", "USER": "alice", "LOGNAME": "alice"}


def test_a_drop_that_left_root_reachable_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drain.os, "initgroups", lambda name, gid: None)
    monkeypatch.setattr(drain.os, "setresgid", lambda *g: None)
    monkeypatch.setattr(drain.os, "setresuid", lambda *u: None)
    monkeypatch.setattr(drain.os, "getresuid", lambda: (3917, 3917, 3917))
    monkeypatch.setattr(drain.os, "getresgid", lambda: (3917, 3917, 3917))
    monkeypatch.setattr(drain.os, "setuid", lambda u: None)  # it worked: root is still there
    alice = pwd.struct_passwd(("alice", "x", 3917, 3917, "", "/home/alice", "/bin/sh"))
    with pytest.raises(drain.DrainError, match="root could be taken back"):
        drain.drop_privileges(alice)


# As root: a second user's checkpoints, drained in a child that became that user.

FAKE_RSYNC_SYSTEM = "/usr/bin/python3"


@pytest.fixture
def shared_cfg(cfg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``cfg`` in a world-searchable temp folder with a fake rsync another user can run."""
    if not os.access(FAKE_RSYNC_SYSTEM, os.X_OK):
        pytest.skip(f"no {FAKE_RSYNC_SYSTEM} for the fake rsync run as another user")
    top = Path(tempfile.mkdtemp(prefix="ckpt-drain-"))
    top.chmod(0o755)
    (top / "bin").mkdir(mode=0o755)
    fake = top / "bin" / "rsync"
    fake.write_text(FAKE_RSYNC.replace("{python}", FAKE_RSYNC_SYSTEM, 1))
    fake.chmod(0o755)
    log = top / "rsync.log"
    log.touch()
    log.chmod(0o666)
    monkeypatch.setenv("PATH", f"{top / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_RSYNC_LOG", str(log))
    (top / "staging").mkdir()
    (top / "staging").chmod(0o1777)
    new = {**cfg, "staging_path": str(top / "staging"), "remote_path": str(top / "shared" / "checkpoints")}
    new["lock"] = str(top / "drain.lock")
    (top / "drain.json").write_text(json.dumps(new))
    yield new
    shutil.rmtree(top)


def _chown_tree(path: Path, uid: int) -> None:
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(Path(root) / name, uid, uid)
    os.lchown(path, uid, uid)


@as_root
def test_another_users_checkpoint_is_copied_as_that_user_into_their_folder(shared_cfg: dict[str, Any]) -> None:
    nobody = pwd.getpwnam("nobody")
    mine = _ckpt(shared_cfg, "step-1")
    theirs = _ckpt(shared_cfg, "step-1-theirs")
    theirs_same = theirs.rename(theirs.with_name("step-1b"))
    _chown_tree(theirs_same, nobody.pw_uid)
    assert _run(shared_cfg) == 0
    folder = _remote(shared_cfg, user="nobody")
    st = os.lstat(folder)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (nobody.pw_uid, 0o700)
    copied = folder / "step-1b"
    assert _same_tree(theirs_same, copied, {".complete", ".drained"})
    assert {os.lstat(p).st_uid for p in [copied, *copied.rglob("*")]} == {nobody.pw_uid}  # written as nobody
    assert _same_tree(mine, _remote(shared_cfg, "step-1"), {".complete", ".drained"})
    assert not (_remote(shared_cfg) / "step-1b").exists() and not (folder / "step-1").exists()


@as_root
def test_another_user_cannot_reach_a_foreign_folder_through_their_own_symlink(shared_cfg: dict[str, Any]) -> None:
    """nobody's remote folder holds a symlink to root's copy, named like nobody's next checkpoint."""
    nobody = pwd.getpwnam("nobody")
    mine = _ckpt(shared_cfg, "step-1")
    assert _run(shared_cfg) == 0
    before = _remote(shared_cfg, "step-1")
    sums = {p.name: p.read_bytes() for p in before.rglob("*") if p.is_file()}
    folder = _remote(shared_cfg, user="nobody")
    folder.mkdir(mode=0o700)
    os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    os.symlink(before, folder / "step-2")
    os.lchown(folder / "step-2", nobody.pw_uid, nobody.pw_gid)
    theirs = _ckpt(shared_cfg, "step-2")
    _chown_tree(theirs, nobody.pw_uid)
    assert _run(shared_cfg) == 1
    assert {p.name: p.read_bytes() for p in before.rglob("*") if p.is_file()} == sums
    assert _same_tree(mine, before, {".complete", ".drained"}) and theirs.is_dir()


@as_root
def test_a_folder_squatted_by_another_user_is_refused(shared_cfg: dict[str, Any], capfd: pytest.CaptureFixture) -> None:
    """Someone made <remote>/nobody before nobody's first drain: nobody's checkpoints stay local."""
    daemon = pwd.getpwnam("daemon")
    nobody = pwd.getpwnam("nobody")
    folder = _remote(shared_cfg, user="nobody")
    folder.mkdir(parents=True)
    os.chown(folder, daemon.pw_uid, daemon.pw_gid)
    theirs = _ckpt(shared_cfg, "step-1")
    _chown_tree(theirs, nobody.pw_uid)
    assert _run(shared_cfg) == 1
    assert list(folder.iterdir()) == [] and theirs.is_dir()
    assert f"owned by uid {daemon.pw_uid}, not {nobody.pw_uid}" in capfd.readouterr().out


@as_root
def test_keep_local_counts_each_owners_checkpoints(shared_cfg: dict[str, Any]) -> None:
    """Two owners with three complete checkpoints each, keep_local 2: each keeps its newest two; the
    one pruned of each was verified under its owner's folder."""
    nobody = pwd.getpwnam("nobody")
    for i in range(3):
        _ckpt(shared_cfg, f"root-{i}", mtime=1_000_000 + i)
        _chown_tree(_ckpt(shared_cfg, f"nobody-{i}", mtime=1_000_100 + i), nobody.pw_uid)
    assert _run(shared_cfg) == 0
    left = sorted(p.name for p in Path(shared_cfg["staging_path"]).iterdir())
    assert left == ["nobody-1", "nobody-2", "root-1", "root-2"]
    assert (_remote(shared_cfg, "root-0") / ".complete").is_file()
    assert (_remote(shared_cfg, "nobody-0", user="nobody") / ".complete").is_file()
