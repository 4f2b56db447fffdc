"""slurm_accounting: QOS, accounts and users reach the plan's state; a second run changes nothing.

A fake ``sacctmgr`` first on PATH keeps a small accounting database in a JSON file: it answers
``show qos|assoc`` in --parsable2 form with the columns the module asks for and applies
``add``/``modify`` as sacctmgr(1) describes them (TRES ``=-1`` clears a limit, ``preempt-=``
removes from the list), and logs every call, so the tests see exactly what would run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.modules import slurm_accounting

FAKE = r"""
import json, os, sys
db_path = os.path.join(os.path.dirname(sys.argv[0]), "db.json")
db = json.load(open(db_path))
args = [a for a in sys.argv[1:] if a not in ("--noheader", "--parsable2", "--immediate")]
with open(os.path.join(os.path.dirname(sys.argv[0]), "calls.log"), "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
def tres_set(old, new):
    d = dict(p.split("=", 1) for p in old.split(",") if p)
    k, v = new.split("=", 1)
    if v == "-1":
        d.pop(k, None)
    else:
        d[k] = v
    return ",".join(f"{k}={v}" for k, v in sorted(d.items()))
def apply(rec, sets):
    for s in sets:
        if "-=" in s:
            k, v = s.split("-=", 1)
            rec[k] = ",".join(n for n in rec[k].split(",") if n and n not in v.split(","))
            continue
        k, v = s.split("=", 1)
        if k in ("grptres", "maxtresperuser"):
            k = "maxtrespu" if k == "maxtresperuser" else k
            rec[k] = tres_set(rec[k], v)
        else:
            rec[k] = v
if args[0] == "show":
    fields = args[-1].split("=", 1)[1].split(",")
    rows = db["qos"] if args[1] == "qos" else db["assoc"]
    for r in rows:
        print("|".join(r.get(f, "") for f in fields))
elif args[:2] == ["add", "qos"]:
    db["qos"].append({"name": args[2], "priority": "0", "preempt": "", "preemptmode": "cluster",
                      "grptres": "", "maxtrespu": ""})
elif args[:2] == ["add", "account"]:
    db["assoc"].append({"account": args[2], "user": "", "partition": "", "fairshare": "1", "grptres": "",
                        "qos": "normal", "defaultqos": ""})
elif args[:2] == ["add", "user"]:
    acct = args[3].split("=")[1]
    db["assoc"].append({"account": acct, "user": args[2], "partition": "", "fairshare": "1", "grptres": "",
                        "qos": "normal", "defaultqos": ""})
elif args[:2] == ["modify", "qos"]:
    name = args[3].split("=")[1]
    rec = next(q for q in db["qos"] if q["name"] == name)
    apply(rec, args[5:])
elif args[:2] == ["modify", "account"]:
    name = args[3].split("=")[1]
    rec = next(a for a in db["assoc"] if a["account"] == name and not a["user"])
    apply(rec, args[6:])
else:
    sys.exit("fake sacctmgr: unknown " + " ".join(args))
json.dump(db, open(db_path, "w"))
"""

EMPTY = {
    "qos": [
        {"name": "normal", "priority": "0", "preempt": "", "preemptmode": "cluster", "grptres": "", "maxtrespu": ""}
    ],
    "assoc": [
        {
            "account": "root",
            "user": "",
            "partition": "",
            "fairshare": "1",
            "grptres": "",
            "qos": "normal",
            "defaultqos": "",
        },
        {
            "account": "root",
            "user": "root",
            "partition": "",
            "fairshare": "1",
            "grptres": "",
            "qos": "normal",
            "defaultqos": "",
        },
    ],
}


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    script = bindir / "sacctmgr"
    script.write_text(f"#!{sys.executable}\n" + FAKE)
    script.chmod(0o755)
    (bindir / "db.json").write_text(json.dumps(EMPTY))
    return bindir


def _accounting(tier: str = "tier2") -> dict[str, Any]:
    return cluster_plan(*load_inventory(tier))["slurm"]["accounting"]


def run(capsys: pytest.CaptureFixture[str], fake: Path, check: bool = False, **args: Any) -> dict[str, Any]:
    acct = _accounting()
    args = {
        "cluster": "tier2",
        "qos": acct["qos"],
        "accounts": acct["accounts"],
        "sacctmgr": str(fake / "sacctmgr"),
        **args,
    }
    if check:
        args["_ansible_check_mode"] = True
    with patch_module_args(args), pytest.raises(SystemExit):
        slurm_accounting.main()
    return json.loads(capsys.readouterr().out)


def _writes(fake: Path) -> list[list[str]]:
    calls = [json.loads(line) for line in (fake / "calls.log").read_text().splitlines()]
    return [c for c in calls if "show" not in c]


def test_first_run_creates_qos_accounts_users_then_nothing_changes(
    fake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(capsys, fake)
    assert not out.get("failed"), out
    assert out["changed"] is True
    db = json.loads((fake / "db.json").read_text())
    qos = {q["name"]: q for q in db["qos"]}
    assert qos["high"]["priority"] == "100" and qos["high"]["grptres"] == "gres/gpu=4"
    assert qos["high"]["maxtrespu"] == "gres/gpu=4" and qos["high"]["preempt"] == "preemptible"
    assert qos["preemptible"]["maxtrespu"] == "gres/gpu=8" and qos["preemptible"]["preemptmode"] == "requeue"
    assert qos["normal"]["priority"] == "10" and qos["normal"]["grptres"] == ""
    accts = {(a["account"], a["user"]): a for a in db["assoc"]}
    assert accts[("research", "")]["fairshare"] == "50" and accts[("research", "")]["grptres"] == ""
    # product: 50 % guaranteed (8 GPUs) + 25 % borrowing (4 GPUs) of tier2's 16
    assert accts[("product", "")]["grptres"] == "gres/gpu=12"
    assert accts[("product", "")]["qos"] == "high,normal,preemptible"
    assert accts[("product", "")]["defaultqos"] == "normal"
    assert {u for (a, u) in accts if u and a != "root"} == {"alice", "bob", "carol"}
    assert out["unmanaged"] == {"qos": [], "accounts": []}  # root's account: the maintenance QOS
    assert qos["gpucluster-check"]["priority"] == "0" and qos["gpucluster-check"]["preempt"] == ""
    assert accts[("root", "")]["qos"] == "gpucluster-check,normal"
    # every write is an argument list with --immediate (no prompt), never a shell line
    assert all(c[0] == "--immediate" for c in _writes(fake))

    (fake / "calls.log").unlink()
    again = run(capsys, fake)
    assert again["changed"] is False and again["commands"] == []
    assert _writes(fake) == []


def test_check_mode_reports_the_commands_and_writes_nothing(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, fake, check=True)
    assert out["changed"] is True
    assert [str(fake / "sacctmgr"), "--immediate", "add", "qos", "high"] in out["commands"]
    assert _writes(fake) == []
    assert json.loads((fake / "db.json").read_text()) == EMPTY


def test_a_changed_share_and_a_cleared_limit_modify_only_that(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, fake)
    (fake / "calls.log").unlink()
    acct = _accounting()
    accounts = [dict(a) for a in acct["accounts"]]
    accounts[1]["fairshare"] = 30
    accounts[1]["grp_gpus"] = None
    qos = [dict(q) for q in acct["qos"]]
    qos[2]["preempt"] = []
    out = run(capsys, fake, accounts=accounts, qos=qos)
    assert out["changed"] is True
    assert _writes(fake) == [
        ["--immediate", "modify", "qos", "where", "name=high", "set", "preempt-=preemptible"],
        [
            "--immediate",
            "modify",
            "account",
            "where",
            "name=product",
            "cluster=tier2",
            "set",
            "fairshare=30",
            "grptres=gres/gpu=-1",
        ],
    ]
    db = json.loads((fake / "db.json").read_text())
    product = next(a for a in db["assoc"] if a["account"] == "product" and not a["user"])
    assert product["fairshare"] == "30" and product["grptres"] == ""


def test_a_failing_sacctmgr_fails_the_task_with_its_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tool = tmp_path / "sacctmgr"
    tool.write_text("#!/bin/sh\necho 'sacctmgr: error: Problem talking to the database' >&2\nexit 1\n")
    tool.chmod(0o755)
    with patch_module_args({"cluster": "tier2", "sacctmgr": str(tool)}), pytest.raises(SystemExit):
        slurm_accounting.main()
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] and "Problem talking to the database" in out["msg"]


def test_parse_tres_keeps_other_tres() -> None:
    assert slurm_accounting.parse_tres("cpu=2,gres/gpu=4") == {"cpu": "2", "gres/gpu": "4"}
    assert slurm_accounting.parse_tres("") == {}


def test_mig_limits_are_set_on_billing_and_clear_the_old_gpu_limit() -> None:
    """A MIG site's limits count MIG slices (gpu_tres billing); a gres/gpu limit left from before is cleared."""
    want = [{"name": "high", "priority": 100, "grp_gpus": 28, "max_gpus_per_user": 28, "gpu_tres": "billing"}]
    have = {"high": {"priority": "100", "preempt": "", "preemptmode": "cluster", "grptres": "gres/gpu=4",
                     "maxtrespu": "gres/gpu=4"}}  # fmt: skip
    cmds = slurm_accounting.qos_commands(want, have)
    assert cmds == [
        ["modify", "qos", "where", "name=high", "set", "grptres=billing=28,gres/gpu=-1",
         "maxtresperuser=billing=28,gres/gpu=-1"]
    ]  # fmt: skip
    have["high"].update(grptres="billing=28", maxtrespu="billing=28")
    assert slurm_accounting.qos_commands(want, have) == []
    accounts = [{"name": "research", "fairshare": 50, "grp_gpus": 70, "gpu_tres": "billing"}]
    assocs = [{"account": "research", "user": "", "partition": "", "fairshare": "50", "grptres": "gres/gpu=10",
               "qos": "", "defaultqos": ""}]  # fmt: skip
    assert slurm_accounting.account_commands("c", accounts, assocs) == [
        ["modify", "account", "where", "name=research", "cluster=c", "set", "grptres=billing=70,gres/gpu=-1"]
    ]
