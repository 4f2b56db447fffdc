"""The converge lock's logic: one site.yml at a time per cluster, held in a file on the head.

The lock file (``/run/gpucluster/converge.lock`` by default, JSON) names its holder: the run id,
the controller's hostname, the pid of the ansible-playbook process (or of the tool that drives
several, tools/ci/run_slices.py), that process's start time (``/proc/<pid>/stat`` field 22, so a
reused pid is not taken for the holder) and when the head granted it (the head's clock, so ages
never compare two machines' clocks).

Every read-decide-write happens under ``flock(2)`` on a guard file beside the lock, so two runs
deciding at once are serialised by the head's kernel; the first creation also uses
``O_CREAT | O_EXCL`` (open(2): "if pathname already exists, then open() fails with EEXIST").

Decisions (:func:`decide`), in order:

- no lock file: create it (``acquired``);
- the same run id: join (``joined``: the slices of one sliced run share the lock);
- ``force`` (``gpucluster_lock_break=true``): replace it (``broken``);
- ``stale_token`` equals the holder's token: the caller (the action plugin, on the holder's own
  controller) found the holder's process dead: replace it (``taken_over``);
- older than ``max_age_s`` on the head's clock: replace it (``stale``);
- else: refuse (``held``), naming the holder.

Release removes the file only for its holder (same run id) or with ``force``.
Python 3.10 compatible: this file runs on the managed hosts.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

#: Four hours: longer than a tier4 converge in the lab (~10 min) by far; a real site sets its own
#: (gpucluster_lock_max_age_s) above its longest converge.
DEFAULT_MAX_AGE_S = 4 * 3600


@dataclass(frozen=True)
class Holder:
    """Who holds (or asks for) the lock."""

    run_id: str
    controller: str
    pid: int
    pid_start: str = ""
    user: str = ""
    playbook: str = ""
    acquired: float = 0.0

    @classmethod
    def from_dict(cls, data: Any) -> Holder:
        data = data if isinstance(data, dict) else {}
        try:
            pid = int(data.get("pid") or 0)
        except (TypeError, ValueError):
            pid = 0
        try:
            acquired = float(data.get("acquired") or 0.0)
        except (TypeError, ValueError):
            acquired = 0.0
        return cls(
            run_id=str(data.get("run_id") or ""),
            controller=str(data.get("controller") or ""),
            pid=pid,
            pid_start=str(data.get("pid_start") or ""),
            user=str(data.get("user") or ""),
            playbook=str(data.get("playbook") or ""),
            acquired=acquired,
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["acquired_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.acquired)) if self.acquired else ""
        return out

    @property
    def token(self) -> str:
        """What a takeover must name: the holder it judged dead, and no other."""
        return f"{self.controller}:{self.pid}:{self.pid_start}:{self.run_id}"

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.acquired)) if self.acquired else "?"
        who = f"{self.user}@" if self.user else ""
        return f"run {self.run_id or '?'} by {who}{self.controller or '?'} pid {self.pid or '?'} since {when}"


@dataclass(frozen=True)
class Decision:
    action: str  # create | join | replace | refuse
    status: str  # acquired | joined | broken | taken_over | stale | held
    reason: str = ""


@dataclass
class Outcome:
    changed: bool
    status: str
    holder: dict[str, Any] | None
    previous: dict[str, Any] | None = None
    msg: str = ""
    warnings: list[str] = field(default_factory=list)


def decide(
    existing: Holder | None,
    me: Holder,
    now: float,
    max_age_s: int = DEFAULT_MAX_AGE_S,
    force: bool = False,
    stale_token: str = "",
) -> Decision:
    """What to do with the lock file ``existing`` (None: there is none) when ``me`` asks for it."""
    if existing is None:
        return Decision("create", "acquired")
    if me.run_id and existing.run_id == me.run_id:
        return Decision("join", "joined", f"run {me.run_id} holds the lock already")
    if force:
        return Decision("replace", "broken", f"lock of {existing.describe()} broken (gpucluster_lock_break)")
    if stale_token and stale_token == existing.token:
        return Decision(
            "replace",
            "taken_over",
            f"lock of {existing.describe()} taken over: that process no longer runs on {existing.controller}",
        )
    age = now - existing.acquired
    if existing.acquired and age > max_age_s:
        return Decision(
            "replace",
            "stale",
            f"lock of {existing.describe()} is {int(age)} s old (> max age {max_age_s} s): taken over",
        )
    return Decision("refuse", "held", f"converge lock held: {existing.describe()}")


def read_holder(path: str) -> Holder | None:
    """The lock file's holder; None when there is no file. An unreadable file names nobody but keeps its age."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        data = {}
    holder = Holder.from_dict(data)
    if not holder.acquired:
        with contextlib.suppress(OSError):
            holder = Holder(**{**asdict(holder), "acquired": os.stat(path).st_mtime})
    return holder


def _write(path: str, holder: Holder, exclusive: bool) -> None:
    text = json.dumps(holder.to_dict(), sort_keys=True) + "\n"
    if exclusive:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)  # rename(2) is atomic: readers see the old or the new holder


class _Guard:
    """flock(2) on ``<path>.guard`` for one read-decide-write."""

    def __init__(self, path: str) -> None:
        self.path = f"{path}.guard"
        self.fd = -1

    def __enter__(self) -> _Guard:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def acquire(
    path: str,
    me: Holder,
    *,
    now: float | None = None,
    max_age_s: int = DEFAULT_MAX_AGE_S,
    force: bool = False,
    stale_token: str = "",
    check_mode: bool = False,
) -> Outcome:
    """Take the lock for ``me`` (or join, or refuse); in check mode only say what would happen."""
    now = time.time() if now is None else now
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        if check_mode:
            return Outcome(True, "acquired", None, msg="no lock yet (its folder is missing)")
        os.makedirs(directory, mode=0o755, exist_ok=True)
    if check_mode:
        existing = read_holder(path)
        decision = decide(existing, me, now, max_age_s, force, stale_token)
        return _outcome(decision, existing, me, now, changed=decision.action in ("create", "replace"))
    with _Guard(path):
        existing = read_holder(path)
        decision = decide(existing, me, now, max_age_s, force, stale_token)
        mine = Holder(**{**asdict(me), "acquired": now})
        if decision.action == "create":
            try:
                _write(path, mine, exclusive=True)
            except OSError as exc:  # pragma: no cover - only without the guard (another tool)
                if exc.errno != errno.EEXIST:
                    raise
                existing = read_holder(path)
                decision = Decision("refuse", "held", f"converge lock held: {existing.describe() if existing else '?'}")
        elif decision.action == "replace":
            _write(path, mine, exclusive=False)
        return _outcome(decision, existing, me, now, changed=decision.action in ("create", "replace"))


def _outcome(decision: Decision, existing: Holder | None, me: Holder, now: float, changed: bool) -> Outcome:
    mine = Holder(**{**asdict(me), "acquired": now})
    if decision.action == "refuse":
        return Outcome(False, "held", existing.to_dict() if existing else None, msg=decision.reason)
    if decision.action == "join":
        return Outcome(False, "joined", existing.to_dict() if existing else None, msg=decision.reason)
    previous = existing.to_dict() if existing else None
    warnings = [decision.reason] if decision.action == "replace" else []
    return Outcome(changed, decision.status, mine.to_dict(), previous, decision.reason or "lock taken", warnings)


def release(path: str, me: Holder, *, force: bool = False, check_mode: bool = False) -> Outcome:
    """Remove the lock when ``me`` holds it (same run id) or with ``force``; leave another run's lock."""
    if not os.path.exists(path):
        return Outcome(False, "absent", None, msg="no converge lock")
    with contextlib.nullcontext() if check_mode else _Guard(path):
        existing = read_holder(path)
        if existing is None:
            return Outcome(False, "absent", None, msg="no converge lock")
        mine = bool(me.run_id) and existing.run_id == me.run_id
        if not (mine or force):
            return Outcome(
                False,
                "not_holder",
                existing.to_dict(),
                msg=f"converge lock left in place: held by {existing.describe()}, not by run {me.run_id or '?'}",
                warnings=[f"converge lock not released: it belongs to {existing.describe()}"],
            )
        if not check_mode:
            os.unlink(path)
        warnings = [] if mine else [f"lock of {existing.describe()} removed (gpucluster_lock_break)"]
        return Outcome(True, "released", None, existing.to_dict(), "converge lock released", warnings)
