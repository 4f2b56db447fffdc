"""Training jobs in containers (plan.containers; docs/containers.md): Slurm's `srun --container=<bundle>`
through oci.conf and runc, on two compute nodes of the lab.

Only where the plan has the oci runtime (tier3). The image is built on the nodes from the lab's own
files (no registry): a root file system of sh, env, cat and ls with their libraries, and a rootless
config.json from `runc spec --rootless`. The lab has no Lustre: the planned mount points are created
as folders with a marker file, which the container must see at the same paths. The job runs as an
unprivileged user, a tenant's (plan.tenants), created on the nodes with a fixed id (in the lab's
nested containers runc can only run rootless: docs/containers.md), with --cpu-bind=none (the lab's
task/affinity cannot bind a non-root task: "task_g_set_affinity: Operation not permitted").

Tenants (issue 37; docs/containers.md, "Who runs runc"): a user plants runc state with a poststop hook
where the runtime keeps its job's container state; root's RunTimeQuery/Kill/Delete (as slurmstepd 22.05
runs them) and the Epilog must never run the hook as root; another user can neither make nor write that
folder.
"""

from __future__ import annotations

import json
import shlex
import time
from typing import Any

import pytest
from conftest import hosts_with

UID = 3917  # the test user's id on every node (a tenant's user, so Slurm accounting knows it)
BUNDLE = "/var/tmp/gpucluster-container-test"
TOOLS = ("/bin/sh", "/usr/bin/env", "/usr/bin/cat", "/usr/bin/ls")
MARKER = ".gpucluster-container-test"


def _oci(plan: dict[str, Any]) -> dict[str, Any]:
    c = plan.get("containers") or {}
    if c.get("runtime") != "oci":
        pytest.skip(f"{plan['cluster']['tier']}: no oci container runtime in the plan (plan.containers.runtime)")
    return c


def test_runtime_files_are_the_plans(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    c = _oci(plan)
    for name in hosts_with(plan, "compute"):
        host = hosts[name]
        assert host.exists("runc"), f"{name}: runc missing"
        assert json.loads(host.file(c["config_file"]).content_string) == c["oci"]["config"]
        text = host.file("/etc/slurm/oci.conf").content_string
        lines = [line for line in text.splitlines() if "=" in line and not line.startswith("#")]
        assert {k: v.strip('"') for k, v in (line.split("=", 1) for line in lines)} == c["oci"]["conf"]
        assert host.file(c["oci"]["wrapper"]).mode == 0o755
        run_dir = host.file(c["oci"]["run_dir"])
        assert run_dir.user == "root" and not run_dir.mode & 0o022, f"{name}: {c['oci']['run_dir']} writable by others"


def _user(plan: dict[str, Any]) -> tuple[str, str]:
    """(user, account): the first tenant's first user."""
    team = next(t for t in plan["tenants"] if t["users"])
    return team["users"][0], team["name"]


def _add_user(host: Any, user: str) -> bool:
    """Create the test user with its fixed id; True when it was created now."""
    out = host.check_output(
        f"getent passwd {user} >/dev/null && echo exists || "
        f"useradd --uid {UID} --no-create-home --shell /usr/sbin/nologin {user}"
    )
    return "exists" not in out


def _setup(hosts: dict[str, Any], plan: dict[str, Any], c: dict[str, Any]) -> tuple[list[str], Any, str, str]:
    nodes = hosts_with(plan, "compute")[:2]
    head = hosts[plan["cluster"]["head"]]
    user, account = _user(plan)
    for name in nodes:
        _add_user(hosts[name], user)
        _prepare(hosts[name], c, name, user)
    if _add_user(head, user):
        head.check_output("scontrol reconfigure")  # slurmctld maps the new user's id to its association
    return nodes, head, user, account


def _prepare(host: Any, c: dict[str, Any], name: str, user: str) -> None:
    """The test user, a bundle built from the node's own files, the planned mount points with a marker."""
    libs = " ".join(TOOLS)
    marks = " ".join(shlex.quote(m["source"]) for m in c["mounts"])
    script = f"""
set -e
rm -rf {BUNDLE}; mkdir -p {BUNDLE}/rootfs; cd {BUNDLE}
for b in {libs}; do
  mkdir -p rootfs$(dirname $b); cp -L $b rootfs$b
  for l in $(ldd $b | grep -o '/[^ ]*'); do mkdir -p rootfs$(dirname $l); cp -L $l rootfs$l; done
done
mkdir -p rootfs/proc rootfs/sys rootfs/dev rootfs/tmp
runc spec --rootless
chown -R {user} {BUNDLE}
for m in {marks}; do mkdir -p "$m"; echo {name} > "$m/{MARKER}"; done
"""
    host.check_output(f"bash -c {shlex.quote(script)}")


def test_two_node_job_runs_in_a_local_image_with_the_planned_mounts_and_env(
    hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    c = _oci(plan)
    nodes, head, user, account = _setup(hosts, plan, c)
    targets = " ".join(m["target"] for m in c["mounts"])
    # the image has sh, env, cat and ls only: the node's name comes from the marker of its mounts
    inside = f'env; for t in {targets}; do echo "mount=$t:$(cat $t/{MARKER})"; done'
    out = head.check_output(
        f"cd /tmp && runuser -u {user} -- srun --account={account} --cpu-bind=none --nodes=2 --ntasks-per-node=1 "
        f"--nodelist={','.join(nodes)} --job-name=gpucluster-container-test --container={BUNDLE} "
        f"/bin/sh -c {shlex.quote(inside)} 2>/dev/null"
    )
    lines = out.splitlines()
    for key, value in c["env"].items():
        assert lines.count(f"{key}={value}") == 2, f"{key} not in both containers:\n{out}"
    for m in c["mounts"]:
        got = sorted(line.split(":", 1)[1] for line in lines if line.startswith(f"mount={m['target']}:"))
        assert got == sorted(nodes), f"{m['target']} not mounted from each node:\n{out}"


def test_the_jobs_container_state_is_gone_after_the_job(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    c = _oci(plan)
    nodes, head, user, account = _setup(hosts, plan, c)
    # srun, not sbatch: the lab's batch step of a non-root user fails its CPU binding and drains the node
    job = head.check_output(
        f"cd /tmp && runuser -u {user} -- srun --account={account} --cpu-bind=none --nodes=2 --ntasks-per-node=1 "
        f"--nodelist={','.join(nodes)} --container={BUNDLE} /bin/sh -c 'echo $SLURM_JOB_ID' 2>/dev/null | head -1"
    ).strip()
    assert job.isdigit(), job
    deadline = time.monotonic() + 60
    state = ""
    while state not in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
        assert time.monotonic() < deadline, head.check_output(f"scontrol show job {job}")
        time.sleep(0.5)  # the job ends, then its epilog: COMPLETING until the epilog is done
        state = head.check_output(f"squeue --noheader --jobs={job} --states=all --format=%T").strip()
    assert state == "COMPLETED", head.check_output(f"scontrol show job {job}")
    run_dir = c["oci"]["run_dir"]
    for name in nodes:
        left = hosts[name].check_output(f"find {run_dir} -mindepth 1 -maxdepth 2 -name '*{job}*'")
        assert not left.strip(), f"{name}: container state of job {job} left: {left}"


def _subst(pattern: str, node: str, user: str, job: str) -> str:
    """An oci.conf pattern as slurmstepd expands it for step 0, task 0 of ``job`` ([CR1])."""
    out = pattern
    for key, value in (("%n", node), ("%u", user), ("%j", job), ("%s", "0"), ("%t", "0")):
        out = out.replace(key, value)
    return out


def _task_folder(host: Any, c: dict[str, Any], name: str, user: str, job: str) -> str:
    """The task's bundle folder as slurmstepd 22.05 makes it (root: mkdir 0750, chown to the job's user)."""
    folder = _subst(c["oci"]["container_path"], name, user, job)
    host.check_output(f"mkdir -p -m 0750 {folder} && chown {user}: {folder}")
    return folder


def test_epilog_removes_what_a_jobs_container_left(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    c = _oci(plan)
    name = hosts_with(plan, "compute")[0]
    host = hosts[name]
    user, _account = _user(plan)
    _add_user(host, user)
    job = "987654"
    folder = _task_folder(host, c, name, user, job)
    state = _subst(c["oci"]["state_root"], name, user, job) + f"/{_subst(OCI_ID, name, user, job)}"
    keep = _task_folder(host, c, name, user, job + "1")  # another job's
    host.check_output(f"runuser -u {user} -- mkdir -p {state}")
    host.run(
        f"SLURM_JOB_ID={job} SLURM_JOB_UID={UID} SLURM_JOB_USER={user} {plan['health']['modes']['epilog']['program']}"
    )
    assert not host.file(folder).exists and not host.file(state).exists
    assert host.file(keep).exists
    host.check_output(f"rm -rf {keep} {c['oci']['run_dir']}/user-{user}")


# --- tenants (issue 37): a job's container state never makes root run what a user wrote ---------------

OCI_ID = "%n.%u.%j.%s.%t"  # oci.conf's container id pattern (plan.containers.oci.conf)
ATTACK = "/var/tmp/gpucluster-oci-attack"


def _plant(host: Any, user: str, state_root: str, cid: str) -> None:
    """As ``user``: a stopped container's runc state (runc 1.1's state.json) in ``state_root`` whose
    poststop hook writes the uid it runs as into the marker; runc runs poststop hooks on delete."""
    hook = f"{ATTACK}/drop/hook.sh"
    state = {
        "id": cid,
        "init_process_pid": 2**22 - 7,  # no such process: runc sees the container stopped
        "init_process_start": 1,
        "created": "2024-01-01T00:00:00Z",
        "config": {
            "rootfs": "/nonexistent",
            "cgroups": {"path": "/gpucluster-oci-attack", "memory": 0},
            "hooks": {"poststop": [{"path": hook, "args": ["hook.sh"]}]},
            "labels": ["bundle=/nonexistent"],
        },
        "rootless": True,
        "cgroup_paths": {},
        "namespace_paths": {},
        "external_descriptors": [],
    }
    script = (
        f"set -e; printf '#!/bin/sh\\nid -u > {ATTACK}/drop/marker\\n' > {hook}; chmod 755 {hook}; "
        f"mkdir -p {state_root}/{cid}; printf '%s' {shlex.quote(json.dumps(state))} > {state_root}/{cid}/state.json"
    )
    host.check_output(f"runuser -u {user} -- sh -c {shlex.quote(script)}")


def _marker_by_root(host: Any) -> str:
    """'' when the hook never ran as root; else what shows that it did."""
    marker = host.file(f"{ATTACK}/drop/marker")
    if not marker.exists:
        return ""
    if marker.uid == 0 or marker.content_string.strip() == "0":
        return f"the hook ran as root: marker owned by uid {marker.uid}, says uid {marker.content_string.strip()}"
    return ""


def test_a_poststop_hook_planted_in_runc_state_never_runs_as_root(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """A tenant plants state.json with a poststop hook where runc keeps the state of its job's container;
    root's RunTimeQuery/RunTimeKill/RunTimeDelete (oci.conf, as slurmstepd 22.05 runs them) and the Epilog
    run: the hook must never run as root (it may run as the user, or not at all)."""
    c = _oci(plan)
    name = hosts_with(plan, "compute")[0]
    host = hosts[name]
    user, _account = _user(plan)
    _add_user(host, user)
    job = "987660"
    cid = _subst(OCI_ID, name, user, job)
    state_root = _subst(c["oci"]["state_root"], name, user, job)
    host.check_output(f"rm -rf {ATTACK} && mkdir -m 0755 {ATTACK} && mkdir -m 1777 {ATTACK}/drop")
    try:
        folder = _task_folder(host, c, name, user, job)
        # the runtime commands, as slurmstepd runs them after the step: root, through /bin/sh -c
        _plant(host, user, state_root, cid)
        for key in ("RunTimeQuery", "RunTimeKill", "RunTimeDelete"):
            host.run(f"sh -c {shlex.quote(_subst(c['oci']['conf'][key], name, user, job))}")
            assert not _marker_by_root(host), f"{key}: {_marker_by_root(host)}"
        # the Epilog (root) on what the job left
        host.check_output(f"rm -f {ATTACK}/drop/marker; mkdir -p -m 0750 {folder}; chown {user}: {folder}")
        _plant(host, user, state_root, cid)
        epilog = plan["health"]["modes"]["epilog"]["program"]
        host.run(f"SLURM_JOB_ID={job} SLURM_JOB_UID={UID} SLURM_JOB_USER={user} {epilog}")
        assert not _marker_by_root(host), f"Epilog: {_marker_by_root(host)}"
    finally:
        host.run(f"rm -rf {ATTACK} {c['oci']['run_dir']}/job-{job}.* {c['oci']['run_dir']}/user-{user}")


def test_a_user_cannot_plant_or_write_another_users_state_folder(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """User B (another team) can neither make a folder or a link where the runtime keeps A's state (before
    A's job: pre-creating it, or a link slurmstepd's chown would follow) nor write into A's task folder."""
    c = _oci(plan)
    name = hosts_with(plan, "compute")[0]
    host = hosts[name]
    user_a, team_a = _user(plan)
    user_b = next(u for t in plan["tenants"] if t["name"] != team_a for u in t["users"])
    _add_user(host, user_a)
    add_b = f"useradd --uid {UID + 1} --no-create-home --shell /usr/sbin/nologin {user_b}"
    host.check_output(f"getent passwd {user_b} >/dev/null || {add_b}")
    job = "987670"
    run_dir = c["oci"]["run_dir"]
    a_state = _subst(c["oci"]["state_root"], name, user_a, job)
    a_folder = _subst(c["oci"]["container_path"], name, user_a, job)
    planted = [f"{run_dir}/user-{user_a}", a_state, a_folder, f"{run_dir}/job-{job}1.0.0"]
    host.check_output("rm -rf " + " ".join(planted))
    try:
        tries = {
            "pre-create A's state folder": f"mkdir -p {a_state}",
            "pre-create A's per-user folder": f"mkdir {run_dir}/user-{user_a}",
            "plant a link for a future task folder": f"ln -s /etc {run_dir}/job-{job}1.0.0",
        }
        for what, cmd in tries.items():
            out = host.run(f"runuser -u {user_b} -- sh -c {shlex.quote(cmd)}")
            assert out.rc != 0, f"{user_b} could {what}: {cmd}"
        host.check_output("rm -rf " + " ".join(planted))
        _task_folder(host, c, name, user_a, job)  # A's task folder, as slurmstepd makes it
        host.check_output(f"runuser -u {user_a} -- mkdir -p {a_state}")
        for cmd in (f"touch {a_folder}/x", f"mkdir {a_state}/x", f"touch {a_state}/x"):
            out = host.run(f"runuser -u {user_b} -- sh -c {shlex.quote(cmd)}")
            assert out.rc != 0, f"{user_b} could write A's state: {cmd}"
    finally:
        host.run("rm -rf " + " ".join(planted))
