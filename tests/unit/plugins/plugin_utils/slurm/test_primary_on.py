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
from conftest import ROOT, load_script

HOOK = load_script(ROOT / "roles" / "slurm" / "files" / "gpucluster-slurmctld-primary-on", "primary_on")
DATA = ROOT / "tests" / "data" / "slurm"
BEFORE = (DATA / "scontrol-show-node-d-oneliner-after-handback.txt").read_text()
AFTER = (DATA / "scontrol-show-node-d-oneliner-registered.txt").read_text()
REASON = "slurmctld-takeover: slurmd not registered yet"
CFG = {"hold_s": 75, "poll_s": 0, "reason": REASON, "hosts": ["head01"]}
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


def test_the_script_is_what_the_role_installs() -> None:
    tasks = (ROOT / "roles" / "slurm" / "tasks" / "ha.yml").read_text()
    assert "src: gpucluster-slurmctld-primary-on" in tasks
    assert Path(HOOK.__file__).stat().st_mode & 0o111


PING_BACK = "Slurmctld(primary) at head01 is UP\nSlurmctld(backup) at head02 is UP\n"  # scontrol ping, lab tier4
PING_STARTING = "Slurmctld(primary) at head01 is DOWN\nSlurmctld(backup) at head02 is UP\n"


def test_the_hook_waits_until_its_own_controller_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert HOOK.answers(PING_BACK, "head01") and HOOK.answers(PING_BACK, "head02")
    assert not HOOK.answers(PING_STARTING, "head01") and not HOOK.answers(PING_BACK, "head0")
    monkeypatch.setattr(HOOK.time, "sleep", lambda s: None)
    pings = [PING_STARTING, PING_STARTING, PING_BACK]
    assert HOOK.wait_for_me(CFG, "head01", ping=lambda: pings.pop(0), clock=lambda: 0.0)
    assert pings == []
    ticks = iter(range(0, 1000, 10))
    assert not HOOK.wait_for_me(CFG, "head01", ping=lambda: PING_STARTING, clock=lambda: float(next(ticks)))


def test_a_backup_taking_control_holds_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "primary-on.json"
    config.write_text(json.dumps(CFG))
    monkeypatch.setattr(HOOK.socket, "gethostname", lambda: "head02.cluster.internal")
    monkeypatch.setattr(HOOK, "hold", lambda *a, **k: pytest.fail("a backup must not hold nodes"))
    assert HOOK.main(["--config", str(config)]) == 0
