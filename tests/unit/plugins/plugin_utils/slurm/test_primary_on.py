"""The controllers' takeover hook (roles/slurm/files/gpucluster-slurmctld-primary-on) on `scontrol show
node -d --oneliner` output recorded in the lab (tier4, Slurm 22.05.8): nine seconds after the primary
took control back (no slurmd registered yet, compute02 drained by an operator) and twenty seconds later
(all registered)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, load_script

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.ha import PRIMARY_ON_PROGRAM

HOOK = load_script(ROOT / "roles" / "slurm" / "files" / "gpucluster-slurmctld-primary-on", "primary_on")
DATA = ROOT / "tests" / "data" / "slurm"
BEFORE = (DATA / "scontrol-show-node-d-oneliner-after-handback.txt").read_text()
AFTER = (DATA / "scontrol-show-node-d-oneliner-registered.txt").read_text()
REASON = "slurmctld-takeover: slurmd not registered yet"
CFG = {
    "hold_s": 75,
    "poll_s": 0,
    "answer_poll_s": 0,
    "reason": REASON,
    "hosts": ["head01", "head02"],
    "state_dir": "/nonexistent",
}
ALL = [f"compute0{i}" for i in range(1, 9)]


def _ours(text: str, nodes: list[str]) -> str:
    """``text`` with ``nodes`` drained by the hook (State and Reason as scontrol prints them)."""
    out = []
    for line in text.splitlines():
        name = line.split()[0].split("=", 1)[1]
        if name in nodes:
            line = line.replace("State=IDLE ", "State=IDLE+DRAIN ") + f" Reason={REASON} [slurm@2026-11-25T15:13:00]"
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_recorded_output_parses() -> None:
    before, after = HOOK.parse_nodes(BEFORE), HOOK.parse_nodes(AFTER)
    assert sorted(before) == sorted(after) == ALL
    assert before["compute02"]["Reason"] == "operator: replace DIMM"
    assert before["compute01"]["SlurmdStartTime"] == "None" and not HOOK.registered(before["compute01"])
    assert all(HOOK.registered(n) and HOOK.has_gpus(n) for n in after.values())


def test_unregistered_gpu_nodes_are_drained_but_not_an_operators() -> None:
    nodes = HOOK.parse_nodes(BEFORE)
    assert HOOK.to_drain(nodes) == [n for n in ALL if n != "compute02"]
    assert HOOK.to_drain(HOOK.parse_nodes(AFTER)) == []


def test_only_our_drains_are_resumed_once_registered_or_when_the_hold_is_over() -> None:
    held = [n for n in ALL if n != "compute02"]
    assert HOOK.to_resume(HOOK.parse_nodes(_ours(BEFORE, held)), REASON, give_up=False) == []
    assert HOOK.to_resume(HOOK.parse_nodes(_ours(BEFORE, held)), REASON, give_up=True) == held
    assert HOOK.to_resume(HOOK.parse_nodes(_ours(AFTER, held)), REASON, give_up=False) == held
    assert HOOK.to_resume(HOOK.parse_nodes(AFTER), REASON, give_up=True) == []  # no drain of ours


def test_an_idle_node_holding_gpus_is_a_leak() -> None:
    leak = AFTER.replace("NodeName=compute01 ", "NodeName=compute01 ", 1)
    lines = leak.splitlines()
    lines[0] = lines[0].replace("AllocTRES= ", "AllocTRES=gres/gpu=8 ")
    assert HOOK.leaked(HOOK.parse_nodes("\n".join(lines))) == ["compute01"]
    assert HOOK.leaked(HOOK.parse_nodes(AFTER)) == []


class _Controller:
    """scontrol in the hook's loop: the recorded output as the nodes register, the hook's updates applied."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs, self.calls, self.drained = outputs, [], []  # type: list[str], list[tuple[str, ...]], list[str]
        self.t = 0.0

    def show(self) -> str:
        text = self.outputs[min(len(self.outputs) - 1, int(self.t))]
        self.t += 1
        return _ours(text, self.drained)

    def update(self, *args: str) -> str:
        self.calls.append(args)
        if args[0] == "update":
            names = args[1].split("=", 1)[1].split(",")
            if "State=DRAIN" in args:
                self.drained += names
            else:
                self.drained = [n for n in self.drained if n not in names]
        return ""

    def clock(self) -> float:
        return self.t * 10  # ten seconds per poll


def test_the_hold_drains_then_resumes_as_nodes_register(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HOOK.syslog, "syslog", lambda *a: None)
    ctl = _Controller([BEFORE, BEFORE, AFTER])
    assert HOOK.hold(CFG, show=ctl.show, update=ctl.update, clock=ctl.clock) == []
    held = ",".join(n for n in ALL if n != "compute02")
    assert ctl.calls == [
        ("update", f"NodeName={held}", "State=DRAIN", f"Reason={REASON}"),
        ("update", f"NodeName={held}", "State=RESUME"),
    ]
    assert ctl.drained == []


def test_nodes_that_never_register_are_resumed_when_the_hold_is_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HOOK.syslog, "syslog", lambda *a: None)
    ctl = _Controller([BEFORE])
    HOOK.hold(CFG, show=ctl.show, update=ctl.update, clock=ctl.clock)
    assert ctl.calls[-1][-1] == "State=RESUME" and ctl.drained == []
    assert ctl.t * 10 >= CFG["hold_s"]


def test_a_leak_left_at_the_end_is_reconfigured_away(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HOOK.syslog, "syslog", lambda *a: None)
    lines = AFTER.splitlines()
    lines[0] = lines[0].replace("AllocTRES= ", "AllocTRES=gres/gpu=8 ")
    ctl = _Controller(["\n".join(lines) + "\n"])
    assert HOOK.hold(CFG, show=ctl.show, update=ctl.update, clock=ctl.clock) == ["compute01"]
    assert ctl.calls == [("reconfigure",)]


def test_the_controller_not_answering_yet_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HOOK.syslog, "syslog", lambda *a: None)
    ctl = _Controller([AFTER])
    answers: list[Any] = [subprocess.CalledProcessError(1, "scontrol"), None]

    def show() -> str:
        answer = answers.pop(0) if answers else None
        if isinstance(answer, Exception):
            ctl.t += 1
            raise answer
        return ctl.show()

    assert HOOK.hold(CFG, show=show, update=ctl.update, clock=ctl.clock) == []
    assert ctl.calls == []


def test_a_node_slurmctld_cannot_drain_does_not_leave_the_others_unheld(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen in the lab at a cold start: nodes never registered are in a state slurmctld refuses to drain
    ("Invalid node state specified"); a refused list is drained node by node."""
    monkeypatch.setattr(HOOK.syslog, "syslog", lambda *a: None)
    ctl = _Controller([BEFORE, AFTER])
    update = ctl.update

    def refusing(*args: str) -> str:
        if "State=DRAIN" in args and ("," in args[1] or args[1] == "NodeName=compute03"):
            ctl.calls.append(args)
            raise subprocess.CalledProcessError(1, "scontrol", stderr="Invalid node state specified")
        return update(*args)

    assert HOOK.hold(CFG, show=ctl.show, update=refusing, clock=ctl.clock) == []
    held = [n for n in ALL if n not in ("compute02", "compute03")]
    drains = [c[1].split("=")[1] for c in ctl.calls if "State=DRAIN" in c]
    tried = [*held[:1], "compute03", *held[1:]]  # the refused list, then node by node
    assert drains == [",".join(tried), *tried]
    assert ("update", f"NodeName={','.join(held)}", "State=RESUME") in ctl.calls and ctl.drained == []


def _off_wrapper(tmp_path: Path) -> Path:
    """roles/slurm/templates/gpucluster-slurmctld-primary-off.j2 rendered with the state in ``tmp_path`` and the
    hook replaced by a script that notes its arguments."""
    import jinja2

    hook = tmp_path / "hook"
    hook.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/ran\n')
    hook.chmod(0o755)
    restart = {"in_control": str(tmp_path / "in-control")}
    plan = {"slurm": {"ha": {"primary_on": {"program": str(hook), "standby_restart": restart}}}}
    source = (ROOT / "roles" / "slurm" / "templates" / "gpucluster-slurmctld-primary-off.j2").read_text()
    wrapper = tmp_path / "primary-off"
    wrapper.write_text(jinja2.Template(source, keep_trailing_newline=True).render(gpucluster_host_plan=plan))
    wrapper.chmod(0o755)
    return wrapper


def test_the_off_program_starts_the_hook_only_on_a_backup_that_had_control(tmp_path: Path) -> None:
    """SlurmctldPrimaryOffProg: slurmctld does not wait for it when it stops, so anywhere the hook has nothing
    to do (the primary's stop, a backup's own start) the wrapper exits at once, without starting Python."""
    wrapper = _off_wrapper(tmp_path)
    assert subprocess.run([str(wrapper)], check=False).returncode == 0
    assert not (tmp_path / "ran").exists()
    (tmp_path / "in-control").write_text("4242\n")
    assert subprocess.run([str(wrapper)], check=False).returncode == 0
    assert (tmp_path / "ran").read_text() == "--mode off\n"


def test_the_script_is_what_the_role_installs() -> None:
    files = yaml.safe_load((ROOT / "roles" / "slurm" / "vars" / "files.yml").read_text())["slurm_files"]
    (entry,) = [f for f in files if f["src"] == "gpucluster-slurmctld-primary-on"]
    assert entry["static"] is True and entry["dest"] == PRIMARY_ON_PROGRAM and entry["mode"] == "0755"
    assert Path(HOOK.__file__).stat().st_mode & 0o111


PING_BACK = "Slurmctld(primary) at head01 is UP\nSlurmctld(backup) at head02 is UP\n"  # scontrol ping, lab tier4
PING_STARTING = "Slurmctld(primary) at head01 is DOWN\nSlurmctld(backup) at head02 is UP\n"
PING_TAKEOVER_STARTING = "Slurmctld(primary) at head01 is DOWN\nSlurmctld(backup) at head02 is DOWN\n"


def test_the_controller_in_control_is_the_first_that_answers() -> None:
    assert HOOK.answers(PING_BACK, "head01") and HOOK.answers(PING_BACK, "head02")
    assert not HOOK.answers(PING_STARTING, "head01") and not HOOK.answers(PING_BACK, "head0")
    # the primary back: it is in control, the backup hands control back
    assert HOOK.in_control(PING_BACK, "head01") is True
    assert HOOK.in_control(PING_BACK, "head02") is False
    # the primary down: the backup that answers has control; the primary's own hook waits
    assert HOOK.in_control(PING_STARTING, "head02") is True
    assert HOOK.in_control(PING_STARTING, "head01") is None
    # a backup whose RPC thread is not up yet: not answering, neither in control nor handing back
    assert HOOK.in_control(PING_TAKEOVER_STARTING, "head02") is None
    assert HOOK.in_control("", "head02") is None


def test_the_hook_waits_until_its_own_controller_is_in_control(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HOOK.time, "sleep", lambda s: None)
    pings = [PING_STARTING, PING_STARTING, PING_BACK]
    assert HOOK.wait_for_me(CFG, "head01", ping=lambda: pings.pop(0), clock=lambda: 0.0) is True
    assert pings == []
    # a backup taking over: the primary down, the backup not answering until its RPC thread runs
    pings = [PING_TAKEOVER_STARTING, PING_STARTING]
    assert HOOK.wait_for_me(CFG, "head02", ping=lambda: pings.pop(0), clock=lambda: 0.0) is True
    # a backup whose primary is back already: nothing to hold, at once
    assert HOOK.wait_for_me(CFG, "head02", ping=lambda: PING_BACK, clock=lambda: 0.0) is False
    ticks = iter(range(0, 1000, 10))
    assert HOOK.wait_for_me(CFG, "head01", ping=lambda: PING_STARTING, clock=lambda: float(next(ticks))) is None


def test_a_backup_stops_holding_when_the_primary_takes_control_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HOOK.syslog, "syslog", lambda *a: None)
    ctl = _Controller([BEFORE])
    pings = iter([True, False])
    assert HOOK.hold(CFG, show=ctl.show, update=ctl.update, clock=ctl.clock, still_in_control=lambda: next(pings)) == []
    held = ",".join(n for n in ALL if n != "compute02")
    # drained on the takeover; left drained for the primary's own run, which resumes them as they register
    assert ctl.calls == [("update", f"NodeName={held}", "State=DRAIN", f"Reason={REASON}")]
    assert HOOK.to_resume(HOOK.parse_nodes(_ours(AFTER, ctl.drained)), REASON, give_up=False) == held.split(",")


def test_a_controller_not_listed_holds_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "primary-on.json"
    config.write_text(json.dumps({**CFG, "hosts": ["head01"]}))
    monkeypatch.setattr(HOOK.socket, "gethostname", lambda: "head02.cluster.internal")
    monkeypatch.setattr(HOOK, "hold", lambda *a, **k: pytest.fail("a controller not in hosts must not hold nodes"))
    assert HOOK.main(["--config", str(config)]) == 0


def test_a_backup_taking_control_holds_its_nodes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "primary-on.json"
    config.write_text(json.dumps(CFG))
    monkeypatch.setattr(HOOK.socket, "gethostname", lambda: "head02.cluster.internal")
    monkeypatch.setattr(HOOK, "_ping", lambda: PING_STARTING)
    noted: list[int] = []
    monkeypatch.setattr(HOOK, "took_control", lambda cfg, me, pid: noted.append(pid))
    held: list[dict[str, Any]] = []
    monkeypatch.setattr(HOOK, "hold", lambda cfg, **k: held.append(cfg) or [])
    assert HOOK.main(["--config", str(config), "--mode", "on"]) == 0
    assert held == [CFG] and noted == [HOOK.os.getppid()]


def test_a_backup_back_in_standby_restarts_only_after_having_had_control(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Slurm 22.05 takes control cleanly once per slurmctld process: the off-program asks for a restart
    of a backup that had control (the on-program noted its PID), and never at a start or on the primary."""
    monkeypatch.setattr(HOOK.syslog, "syslog", lambda *a: None)
    cfg = {**CFG, "state_dir": str(tmp_path)}
    request = tmp_path / HOOK.RESTART_REQUEST
    assert not HOOK.standby(cfg, "head02", 4242)  # the backup's own start: it never had control
    HOOK.took_control(cfg, "head02", 4242)
    assert (tmp_path / HOOK.IN_CONTROL).read_text() == "4242\n"
    assert not HOOK.standby(cfg, "head02", 5151)  # another process (restarted meanwhile): a stale note
    assert not (tmp_path / HOOK.IN_CONTROL).exists() and not request.exists()
    HOOK.took_control(cfg, "head02", 4242)
    assert HOOK.standby(cfg, "head02", 4242)  # the hand-back of the process that took control
    assert request.read_text() == "4242\n" and not (tmp_path / HOOK.IN_CONTROL).exists()
    request.unlink()
    HOOK.took_control(cfg, "head01", 99)  # the primary: its stop is a stop, not a hand-back
    assert not (tmp_path / HOOK.IN_CONTROL).exists()
    assert not HOOK.standby(cfg, "head01", 99) and not request.exists()


def test_the_off_program_is_chosen_by_its_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "primary-on.json"
    config.write_text(json.dumps({**CFG, "state_dir": str(tmp_path)}))
    monkeypatch.setattr(HOOK.socket, "gethostname", lambda: "head02")
    monkeypatch.setattr(HOOK.sys, "argv", ["/usr/local/sbin/gpucluster-slurmctld-primary-off"])
    calls: list[tuple[str, int]] = []
    monkeypatch.setattr(HOOK, "standby", lambda cfg, me, pid: calls.append((me, pid)) or False)
    monkeypatch.setattr(HOOK, "hold", lambda *a, **k: pytest.fail("the off-program holds nothing"))
    assert HOOK.main(["--config", str(config)]) == 0
    assert calls == [("head02", HOOK.os.getppid())]
