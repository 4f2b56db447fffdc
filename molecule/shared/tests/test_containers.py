"""Training jobs in containers (plan.containers; docs/containers.md): Slurm's `srun --container=<bundle>`
through oci.conf and runc, on two compute nodes of the lab.

Only where the plan has the oci runtime (tier3). The image is built on the nodes from the lab's own
files (no registry): a root file system of sh, env, cat and ls with their libraries, and a rootless
config.json from `runc spec --rootless`. The lab has no Lustre: the planned mount points are created
as folders with a marker file, which the container must see at the same paths. The job runs as an
unprivileged user, a tenant's (plan.tenants), created on the nodes with a fixed id (in the lab's
nested containers runc can only run rootless: docs/containers.md), with --cpu-bind=none (the lab's
task/affinity cannot bind a non-root task: "task_g_set_affinity: Operation not permitted").
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
        assert host.file(c["oci"]["run_dir"]).mode == 0o1777


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


def test_epilog_removes_what_a_jobs_container_left(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    c = _oci(plan)
    name = hosts_with(plan, "compute")[0]
    host = hosts[name]
    run_dir = c["oci"]["run_dir"]
    user, _account = _user(plan)
    job = "987654"
    left = [f"{run_dir}/user-{user}/{name}.{user}.{job}.0.0", f"{run_dir}/job-{job}.0.0"]
    keep = f"{run_dir}/user-{user}/{name}.{user}.{job}1.0.0"  # another job's
    host.check_output("mkdir -p " + " ".join([*left, keep]))
    host.run(f"SLURM_JOB_ID={job} SLURM_JOB_UID={UID} {plan['health']['modes']['epilog']['program']}")
    assert not any(host.file(p).exists for p in left)
    assert host.file(keep).exists
    host.check_output(f"rm -rf {keep}")
