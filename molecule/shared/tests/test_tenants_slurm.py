"""Slurm against its own users (plan.slurm.tenancy; docs/security.md, the threat model).

Each check runs as an unprivileged tenant user (plan.tenants: two users of two teams), created on the
head and one compute node with fixed ids, a login shell and a home (the lab has no shared homes):

- PrivateData: user B's ``squeue`` and ``scontrol show job`` do not show user A's job; A and root
  (what the queue exporter runs as) do;
- pam_slurm_adopt: A's ssh from the head to a compute node where A has no job is refused; with A's job
  running there the same key is admitted and the session is adopted into the job (pam_slurm_adopt sets
  SLURM_JOB_ID only after the job's extern step took the process; with proctrack/cgroup, outside the lab,
  the session's cgroup is the job's too; the lab's containers track processes with proctrack/linuxproc:
  docs/lab.md);
- slurm.conf carries PrivateData and CommunicationParameters=block_null_hash, and slurmctld runs with them;
- StateSaveLocation (job scripts and environments) is the slurm user's alone, 0700.

Tiers without two teams (tier1) skip the user checks; the ssh checks need a compute node that is not the
head (tier1's single host is also the login host, where adoption stays off).
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import hosts_with

#: the tenants' users get ids from here in plan order (test_containers.py gives the first user 3917 too)
FIRST_UID = 3917
SSH = "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=15"


def _head(hosts: dict[str, Any], plan: dict[str, Any]) -> Any:
    return hosts[plan["cluster"]["head"]]


def _two_users(plan: dict[str, Any]) -> tuple[tuple[str, str, int], tuple[str, str, int]]:
    """((user, account, uid) of team 1's first user, the same of another team's first user)."""
    teams = [t for t in plan.get("tenants") or [] if t["users"]]
    if len(teams) < 2:
        pytest.skip(f"{plan['cluster']['tier']}: fewer than two teams with users (plan.tenants)")
    every = [u for t in plan["tenants"] for u in t["users"]]
    a, b = teams[0], teams[1]
    ua, ub = a["users"][0], b["users"][0]
    return (ua, a["name"], FIRST_UID + every.index(ua)), (ub, b["name"], FIRST_UID + every.index(ub))


def _login_user(host: Any, user: str, uid: int) -> bool:
    """``user`` with ``uid``, a shell and a home of its own on ``host``; True when the account was created now."""
    home = f"/home/{user}"
    out = host.check_output(
        f"if getent passwd {user} >/dev/null; then usermod --shell /bin/bash --home {home} {user} && echo exists; "
        f"else useradd --uid {uid} --home-dir {home} --shell /bin/bash {user}; fi; "
        f"mkdir -p {home}/.ssh && chown -R {user}: {home} && chmod 0700 {home} {home}/.ssh"
    )
    return "exists" not in out


def _as(user: str, command: str) -> str:
    return f"cd /tmp && runuser -u {user} -- {command}"


def _cancel(head: Any, job: str) -> None:
    head.run(f"scancel {job}")


@pytest.fixture(scope="module")
def tenants(hosts: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """Users A and B on the head (A also on the node of the ssh checks, when the tier has one)."""
    (ua, acc_a, uid_a), (ub, acc_b, uid_b) = _two_users(plan)
    head_name = plan["cluster"]["head"]
    head = hosts[head_name]
    nodes = [n for n in hosts_with(plan, "compute") if n != head_name]
    created = _login_user(head, ua, uid_a) | _login_user(head, ub, uid_b)
    if nodes:
        _login_user(hosts[nodes[0]], ua, uid_a)
    if created:
        head.check_output("scontrol reconfigure")  # slurmctld maps the new users' ids to their associations
    return {"a": ua, "account_a": acc_a, "b": ub, "account_b": acc_b, "node": nodes[0] if nodes else None}


def test_slurm_conf_hides_other_users_data_and_blocks_null_hash(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    shown = _head(hosts, plan).check_output("scontrol show config")
    conf = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in shown.splitlines()) if v}
    private = set(conf["PrivateData"].split(","))
    assert {"jobs", "usage", "users", "accounts", "reservations"} <= private, conf["PrivateData"]
    assert "block_null_hash" in conf.get("CommunicationParameters", ""), conf.get("CommunicationParameters")


def test_a_user_sees_only_their_own_jobs(hosts: dict[str, Any], plan: dict[str, Any], tenants: dict[str, Any]) -> None:
    head = _head(hosts, plan)
    a, b = tenants["a"], tenants["b"]
    # held: it stays pending and takes no node
    job = head.check_output(
        _as(
            a, f"sbatch --parsable --hold --account={tenants['account_a']} --job-name=tenant-a-secret --wrap 'sleep 60'"
        )
    ).split(";")[0]
    try:
        assert job in head.check_output(_as(a, "squeue --noheader --format=%i")).split(), "A does not see A's job"
        assert f"JobId={job} " in head.check_output(_as(a, f"scontrol show job {job}"))
        # root (the queue exporter today) and SlurmUser see every job
        assert job in head.check_output("squeue --noheader --all --format=%i").split()

        listed = head.run(_as(b, "squeue --noheader --all --format='%i %j %u'"))
        assert listed.rc == 0, listed.stderr
        assert job not in listed.stdout.split() and "tenant-a-secret" not in listed.stdout, listed.stdout
        shown = head.run(_as(b, f"scontrol show job {job}"))
        assert f"JobId={job}" not in shown.stdout and "tenant-a-secret" not in shown.stdout, shown.stdout
    finally:
        _cancel(head, job)


def _node(tenants: dict[str, Any], plan: dict[str, Any]) -> str:
    if not tenants["node"]:
        pytest.skip(f"{plan['cluster']['tier']}: no compute node apart from the head (the login host)")
    if not plan["slurm"].get("tenancy", {}).get("pam_adopt", {}).get("enabled", True):
        pytest.skip("gpucluster_slurm.pam_slurm_adopt is false")
    return str(tenants["node"])


def _user_key(hosts: dict[str, Any], plan: dict[str, Any], user: str, node: str) -> None:
    """An ssh key of ``user`` on the head, authorized for ``user`` on ``node``."""
    head = _head(hosts, plan)
    key = f"/home/{user}/.ssh/id_ed25519"
    head.check_output(_as(user, f"sh -c 'test -f {key} || ssh-keygen -q -t ed25519 -N \"\" -f {key}'"))
    pub = head.check_output(f"cat {key}.pub").strip()
    keys = f"/home/{user}/.ssh/authorized_keys"
    hosts[node].check_output(f"echo {shlex.quote(pub)} > {keys} && chown {user}: {keys} && chmod 0600 {keys}")


def _ssh(hosts: dict[str, Any], plan: dict[str, Any], user: str, node: str, command: str) -> tuple[int, str]:
    """(ssh's exit status, its output and errors): ``user``'s ssh from the head to ``node``. The status is
    printed, not returned: testinfra takes an exit status 255 (ssh's own failure) for a lost lab connection."""
    address = plan["hosts"][node]["addresses"]["management"]
    out = _head(hosts, plan).check_output(
        _as(user, f"sh -c {shlex.quote(f'{SSH} {address} {shlex.quote(command)} 2>&1; echo ssh-rc=$?')}")
    )
    body, _, rc = out.rpartition("ssh-rc=")
    return int(rc.strip()), body


@pytest.fixture
def running_job(hosts: dict[str, Any], plan: dict[str, Any], tenants: dict[str, Any]) -> Iterator[str]:
    """A's allocation on the ssh node, released afterwards. An allocation without a shell (salloc
    --no-shell): with PrologFlags=Contain the node starts the job's extern step and nothing else. (A batch
    script of a non-root user can fail in the lab's containers, where task/affinity's binding races the
    step's setuid without CAP_SYS_NICE, "task_g_set_affinity: Operation not permitted", and drain the node.)"""
    head = _head(hosts, plan)
    node = _node(tenants, plan)
    granted = head.check_output(
        _as(
            tenants["a"],
            f"salloc --no-shell --account={tenants['account_a']} --nodelist={node} --mem=64M --time=5 "
            "--job-name=tenant-a-adopt 2>&1",
        )
    )
    found = re.search(r"Granted job allocation (\d+)", granted)
    assert found, granted
    job = found.group(1)
    try:
        deadline = time.monotonic() + 90
        state = ""
        while time.monotonic() < deadline:
            state = head.check_output(f"squeue --noheader --all --jobs={job} --format=%T").strip()
            if state == "RUNNING":
                break
            time.sleep(0.5)
        assert state == "RUNNING", f"job {job} on {node}: {state or 'gone'}"
        yield job
    finally:
        _cancel(head, job)


def test_ssh_to_a_node_without_a_job_is_refused(
    hosts: dict[str, Any], plan: dict[str, Any], tenants: dict[str, Any]
) -> None:
    node = _node(tenants, plan)
    user = tenants["a"]
    _user_key(hosts, plan, user, node)
    held = _head(hosts, plan).check_output(f"squeue --noheader --all --user={user} --nodelist={node} --format=%i")
    assert not held.strip(), f"{user} still has jobs on {node}: {held}"
    rc, out = _ssh(hosts, plan, user, node, "echo logged-in")
    assert rc != 0 and "logged-in" not in out, f"{user} logged in to {node} without a job: {out}"
    assert "Access denied by pam_slurm_adopt" in out, out


def test_ssh_with_a_job_is_admitted_into_the_job(
    hosts: dict[str, Any], plan: dict[str, Any], tenants: dict[str, Any], running_job: str
) -> None:
    node = _node(tenants, plan)
    user = tenants["a"]
    _user_key(hosts, plan, user, node)
    rc, out = _ssh(hosts, plan, user, node, "echo job=$SLURM_JOB_ID; cat /proc/self/cgroup")
    assert rc == 0, f"{user} with job {running_job} refused on {node}: {out}"
    # pam_slurm_adopt puts SLURM_JOB_ID into the session only once the job's extern step has adopted it
    assert f"job={running_job}" in out.split(), out
    if plan["slurm"]["plugins"]["proctrack_type"] == "proctrack/cgroup":
        assert f"job_{running_job}" in out, f"the session is outside the job's cgroup: {out}"


def test_the_controllers_state_is_slurm_users_only(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    where = plan["slurm"]["ha"]["state_save_location"]
    for name in [c["name"] for c in plan["slurm"]["ha"]["controllers"]]:
        state = hosts[name].file(where)
        assert state.is_directory, f"{name}: {where} missing"
        assert (state.user, state.mode) == ("slurm", 0o700), f"{name}: {where} {state.user} {oct(state.mode)}"
