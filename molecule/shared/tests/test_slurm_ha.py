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
#: The takeover hook's syslog tag (roles/slurm/files/gpucluster-slurmctld-primary-on).
HOOK_TAG = "gpucluster-slurmctld-primary-on"


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


def _wait(check: Any, seconds: float, what: str, poll: float = 2) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > seconds:
            pytest.fail(f"{what}: not within {seconds:.0f} s")
        time.sleep(poll)
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
    """A GPU job submitted as soon as a controller has taken control runs (the takeover hook holds the GPU
    nodes until their slurmd registers with the new controller), a GPU job already waiting for the backup
    either runs or fails only with the documented window's error, and no node stays held or keeps GPUs.
    ``GPUCLUSTER_HA_CYCLES`` repeats the whole failover and hand-back (``make lab-ha-soak``); verify runs one
    cycle."""
    ha = _ha(plan)
    primary, backup = (hosts[c["name"]] for c in ha["controllers"][:2])
    compute = hosts_with(plan, "compute")
    login = hosts[compute[0]]  # a client that is neither controller
    # every node idle (a controller that started moments ago holds them until they register: the hook)
    _wait(lambda: _nodes_answer(login, compute), ha["primary_on"]["config"]["hold_s"], "every node answers")
    window: list[int] = []
    for cycle in range(int(os.environ.get("GPUCLUSTER_HA_CYCLES", "1"))):
        try:
            gpus = plan["cluster"]["gpus_per_node"]
            window.append(_failover_cycle(ha, primary, backup, login, compute, gpus, cycle))
        except BaseException:
            print(_diagnosis(primary, backup, login))
            raise
    print(f"GPU jobs already waiting when the backup took control: {window.count(0)} of {len(window)} ran")


def _failover_cycle(
    ha: dict[str, Any], primary: Any, backup: Any, login: Any, compute: list[str], gpus: int, cycle: int
) -> int:
    """One takeover and hand-back; returns the exit code of the GPU job that was waiting for the backup."""
    timeout = ha["slurmctld_timeout_s"]
    hook = ha["primary_on"]["config"]
    marks = {"primary": _hook_marks(primary), "backup": _hook_marks(backup)}  # (drains, runs) so far
    backup_pid = _main_pid(backup)
    took = _control_count(backup)
    primary.check_output("systemctl stop slurmctld")
    try:
        # a GPU job while no controller is in control: srun retries the standby backup every
        # SlurmctldTimeout/2 and may reach it in the moment it takes control, before the hook's drain
        waiting = _submit(login, f"ha-window-backup-{cycle}", gpus, timeout * 3)
        # the backup takes control within SlurmctldTimeout (+ margin): its log says so and its hook holds
        # the GPU nodes (or has already seen them register)
        _wait(
            lambda: _control_count(backup) > took and _hook_acted(backup, marks["backup"]),
            timeout + MARGIN_S,
            f"cycle {cycle}: the backup takes control and its hook holds the GPU nodes",
            poll=0.5,
        )
        assert _ping(login) == {"primary": "DOWN", "backup": "UP"}
        # a GPU job at once: no slurmd may have registered with the backup yet; the hook holds the GPU
        # nodes until they do, so the job waits and runs instead of failing with untyped GPUs
        _job_runs(login, f"ha-backup-gpu-{cycle}", compute, gpus, wait_s=hook["hold_s"] + MARGIN_S)
        _wait(lambda: _nodes_answer(login, compute), timeout + MARGIN_S, f"cycle {cycle}: every node answers")
        for host in (login, backup, primary):  # users' commands keep working from every kind of host
            assert host.run("sinfo --noheader --format=%D").rc == 0
        _job_runs(login, f"ha-backup-cpu-{cycle}", compute, 0)
        assert primary.service("slurmctld").is_running is False
        _wait(lambda: _hook_runs(backup) > marks["backup"][1], hook["hold_s"] + MARGIN_S, "the backup's hook finishes")
        window_rc = _finished(login, waiting, timeout * 3)
        _no_hold_and_no_leak(login, compute, hook)
    finally:
        took = _control_count(primary)
        primary.check_output("systemctl start slurmctld")
    # the primary takes control back: its log says so, its hook holds the GPU nodes, both answer (the
    # backup in standby, not hung), and jobs run
    try:
        _wait(
            lambda: (
                _control_count(primary) > took
                and _hook_acted(primary, marks["primary"])
                and _ping(login) == {"primary": "UP", "backup": "UP"}
            ),
            timeout + MARGIN_S,
            f"cycle {cycle}: the primary takes control back, its hook holds the GPU nodes, the standby answers",
            poll=0.5,
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
    _wait(lambda: _hook_runs(primary) > marks["primary"][1], hook["hold_s"] + MARGIN_S, "the primary's hook finishes")
    _no_hold_and_no_leak(login, compute, hook)
    return window_rc


def _control_count(host: Any) -> int:
    """How often this host's slurmctld took control (its log: "Running as primary controller")."""
    return int(host.run("grep -c 'Running as primary controller' /var/log/slurm/slurmctld.log").stdout.strip() or 0)


def _hook_marks(host: Any) -> tuple[int, int]:
    """How often the takeover hook on ``host`` drained GPU nodes not registered yet, and how often it finished."""
    drains = host.run(f"journalctl -t {HOOK_TAG} --no-pager --output=cat | grep -c 'drained until registered'")
    return int(drains.stdout.strip() or 0), _hook_runs(host)


def _hook_acted(host: Any, before: tuple[int, int]) -> bool:
    """Since ``before`` (``_hook_marks``) the hook on ``host`` has drained the unregistered GPU nodes, or finished."""
    return any(now > then for now, then in zip(_hook_marks(host), before, strict=True))


def _submit(host: Any, name: str, gpus: int, wait_s: int) -> str:
    """Start an srun of ``gpus`` GPUs on ``host`` in the background; returns the path its outcome goes to."""
    out = f"/tmp/{name}"
    host.check_output(
        f"rm -f {out}.rc; nohup sh -c 'timeout {wait_s} srun --job-name={name} --nodes=1 --gres=gpu:{gpus} "
        f"--time=1 hostname > {out}.out 2> {out}.err; echo $? > {out}.rc' > /dev/null 2>&1 &"
    )
    return out


def _finished(host: Any, out: str, wait_s: int) -> int:
    """The exit code of a GPU job that was waiting for a controller: it ran, or failed only with the error of
    the window the hook cannot close (it reached the new controller before the hook's drain; Slurm starts
    SlurmctldPrimaryOnProg before it serves requests and does not wait for it: docs/runbook.md)."""
    _wait(lambda: host.file(f"{out}.rc").exists, wait_s, f"{out}: the waiting GPU job ends")
    rc = int(host.file(f"{out}.rc").content_string.strip())
    err = host.file(f"{out}.err").content_string
    assert rc == 0 or "Invalid generic resource (gres) specification" in err, (out, rc, err)
    return rc


def _diagnosis(primary: Any, backup: Any, login: Any) -> str:
    """What a failed cycle leaves to read: both controllers' recent log lines and hook lines, and the nodes."""
    parts = []
    for host in (primary, backup):
        parts.append(host.run("hostname; tail -n 60 /var/log/slurm/slurmctld.log").stdout)
        parts.append(host.run(f"journalctl -t {HOOK_TAG} -n 20 --no-pager").stdout)
    parts.append(login.run("scontrol ping; sinfo --Node --long; squeue --all").stdout)
    return "\n".join(parts)


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
