"""Host side of gpucluster.tiers.host_files: write a role's rendered files in one module call.

The controller renders every template of a role for one host (plugins/action/host_files.py) and
sends the results here at once. Each file is compared by sha256, mode and owner; only a file that
differs is written, atomically (a temporary file in the destination's folder, checked by the
entry's ``validate`` command when it has one, then renamed over the old one). A folder of an entry
with ``mkdir`` is created (0755, root) as ansible.builtin.file would. An entry with ``unsafe_writes``
whose rename is refused (a bind-mounted /etc/hosts in a container: EBUSY) is written in place instead,
as Ansible's atomic_move does with unsafe_writes. In check mode nothing is written and the same paths
are reported. No controller import: this runs on the host.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: The largest file whose before/after text goes into a diff (ansible.builtin.copy's default).
MAX_DIFF_BYTES = 104448

#: A rename refused with one of these is retried as a write in place for an ``unsafe_writes`` entry
#: (the errors for which ansible.module_utils.basic.AnsibleModule.atomic_move falls back to
#: _unsafe_writes: a bind mount's target is EBUSY, another filesystem EXDEV).
UNSAFE_WRITE_ERRNOS: frozenset[int] = frozenset({errno.EPERM, errno.EXDEV, errno.EACCES, errno.ETXTBSY, errno.EBUSY})

#: Run a validate command (already with the temporary path in place of %s): (rc, message).
Validator = Callable[[str], tuple[int, str]]


class HostFilesError(Exception):
    """A file could not be written: its destination and why (the module fails with this text)."""


@dataclass(frozen=True)
class Wanted:
    """One file as the controller rendered it."""

    dest: str
    content: bytes
    mode: int
    validate: str | None = None
    mkdir: bool = False
    unsafe_writes: bool = False


@dataclass
class Outcome:
    """What changed (or would change in check mode)."""

    changed: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    diffs: list[dict[str, str]] = field(default_factory=list)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _attrs_differ(st: os.stat_result, mode: int, uid: int, gid: int) -> bool:
    return stat.S_IMODE(st.st_mode) != mode or st.st_uid != uid or st.st_gid != gid


def _folder(path: str, uid: int, gid: int, check: bool) -> bool:
    """Ensure ``path`` is a folder 0755 owned by uid:gid; whether anything changed."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not check:
            os.makedirs(path, mode=0o755, exist_ok=True)
            os.chmod(path, 0o755)
            os.chown(path, uid, gid)
        return True
    if not stat.S_ISDIR(st.st_mode):
        raise HostFilesError(f"{path} exists and is not a folder")
    if _attrs_differ(st, 0o755, uid, gid):
        if not check:
            os.chmod(path, 0o755)
            os.chown(path, uid, gid)
        return True
    return False


def _text(data: bytes | None) -> str:
    if data is None:
        return ""
    if len(data) > MAX_DIFF_BYTES or b"\x00" in data:
        return f"({len(data)} bytes, not shown)\n"
    return data.decode("utf-8", errors="replace")


def _write(want: Wanted, uid: int, gid: int, validator: Validator) -> None:
    folder = os.path.dirname(want.dest)
    if not os.path.isdir(folder):
        raise HostFilesError(f"{want.dest}: its folder {folder} does not exist (set mkdir: true on the entry)")
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(want.dest)}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(want.content)
            handle.flush()
            os.fchmod(handle.fileno(), want.mode)
            os.fchown(handle.fileno(), uid, gid)
            os.fsync(handle.fileno())
        if want.validate:
            if "%s" not in want.validate:
                raise HostFilesError(f"{want.dest}: validate {want.validate!r} must contain %s")
            rc, message = validator(want.validate.replace("%s", tmp))
            if rc != 0:
                raise HostFilesError(f"{want.dest}: failed to validate ({want.validate}): rc {rc}: {message}")
        try:
            os.replace(tmp, want.dest)
        except OSError as err:
            if not want.unsafe_writes or err.errno not in UNSAFE_WRITE_ERRNOS:
                raise
            _write_in_place(want, uid, gid)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _write_in_place(want: Wanted, uid: int, gid: int) -> None:
    """Overwrite ``want.dest`` in its inode (not atomic: a reader may see a partial file)."""
    with open(want.dest, "wb") as handle:
        handle.write(want.content)
        handle.flush()
        os.fchmod(handle.fileno(), want.mode)
        os.fchown(handle.fileno(), uid, gid)
        os.fsync(handle.fileno())


def sync(files: Sequence[Wanted], uid: int, gid: int, check: bool, validator: Validator, diff: bool = False) -> Outcome:
    """Write the files that differ from ``files`` (content, mode, owner); report what changed."""
    out = Outcome()
    for folder in dict.fromkeys(os.path.dirname(f.dest) for f in files if f.mkdir):
        if _folder(folder, uid, gid, check):
            out.folders.append(folder)
    for want in files:
        before = _read(want.dest)
        if before is not None and sha256(before) == sha256(want.content):
            st = os.stat(want.dest)
            if not _attrs_differ(st, want.mode, uid, gid):
                continue
            out.changed.append(want.dest)
            if not check:
                os.chmod(want.dest, want.mode)
                os.chown(want.dest, uid, gid)
            continue
        out.changed.append(want.dest)
        if diff:
            out.diffs.append(
                {
                    "before_header": want.dest if before is not None else "/dev/null",
                    "after_header": want.dest,
                    "before": _text(before),
                    "after": _text(want.content),
                }
            )
        if not check:
            _write(want, uid, gid, validator)
    return out


__all__ = [
    "MAX_DIFF_BYTES",
    "UNSAFE_WRITE_ERRNOS",
    "HostFilesError",
    "Outcome",
    "Validator",
    "Wanted",
    "sha256",
    "sync",
]
