"""The backup Slurm controller in the lab (tiers whose inventory lists one in group slurm_backup).

The controllers share StateSaveLocation (on a real site an NFS or Lustre mount; in the lab one podman
volume, lab/create.yml, because a container cannot mount NFS). The failover test stops slurmctld on
the primary (the head) and checks with the real tools that the backup takes control within
SlurmctldTimeout and runs jobs, then starts the primary again and checks that it takes control back
and runs a job. It restores what it stopped, also when it fails.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import hosts_with

#: Seconds beyond SlurmctldTimeout the backup may take to answer (its own ping cycle, the clients' retry).
MARGIN_S = 60


def _ha(plan: dict[str, Any]) -> dict[str, Any]:
    ha = plan["slurm"]["ha"]
    if not ha["enabled"]:
        pytest.skip(f"{plan['cluster']['name']} has no backup Slurm controller (groups.slurm_backup)")
    return ha


def _ping(host: Any) -> dict[str, str]:
    """``scontrol ping`` as {"primary": "UP", "backup": "DOWN"} (the state each controller answers with)."""
    out = host.run("scontrol ping").stdout
    states = {}
    for line in out.splitlines():
        # "Slurmctld(primary) at head01 is UP"
        if line.startswith("Slurmctld(") and " is " in line:
            states[line.split("(")[1].split(")")[0]] = line.rsplit(" is ", 1)[1].strip()
    return states


def _wait(check: Any, seconds: float, what: str) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > seconds:
            pytest.fail(f"{what}: not within {seconds:.0f} s")
        time.sleep(2)
    return time.monotonic() - start


def _nodes_answer(host: Any, nodes: list[str]) -> bool:
    result = host.run("sinfo --noheader --Node --partition=gpu --format='%N %t'")
    if result.rc != 0:
        return False
    rows = dict(line.split() for line in result.stdout.splitlines() if line.strip())
    return sorted(rows) == sorted(nodes) and all(state in ("idle", "mix", "alloc") for state in rows.values())


def _job_runs(host: Any, name: str, nodes: list[str], gpus: int, wait_s: int = 120) -> None:
    """An srun step with ``gpus`` GPUs of a node (none: 0) and a batch job, submitted on ``host``, run and complete
    (srun waits up to ``wait_s`` for its allocation)."""
    gres = f" --gres=gpu:{gpus}" if gpus else ""
    result = host.run(f"timeout {wait_s} srun --job-name={name} --nodes=1{gres} --time=1 hostname")
    assert result.rc == 0, result.stderr
    assert result.stdout.strip() in nodes
    job = host.check_output(f"sbatch --parsable --job-name={name}-batch --time=1 --wrap 'hostname'").split(";")[0]
    _wait(
        lambda: "JobState=COMPLETED" in host.run(f"scontrol show job {job}").stdout,
        60,
        f"batch job {job} completes",
    )


def test_every_controller_shares_the_planned_state(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    ha = _ha(plan)
    mount = ha["state_save_mount"]
    where = ha["state_save_location"]
    listings = {}
    for ctl in ha["controllers"]:
        host = hosts[ctl["name"]]
        assert host.service("slurmctld").is_running, ctl["name"]
        conf = host.file("/etc/slurm/slurm.conf").content_string
        assert f"StateSaveLocation={where}\n" in conf
        assert f"SlurmctldTimeout={ha['slurmctld_timeout_s']}\n" in conf
        # the planned mount unit, and slurmctld waits for the state's mount
        assert host.file(mount["unit_path"]).content_string == mount["unit_text"], ctl["name"]
        assert where in host.check_output("systemctl show slurmctld --property=RequiresMountsFor --value")
        assert host.file(where).user == "slurm", ctl["name"]
        listings[ctl["name"]] = host.check_output(f"ls {where}")
    # one folder seen by every controller: the primary's state files are there for the backup
    assert len(set(listings.values())) == 1, listings
    assert "node_state" in next(iter(listings.values())).split()
    # SlurmctldHost order: the head first, then the backups; the head answers as primary
    lines = hosts[ha["controllers"][0]["name"]].file("/etc/slurm/slurm.conf").content_string.splitlines()
    order = [x.split("=", 1)[1].split("(")[0] for x in lines if x.startswith("SlurmctldHost=")]
    assert order == [c["name"] for c in ha["controllers"]]
    assert _ping(hosts[ha["controllers"][1]["name"]]) == {"primary": "UP", "backup": "UP"}


def test_the_backup_takes_over_and_hands_control_back(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    ha = _ha(plan)
    primary, backup = (hosts[c["name"]] for c in ha["controllers"][:2])
    compute = hosts_with(plan, "compute")
    login = hosts[compute[0]]  # a client that is neither controller
    timeout = ha["slurmctld_timeout_s"]
    gpus = plan["cluster"]["gpus_per_node"]
    # every node idle (a controller that started moments ago holds them until they register: the hook)
    _wait(lambda: _nodes_answer(login, compute), ha["primary_on"]["config"]["hold_s"], "every node answers")
    hooks_before = _hook_runs(primary)
    primary.check_output("systemctl stop slurmctld")
    try:
        # the backup takes control within SlurmctldTimeout (+ margin); users' commands keep working
        took = _wait(
            lambda: _ping(login) == {"primary": "DOWN", "backup": "UP"} and _nodes_answer(login, compute),
            timeout + MARGIN_S,
            "the backup controller answers sinfo with the primary down",
        )
        assert took <= timeout + MARGIN_S
        for host in (login, backup, primary):  # sinfo from every kind of host (the head is the login node)
            assert host.run("sinfo --noheader --format=%D").rc == 0
        _job_runs(login, "ha-backup", compute, gpus)
        assert primary.service("slurmctld").is_running is False
    finally:
        primary.check_output("systemctl start slurmctld")
    # the primary takes control back: both answer, the backup is in standby, and jobs run
    hook = ha["primary_on"]["config"]
    try:
        _wait(lambda: _ping(login) == {"primary": "UP", "backup": "UP"}, timeout + MARGIN_S, "the primary answers")
        # a GPU job at once: its slurmd has not registered again yet (it asks the backup first and waits
        # SlurmctldTimeout/2); the takeover hook holds the GPU nodes until they register, so the job waits
        # and runs instead of failing with untyped GPUs and leaving them allocated (plan slurm.ha.primary_on)
        _job_runs(login, "ha-primary-gpu", compute, gpus, wait_s=hook["hold_s"] + MARGIN_S)
        _wait(lambda: _nodes_answer(login, compute), timeout + MARGIN_S, "every node answers the primary")
        _job_runs(login, "ha-primary-cpu", compute, 0)
    except BaseException:
        primary.run("systemctl restart slurmctld")  # leave a usable controller to the later tests
        raise
    assert backup.service("slurmctld").is_running  # the backup keeps running, in standby
    # the hook ran on the primary when it took control, and let go of every node it held
    _wait(lambda: _hook_runs(primary) > hooks_before, hook["hold_s"] + MARGIN_S, "the takeover hook finishes")
    held = login.check_output("sinfo --noheader --Node --format='%N|%E'")
    assert hook["reason"] not in held, held
    # no idle node keeps GPUs of a job that is gone
    for node in compute:
        out = login.check_output(f"scontrol show node {node} --oneliner")
        if "CPUAlloc=0 " in out:
            assert "gres/gpu=" not in _field(out, "AllocTRES"), out


def _hook_runs(host: Any) -> int:
    """How often slurmctld logged its SlurmctldPrimaryOnProg as done (it runs at each start and takeover)."""
    return int(host.run("grep -c 'SlurmctldPrimaryOnProg completed' /var/log/slurm/slurmctld.log").stdout.strip() or 0)


def _field(oneliner: str, key: str) -> str:
    return next((f.split("=", 1)[1] for f in oneliner.split() if f.startswith(f"{key}=")), "")
