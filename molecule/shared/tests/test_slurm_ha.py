"""The backup Slurm controller in the lab (tiers whose inventory lists one in group slurm_backup).

The controllers share StateSaveLocation (on a real site an NFS or Lustre mount; in the lab one podman
volume, lab/create.yml, because a container cannot mount NFS). The failover test stops slurmctld on
the primary (the head) and checks with the real tools that the backup takes control within
SlurmctldTimeout and runs jobs, then starts the primary again and checks that it takes control back
and runs a job. It restores what it stopped, also when it fails.
"""

from __future__ import annotations

import os
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
        # (the plan holds the mount's data; the unit is rendered from it: filter slurm_state_mount_unit)
        unit = host.file(mount["unit_path"]).content_string
        section = "".join(f"{key.capitalize()}={mount[key]}\n" for key in ("what", "where", "type", "options"))
        assert section in unit and "Before=slurmctld.service\n" in unit, ctl["name"]
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
    """A GPU job right after each change of controller runs (the takeover hook holds the GPU nodes until
    their slurmd registers with the new controller), and no idle node keeps GPUs. ``GPUCLUSTER_HA_CYCLES``
    repeats the whole failover and hand-back (``make lab-ha-soak``); verify runs one cycle."""
    ha = _ha(plan)
    primary, backup = (hosts[c["name"]] for c in ha["controllers"][:2])
    compute = hosts_with(plan, "compute")
    login = hosts[compute[0]]  # a client that is neither controller
    # every node idle (a controller that started moments ago holds them until they register: the hook)
    _wait(lambda: _nodes_answer(login, compute), ha["primary_on"]["config"]["hold_s"], "every node answers")
    for cycle in range(int(os.environ.get("GPUCLUSTER_HA_CYCLES", "1"))):
        _failover_cycle(ha, primary, backup, login, compute, plan["cluster"]["gpus_per_node"], cycle)


def _failover_cycle(
    ha: dict[str, Any], primary: Any, backup: Any, login: Any, compute: list[str], gpus: int, cycle: int
) -> None:
    timeout = ha["slurmctld_timeout_s"]
    hook = ha["primary_on"]["config"]
    runs = {"primary": _hook_runs(primary), "backup": _hook_runs(backup)}
    backup_pid = _main_pid(backup)
    primary.check_output("systemctl stop slurmctld")
    try:
        # the backup takes control within SlurmctldTimeout (+ margin)
        took = _wait(
            lambda: _ping(login) == {"primary": "DOWN", "backup": "UP"},
            timeout + MARGIN_S,
            f"cycle {cycle}: the backup controller answers with the primary down",
        )
        assert took <= timeout + MARGIN_S
        # a GPU job at once: no slurmd has registered with the backup yet; the backup's hook holds the GPU
        # nodes until they do, so the job waits and runs instead of failing with untyped GPUs
        _job_runs(login, f"ha-backup-gpu-{cycle}", compute, gpus, wait_s=hook["hold_s"] + MARGIN_S)
        _wait(lambda: _nodes_answer(login, compute), timeout + MARGIN_S, f"cycle {cycle}: every node answers")
        for host in (login, backup, primary):  # users' commands keep working from every kind of host
            assert host.run("sinfo --noheader --format=%D").rc == 0
        _job_runs(login, f"ha-backup-cpu-{cycle}", compute, 0)
        assert primary.service("slurmctld").is_running is False
        _wait(lambda: _hook_runs(backup) > runs["backup"], hook["hold_s"] + MARGIN_S, "the backup's hook finishes")
        _no_hold_and_no_leak(login, compute, hook)
    finally:
        primary.check_output("systemctl start slurmctld")
    # the primary takes control back: both answer (the backup in standby, not hung), and jobs run
    try:
        _wait(
            lambda: _ping(login) == {"primary": "UP", "backup": "UP"},
            timeout + MARGIN_S,
            f"cycle {cycle}: the primary and the standby backup answer",
        )
        # a GPU job at once: its slurmd has not registered again yet (it asks the backup first and waits
        # SlurmctldTimeout/2); the primary's hook holds the GPU nodes until they register
        _job_runs(login, f"ha-primary-gpu-{cycle}", compute, gpus, wait_s=hook["hold_s"] + MARGIN_S)
        _wait(lambda: _nodes_answer(login, compute), timeout + MARGIN_S, f"cycle {cycle}: every node answers")
        _job_runs(login, f"ha-primary-cpu-{cycle}", compute, 0)
    except BaseException:
        primary.run("systemctl restart slurmctld")  # leave a usable controller to the later tests
        raise
    # the backup, back in standby, restarted its slurmctld (one takeover per process: Slurm 22.05) and answers
    _wait(
        lambda: _main_pid(backup) not in (0, backup_pid) and _ping(login) == {"primary": "UP", "backup": "UP"},
        timeout + MARGIN_S,
        f"cycle {cycle}: the backup restarts in standby after the hand-back",
    )
    _wait(lambda: _hook_runs(primary) > runs["primary"], hook["hold_s"] + MARGIN_S, "the primary's hook finishes")
    _no_hold_and_no_leak(login, compute, hook)


def _main_pid(host: Any) -> int:
    return int(host.check_output("systemctl show slurmctld --property=MainPID --value") or 0)


def _no_hold_and_no_leak(login: Any, compute: list[str], hook: dict[str, Any]) -> None:
    """The hook let go of every node it held, and no idle node keeps GPUs of a job that is gone."""
    held = login.check_output("sinfo --noheader --Node --format='%N|%E'")
    assert hook["reason"] not in held, held
    for node in compute:
        out = login.check_output(f"scontrol show node {node} --oneliner")
        if "CPUAlloc=0 " in out:
            assert "gres/gpu=" not in _field(out, "AllocTRES"), out


def _hook_runs(host: Any) -> int:
    """How often slurmctld logged its SlurmctldPrimaryOnProg as done (it runs at each start and takeover)."""
    return int(host.run("grep -c 'SlurmctldPrimaryOnProg completed' /var/log/slurm/slurmctld.log").stdout.strip() or 0)


def _field(oneliner: str, key: str) -> str:
    return next((f.split("=", 1)[1] for f in oneliner.split() if f.startswith(f"{key}=")), "")
