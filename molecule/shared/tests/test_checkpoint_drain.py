"""Async checkpoints in the lab: the drain service on a compute node (plan.storage.checkpoint_drain).

The service, its units, rsync and the verification are real. What the lab cannot show: the remote
path is not on NFS here, because containers mount no NFS (no NFS client in their kernel; the compute
role starts the mount units on real hosts only), so the drain writes the planned remote path on the
node itself and the plan's remote_mount (the mount the drain requires on real hosts) is none. That
the copy is then visible from the other nodes is NFS's part, not the drain's. tier1 has no drain:
its checkpoints are saved on the node's local NVMe (storage local_nvme), the tests skip there.
"""

from __future__ import annotations

import shlex
import uuid
from typing import Any

import pytest
from conftest import hosts_with

SERVICE = "gpucluster-ckpt-drain.service"


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


def _write_checkpoint(node: Any, drain: dict[str, Any], name: str, complete: bool = True, at: int = 0) -> str:
    folder = f"{drain['staging_path']}/{name}"
    q = shlex.quote(folder)
    cmds = [f"mkdir -p {q}/shards"]
    cmds += [f"head -c {2**20 + i} /dev/urandom > {q}/shards/rank{i}.pt" for i in range(3)]
    cmds.append(f"echo '{{\"step\": 1}}' > {q}/meta.json")
    if complete:
        cmds.append(f"touch {'-d @' + str(at) if at else ''} {q}/{drain['marker']}")
    node.check_output(" && ".join(cmds))
    return folder


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


def _cleanup(node: Any, drain: dict[str, Any], *names: str) -> None:
    for name in names:
        for root in (drain["staging_path"], drain["remote_path"]):
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
    assert node.check_output("rsync --version").startswith("rsync")


def test_a_complete_checkpoint_drains_with_matching_checksums(node: Any, drain: dict[str, Any]) -> None:
    name, writing = f"lab-{uuid.uuid4().hex[:8]}", f"lab-writing-{uuid.uuid4().hex[:8]}"
    try:
        local = _write_checkpoint(node, drain, name)
        _write_checkpoint(node, drain, writing, complete=False)
        assert _drain_now(node) == 0
        remote = f"{drain['remote_path']}/{name}"
        assert node.file(f"{remote}/{drain['marker']}").is_file
        assert _sums(node, local) == _sums(node, remote) and len(_sums(node, remote)) == 4
        assert node.file(f"{local}/.drained").content_string == node.file(f"{remote}/{drain['marker']}").content_string
        # without its marker a checkpoint is still being written: not copied, not deleted
        assert not node.file(f"{drain['remote_path']}/{writing}").exists
        assert node.file(f"{drain['staging_path']}/{writing}").is_directory
        journal = node.check_output(f"journalctl -u {SERVICE} --no-pager -o cat -n 50")
        assert f"{name}: drained to {remote}, sizes and sha256 verified" in journal
        # idempotent: a second run copies nothing and succeeds
        assert _drain_now(node) == 0
        assert node.check_output(f"systemctl show -p Result --value {SERVICE}") == "success"
        journal = node.check_output(f"journalctl -u {SERVICE} --no-pager -o cat -n 200")
        assert journal.count(f"{name}: drained to") == 1
    finally:
        _cleanup(node, drain, name, writing)


def test_a_failed_drain_keeps_the_local_copy_and_the_unit_fails(node: Any, drain: dict[str, Any]) -> None:
    """The remote name is taken by a file, so the copy cannot be made (as a read-only or full target)."""
    name = f"lab-fail-{uuid.uuid4().hex[:8]}"
    remote = f"{drain['remote_path']}/{name}"
    try:
        # the blocker first: the drain's path unit starts as soon as the checkpoint's marker exists
        node.check_output(f"mkdir -p {shlex.quote(drain['remote_path'])} && echo blocker > {shlex.quote(remote)}")
        local = _write_checkpoint(node, drain, name)
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
        _cleanup(node, drain, name)
        node.run(f"systemctl reset-failed {SERVICE}")


def test_old_checkpoints_are_pruned_only_once_verified(node: Any, drain: dict[str, Any]) -> None:
    keep = drain["keep_local"]
    names = [f"lab-prune-{i}-{uuid.uuid4().hex[:6]}" for i in range(keep + 2)]
    blocked = names[0]
    try:
        node.check_output(f"mkdir -p {shlex.quote(drain['remote_path'])}")
        node.check_output(f"echo blocker > {shlex.quote(drain['remote_path'] + '/' + blocked)}")
        for i, name in enumerate(names):
            _write_checkpoint(node, drain, name, at=1_000_000_000 + i)
        assert _drain_now(node) != 0  # the blocked one
        left = {n for n in names if node.file(f"{drain['staging_path']}/{n}").exists}
        # the newest keep_local stay; of the older ones only the verified one went
        assert left == {blocked, *names[-keep:]}, left
        assert node.file(f"{drain['remote_path']}/{names[1]}/{drain['marker']}").is_file
    finally:
        _cleanup(node, drain, *names)
        node.run(f"systemctl reset-failed {SERVICE}")
