"""Async checkpoints in the lab: the drain service on a compute node (plan.storage.checkpoint_drain).

The service, its units, rsync and the verification are real. What the lab cannot show: the remote
path is not on NFS here, because containers mount no NFS (no NFS client in their kernel; the compute
role starts the mount units on real hosts only), so the drain writes the planned remote path on the
node itself and the plan's remote_mount (the mount the drain requires on real hosts) is none. That
the copy is then visible from the other nodes is NFS's part, not the drain's. tier1 has no drain:
its checkpoints are saved on the node's local NVMe (storage local_nvme), the tests skip there.

Checkpoints are written as the tenants' users do (runuser, two users of different teams from
plan.tenants, created on the node with fixed ids when missing and removed afterwards), and their
copies land under <remote>/<user>/<name>, made as that user (issue 37).
"""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import hosts_with

SERVICE = "gpucluster-ckpt-drain.service"
#: The test users' ids where they do not exist yet: team A's is test_containers.py's (the same user).
UIDS = (3917, 3918)


@pytest.fixture(scope="module")
def drain(plan: dict[str, Any]) -> dict[str, Any]:
    cfg = plan["storage"]["checkpoint_drain"]
    if not cfg["enabled"]:
        pytest.skip(
            f"storage is {plan['storage']['type']}: checkpoints are saved on the node's local NVMe "
            f"({plan['storage']['paths'].get('checkpoints')}), no shared path to drain to"
        )
    return cfg


@pytest.fixture(scope="module")
def node(hosts: dict[str, Any], plan: dict[str, Any], drain: dict[str, Any]) -> Any:
    return hosts[hosts_with(plan, "compute")[0]]


@pytest.fixture(scope="module")
def users(node: Any, plan: dict[str, Any], drain: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(A, B): the first users of two different teams, present on the node for the module's tests."""
    teams = [t for t in plan.get("tenants") or [] if t.get("users")]
    if len(teams) < 2:
        pytest.skip("the plan has fewer than two teams with users (plan.tenants)")
    pair = (teams[0]["users"][0], teams[1]["users"][0])
    created = []
    for user, uid in zip(pair, UIDS, strict=True):
        out = node.check_output(
            f"getent passwd {user} >/dev/null && echo exists || "
            f"useradd --uid {uid} --no-user-group --gid users --no-create-home --shell /usr/sbin/nologin {user}"
        )
        if "exists" not in out:
            created.append(user)
    yield pair
    for user in created:  # and their remote folders: nothing of theirs stays behind
        node.run(f"rm -rf {shlex.quote(_remote(drain, user))} && userdel {user}")


def _as(user: str, script: str) -> str:
    """A shell command that runs ``script`` as ``user`` (what that user's job could run)."""
    return f"runuser -u {user} -- sh -c {shlex.quote(script)}"


def _write_checkpoint(
    node: Any, drain: dict[str, Any], name: str, user: str, complete: bool = True, at: int = 0
) -> str:
    folder = f"{drain['staging_path']}/{name}"
    q = shlex.quote(folder)
    cmds = [f"mkdir -p {q}/shards"]
    cmds += [f"head -c {2**20 + i} /dev/urandom > {q}/shards/rank{i}.pt" for i in range(3)]
    cmds.append(f"echo '{{\"step\": 1}}' > {q}/meta.json")
    if complete:
        cmds.append(f"touch {'-d @' + str(at) if at else ''} {q}/{drain['marker']}")
    node.check_output(_as(user, " && ".join(cmds)))
    return folder


def _remote(drain: dict[str, Any], user: str, name: str = "") -> str:
    """Where ``user``'s checkpoint ``name`` is copied (the user's folder without a name)."""
    return f"{drain['remote_path']}/{user}" + (f"/{name}" if name else "")


def _drain_now(node: Any) -> int:
    """Run the drain as its timer does and wait for it (a oneshot's start returns when the run ended).

    Twice: a first start may join a run the timer began before the checkpoint was complete."""
    node.run(f"systemctl start {SERVICE}")
    return node.run(f"systemctl start {SERVICE}").rc


def _sums(node: Any, folder: str) -> dict[str, str]:
    out = node.check_output(
        f"cd {shlex.quote(folder)} && find . -type f ! -name '.*' -exec sha256sum {{}} + | sort -k2"
    )
    return {line.split()[1]: line.split()[0] for line in out.splitlines()}


def _cleanup(node: Any, drain: dict[str, Any], users: tuple[str, ...], *names: str) -> None:
    for name in names:
        for root in (drain["staging_path"], drain["remote_path"], *(_remote(drain, u) for u in users)):
            node.run(f"rm -rf {shlex.quote(f'{root}/{name}')}")


def test_units_and_config_from_the_plan(node: Any, drain: dict[str, Any]) -> None:
    assert node.service("gpucluster-ckpt-drain.path").is_enabled
    assert node.service("gpucluster-ckpt-drain.path").is_running
    assert node.service("gpucluster-ckpt-drain.timer").is_enabled
    assert node.service("gpucluster-ckpt-drain.timer").is_running
    staging = node.file(drain["staging_path"])
    assert staging.is_directory and staging.mode == 0o1777
    assert node.file(drain["program"]).mode == 0o755
    config = node.file(drain["config"]).content_string
    assert f'"bwlimit_kib": {drain["bwlimit_kib"]}' in config and '"remote_mount": null' in config
    assert f'"user_dir_mode": "{drain["user_dir_mode"]}"' in config
    assert node.check_output("rsync --version").startswith("rsync")


def test_a_complete_checkpoint_drains_with_matching_checksums(
    node: Any, drain: dict[str, Any], users: tuple[str, str]
) -> None:
    name, writing = f"lab-{uuid.uuid4().hex[:8]}", f"lab-writing-{uuid.uuid4().hex[:8]}"
    a = users[0]
    try:
        local = _write_checkpoint(node, drain, name, a)
        _write_checkpoint(node, drain, writing, a, complete=False)
        assert _drain_now(node) == 0
        remote = _remote(drain, a, name)
        assert node.file(f"{remote}/{drain['marker']}").is_file
        assert _sums(node, local) == _sums(node, remote) and len(_sums(node, remote)) == 4
        assert node.file(f"{local}/.drained").content_string == node.file(f"{remote}/{drain['marker']}").content_string
        # without its marker a checkpoint is still being written: not copied, not deleted
        assert not node.file(_remote(drain, a, writing)).exists
        assert node.file(f"{drain['staging_path']}/{writing}").is_directory
        journal = node.check_output(f"journalctl -u {SERVICE} --no-pager -o cat -n 50")
        assert f"{name}: drained to {remote}, sizes and sha256 verified" in journal
        # idempotent: a second run copies nothing and succeeds
        assert _drain_now(node) == 0
        assert node.check_output(f"systemctl show -p Result --value {SERVICE}") == "success"
        journal = node.check_output(f"journalctl -u {SERVICE} --no-pager -o cat -n 200")
        assert journal.count(f"{name}: drained to") == 1
    finally:
        _cleanup(node, drain, users, name, writing)


def _user_folder(node: Any, drain: dict[str, Any], user: str) -> None:
    """``user``'s remote folder, as the drain makes it (owner the user, the plan's mode)."""
    folder = shlex.quote(_remote(drain, user))
    node.check_output(
        f"mkdir -p {shlex.quote(drain['remote_path'])} && "
        f"(test -d {folder} || install -d -o {user} -g $(id -g {user}) -m {drain['user_dir_mode']} {folder})"
    )


def test_a_failed_drain_keeps_the_local_copy_and_the_unit_fails(
    node: Any, drain: dict[str, Any], users: tuple[str, str]
) -> None:
    """The remote name is taken by a file, so the copy cannot be made (as a read-only or full target)."""
    name = f"lab-fail-{uuid.uuid4().hex[:8]}"
    a = users[0]
    remote = _remote(drain, a, name)
    try:
        # the blocker first: the drain's path unit starts as soon as the checkpoint's marker exists
        _user_folder(node, drain, a)
        node.check_output(_as(a, f"echo blocker > {shlex.quote(remote)}"))
        local = _write_checkpoint(node, drain, name, a)
        assert _drain_now(node) != 0
        assert node.check_output(f"systemctl is-failed {SERVICE} || true") == "failed"
        assert node.file(local).is_directory and not node.file(f"{local}/.drained").exists
        journal = node.check_output(f"journalctl -u {SERVICE} --no-pager -o cat -n 50")
        assert f"{name}: drain failed, local copy kept" in journal
        # the target is back: the next run (the timer's, here started by hand) drains it
        node.check_output(f"rm -f {shlex.quote(remote)}")
        assert _drain_now(node) == 0
        assert node.check_output(f"systemctl show -p Result --value {SERVICE}") == "success"
        assert _sums(node, local) == _sums(node, remote)
    finally:
        _cleanup(node, drain, users, name)
        node.run(f"systemctl reset-failed {SERVICE}")


def test_old_checkpoints_are_pruned_only_once_verified(
    node: Any, drain: dict[str, Any], users: tuple[str, str]
) -> None:
    keep = drain["keep_local"]
    names = [f"lab-prune-{i}-{uuid.uuid4().hex[:6]}" for i in range(keep + 2)]
    blocked = names[0]
    a = users[0]
    try:
        _user_folder(node, drain, a)
        node.check_output(_as(a, f"echo blocker > {shlex.quote(_remote(drain, a, blocked))}"))
        for i, name in enumerate(names):
            _write_checkpoint(node, drain, name, a, at=1_000_000_000 + i)
        assert _drain_now(node) != 0  # the blocked one
        left = {n for n in names if node.file(f"{drain['staging_path']}/{n}").exists}
        # the newest keep_local stay; of the older ones only the verified one went
        assert left == {blocked, *names[-keep:]}, left
        assert node.file(f"{_remote(drain, a, names[1])}/{drain['marker']}").is_file
    finally:
        _cleanup(node, drain, users, *names)
        node.run(f"systemctl reset-failed {SERVICE}")


def _owners(node: Any, folder: str) -> set[str]:
    """The owners of ``folder`` and everything under it (no symlink followed)."""
    return set(node.check_output(f"find {shlex.quote(folder)} -printf '%u\\n'").split())


def test_another_team_cannot_overwrite_delete_or_redirect_a_checkpoint(
    node: Any, drain: dict[str, Any], users: tuple[str, str]
) -> None:
    """Issue 37, as tenant users: A's drained checkpoint stays intact and A's when B stages a checkpoint
    of the same name (the name is free again in this node's staging once A's copy is pruned, and any
    node's staging drains to the same shared path), a symlink to A's copy, a symlink to /etc, a
    checkpoint holding a symlink to /etc/shadow, and a symlink in B's own remote folder pointing at
    A's copy named like B's next checkpoint. B's copies land under B's folder only."""
    a, b = users
    uid = uuid.uuid4().hex[:8]
    name, link_a, link_etc, with_etc, nxt = (f"lab-{k}-{uid}" for k in ("same", "link-a", "link-etc", "shadow", "next"))
    names = (name, link_a, link_etc, with_etc, nxt)
    staging, remote = drain["staging_path"], drain["remote_path"]
    marker = drain["marker"]
    try:
        # team A: a checkpoint, drained
        _write_checkpoint(node, drain, name, a)
        assert _drain_now(node) == 0
        copy_a = _remote(drain, a, name)
        sums_a = _sums(node, copy_a)
        record_a = node.file(f"{copy_a}/{marker}").content_string
        assert len(sums_a) == 4 and record_a
        node.check_output(_as(a, f"rm -rf {shlex.quote(f'{staging}/{name}')}"))  # A's job moves on
        # team B: the same name; a symlink to A's copy; one to /etc; a checkpoint holding a symlink out
        sums_b = _sums(node, _write_checkpoint(node, drain, name, b))  # B's local copy may be pruned below
        node.check_output(_as(b, f"ln -s {shlex.quote(copy_a)} {shlex.quote(f'{staging}/{link_a}')}"))
        node.check_output(_as(b, f"ln -s /etc {shlex.quote(f'{staging}/{link_etc}')}"))
        shadow = _write_checkpoint(node, drain, with_etc, b)
        node.check_output(_as(b, f"ln -s /etc/shadow {shlex.quote(f'{shadow}/shards/rank9.pt')}"))
        assert _drain_now(node) != 0  # the checkpoint holding a symlink does not drain
        # B's next checkpoint, through a symlink B put in B's own remote folder, at A's copy
        node.check_output(_as(b, f"ln -s {shlex.quote(copy_a)} {shlex.quote(_remote(drain, b, nxt))}"))
        _write_checkpoint(node, drain, nxt, b)
        assert _drain_now(node) != 0

        # A's copy: intact, A's alone
        assert _sums(node, copy_a) == sums_a
        assert node.file(f"{copy_a}/{marker}").content_string == record_a
        folder_a = node.file(_remote(drain, a))
        assert folder_a.is_directory and not folder_a.is_symlink
        assert folder_a.user == a and folder_a.mode == int(drain["user_dir_mode"], 8)
        assert _owners(node, _remote(drain, a)) == {a}
        # B's copy: under B's folder only, B's
        copy_b = _remote(drain, b, name)
        assert _sums(node, copy_b) == sums_b != sums_a
        assert _owners(node, _remote(drain, b)) == {b}
        assert node.file(_remote(drain, b, nxt)).is_symlink  # left as B made it, nothing written through it
        # nothing outside was read or written: no unscoped copy, no symlink followed
        for n in names:
            assert not node.file(f"{remote}/{n}").exists, n
        for n in (link_a, link_etc):
            assert not node.file(_remote(drain, b, n)).exists, n
        assert not node.file(f"{_remote(drain, b, with_etc)}/{marker}").exists
        assert node.check_output(f"find {shlex.quote(remote)} -name shadow -o -name passwd -o -name rank9.pt") == ""
        assert node.file("/etc/hostname").is_file and node.file("/etc/shadow").user == "root"
        journal = node.check_output(f"journalctl -u {SERVICE} --no-pager -o cat -n 100")
        assert f"{with_etc}: drain failed, local copy kept" in journal
        assert f"{nxt}: drain failed, local copy kept" in journal and "is a symlink" in journal
    finally:
        _cleanup(node, drain, users, *names)
        node.run(f"systemctl reset-failed {SERVICE}")
