"""host_files (plugins/module_utils/host_files.py): write only what differs, atomically, validated."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils.host_files import (
    UNSAFE_WRITE_ERRNOS,
    HostFilesError,
    Wanted,
    sync,
)

UID, GID = os.getuid(), os.getgid()


def ok(command: str) -> tuple[int, str]:
    return 0, ""


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_is_written_with_its_mode_and_reported(tmp_path: Path) -> None:
    dest = tmp_path / "etc" / "a.conf"
    dest.parent.mkdir()
    out = sync([Wanted(str(dest), b"x=1\n", 0o640)], UID, GID, check=False, validator=ok, diff=True)
    assert out.changed == [str(dest)] and dest.read_bytes() == b"x=1\n" and mode(dest) == 0o640
    assert out.diffs == [{"before_header": "/dev/null", "after_header": str(dest), "before": "", "after": "x=1\n"}]
    assert [p.name for p in dest.parent.iterdir()] == ["a.conf"]  # no temporary file left


def test_an_equal_file_is_left_alone_and_a_changed_one_rewritten(tmp_path: Path) -> None:
    same, other = tmp_path / "same", tmp_path / "other"
    same.write_bytes(b"keep\n")
    other.write_bytes(b"old\n")
    os.chmod(same, 0o644)
    os.chmod(other, 0o644)
    before = same.stat().st_mtime_ns
    files = [Wanted(str(same), b"keep\n", 0o644), Wanted(str(other), b"new\n", 0o644)]
    out = sync(files, UID, GID, check=False, validator=ok, diff=True)
    assert out.changed == [str(other)] and other.read_bytes() == b"new\n"
    assert same.stat().st_mtime_ns == before
    assert out.diffs[0]["before"] == "old\n" and out.diffs[0]["after"] == "new\n"
    assert sync(files, UID, GID, check=False, validator=ok).changed == []  # idempotent


def test_a_wrong_mode_alone_is_fixed_without_rewriting(tmp_path: Path) -> None:
    dest = tmp_path / "f"
    dest.write_bytes(b"a\n")
    os.chmod(dest, 0o600)
    out = sync([Wanted(str(dest), b"a\n", 0o644)], UID, GID, check=False, validator=ok, diff=True)
    assert out.changed == [str(dest)] and mode(dest) == 0o644 and out.diffs == []


def test_check_mode_reports_and_writes_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "new.d" / "f"
    old = tmp_path / "old"
    old.write_bytes(b"1\n")
    files = [Wanted(str(dest), b"x\n", 0o644, mkdir=True), Wanted(str(old), b"2\n", 0o644)]
    out = sync(files, UID, GID, check=True, validator=ok)
    assert out.changed == [str(dest), str(old)] and out.folders == [str(dest.parent)]
    assert not dest.parent.exists() and old.read_bytes() == b"1\n"


def test_mkdir_creates_the_folder_0755_and_fixes_its_mode(tmp_path: Path) -> None:
    made = tmp_path / "made" / "deep"
    out = sync([Wanted(str(made / "f"), b"x\n", 0o644, mkdir=True)], UID, GID, check=False, validator=ok)
    assert out.folders == [str(made)] and mode(made) == 0o755
    os.chmod(made, 0o700)
    out = sync([Wanted(str(made / "f"), b"x\n", 0o644, mkdir=True)], UID, GID, check=False, validator=ok)
    assert out.folders == [str(made)] and out.changed == [] and mode(made) == 0o755


def test_without_mkdir_a_missing_folder_is_an_error_naming_the_entry(tmp_path: Path) -> None:
    with pytest.raises(HostFilesError, match="set mkdir: true"):
        sync([Wanted(str(tmp_path / "no" / "f"), b"x\n", 0o644)], UID, GID, check=False, validator=ok)


def test_a_failed_validation_keeps_the_old_file_and_names_the_command(tmp_path: Path) -> None:
    dest = tmp_path / "nft"
    dest.write_bytes(b"good\n")
    seen: list[str] = []

    def refuse(command: str) -> tuple[int, str]:
        seen.append(command)
        assert Path(command.split()[-1]).read_bytes() == b"bad\n"  # the new content, in a temporary file
        return 1, "syntax error"

    with pytest.raises(HostFilesError, match=r"failed to validate \(nft --check --file %s\): rc 1: syntax error"):
        sync([Wanted(str(dest), b"bad\n", 0o644, validate="nft --check --file %s")], UID, GID, False, refuse)
    assert dest.read_bytes() == b"good\n" and sorted(p.name for p in tmp_path.iterdir()) == ["nft"]
    assert seen and seen[0].startswith("nft --check --file " + str(tmp_path))


def test_a_passing_validation_installs_the_file(tmp_path: Path) -> None:
    dest = tmp_path / "rules.yml"
    out = sync([Wanted(str(dest), b"r\n", 0o644, validate="promtool check rules %s")], UID, GID, False, ok)
    assert out.changed == [str(dest)] and dest.read_bytes() == b"r\n"


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=64), st.sampled_from([0o600, 0o644, 0o755])), max_size=5))
def test_a_second_sync_of_anything_changes_nothing(tmp_path_factory: pytest.TempPathFactory, data: list) -> None:
    root = tmp_path_factory.mktemp("sync")
    files = [Wanted(str(root / f"f{i}"), content, m) for i, (content, m) in enumerate(data)]
    first = sync(files, UID, GID, check=False, validator=ok)
    assert first.changed == [f.dest for f in files]
    assert sync(files, UID, GID, check=False, validator=ok).changed == []
    assert all(Path(f.dest).read_bytes() == f.content and mode(Path(f.dest)) == f.mode for f in files)


def _refuse_rename(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    def refused(src: str, dst: str) -> None:
        raise OSError(code, os.strerror(code), dst)

    monkeypatch.setattr(os, "replace", refused)


def test_unsafe_writes_writes_in_place_when_the_rename_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bind-mounted file (/etc/hosts in a container): the rename over it fails with EBUSY."""
    dest = tmp_path / "hosts"
    dest.write_bytes(b"127.0.0.1 localhost\n")
    inode = dest.stat().st_ino
    _refuse_rename(monkeypatch, errno.EBUSY)
    out = sync([Wanted(str(dest), b"10.0.0.1 head01\n", 0o644, unsafe_writes=True)], UID, GID, False, ok)
    assert out.changed == [str(dest)] and dest.read_bytes() == b"10.0.0.1 head01\n" and mode(dest) == 0o644
    assert dest.stat().st_ino == inode  # the same file, written in place
    assert [p.name for p in tmp_path.iterdir()] == ["hosts"]  # no temporary file left


def test_without_unsafe_writes_a_refused_rename_fails_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "hosts"
    dest.write_bytes(b"old\n")
    _refuse_rename(monkeypatch, errno.EBUSY)
    with pytest.raises(OSError, match="busy"):
        sync([Wanted(str(dest), b"new\n", 0o644)], UID, GID, False, ok)
    assert dest.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["hosts"]


def test_unsafe_writes_falls_back_only_for_the_errors_ansible_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert {errno.EBUSY, errno.EXDEV} <= UNSAFE_WRITE_ERRNOS and errno.ENOSPC not in UNSAFE_WRITE_ERRNOS
    dest = tmp_path / "hosts"
    dest.write_bytes(b"old\n")
    _refuse_rename(monkeypatch, errno.ENOSPC)
    with pytest.raises(OSError, match="No space"):
        sync([Wanted(str(dest), b"new\n", 0o644, unsafe_writes=True)], UID, GID, False, ok)
    assert dest.read_bytes() == b"old\n"
