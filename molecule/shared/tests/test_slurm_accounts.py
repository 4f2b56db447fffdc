"""Slurm policy in the lab: accounts, users, QOS and their limits, fair share, node features.

What sacctmgr, sshare, scontrol and squeue report on the head must be the plan's
``slurm.accounting``; a job above its QOS's GPU limit does not run while one within it does.
"""

from __future__ import annotations

from typing import Any

from conftest import hosts_with


def _head(hosts: dict[str, Any], plan: dict[str, Any]) -> Any:
    return hosts[plan["cluster"]["head"]]


def _rows(text: str, fields: list[str]) -> list[dict[str, str]]:
    return [dict(zip(fields, line.split("|"), strict=False)) for line in text.splitlines() if line.strip()]


def _gpus(tres: str) -> int | None:
    parts = dict(p.split("=", 1) for p in tres.split(",") if p)
    return int(parts["gres/gpu"]) if "gres/gpu" in parts else None


def test_the_policy_is_in_slurm_conf(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    acct = plan["slurm"]["accounting"]
    shown = _head(hosts, plan).check_output("scontrol show config")
    conf = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in shown.splitlines()) if v}
    assert conf["PriorityType"] == "priority/multifactor"
    assert conf["AccountingStorageEnforce"] == "associations,limits,qos"
    assert conf["PreemptType"] == acct["preempt_type"]
    assert conf["PreemptMode"] == acct["preempt_mode"]
    assert int(conf["PriorityWeightFairShare"]) == acct["weights"]["fairshare"]
    assert int(conf["PriorityWeightQOS"]) == acct["weights"]["qos"]


def test_accounts_and_users_are_in_accounting(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    cluster = plan["slurm"]["cluster_name"]
    fields = ["account", "user", "fairshare", "grptres", "qos", "defaultqos"]
    out = _head(hosts, plan).check_output(
        f"sacctmgr --noheader --parsable2 show assoc where cluster={cluster} format={','.join(fields)}"
    )
    rows = _rows(out, fields)
    own = {r["account"]: r for r in rows if not r["user"]}
    users = {(r["account"], r["user"]) for r in rows if r["user"]}
    for a in plan["slurm"]["accounting"]["accounts"]:
        row = own[a["name"]]
        assert int(row["fairshare"]) == a["fairshare"], row
        assert _gpus(row["grptres"]) == a["grp_gpus"], row
        assert sorted(row["qos"].split(",")) == sorted(a["qos"]), row
        assert row["defaultqos"] == a["default_qos"], row
        for user in a["users"]:
            assert (a["name"], user) in users, (a["name"], user)


def test_qos_carry_their_gpu_limits(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    fields = ["name", "priority", "preempt", "preemptmode", "grptres", "maxtrespu"]
    out = _head(hosts, plan).check_output(f"sacctmgr --noheader --parsable2 show qos format={','.join(fields)}")
    shown = {r["name"]: r for r in _rows(out, fields)}
    for q in plan["slurm"]["accounting"]["qos"]:
        row = shown[q["name"]]
        assert int(row["priority"]) == q["priority"], row
        assert sorted(filter(None, row["preempt"].split(","))) == q["preempt"], row
        assert _gpus(row["grptres"]) == q["grp_gpus"], row
        assert _gpus(row["maxtrespu"]) == q["max_gpus_per_user"], row
        assert row["preemptmode"].lower() == q["preempt_mode"], row


def test_sshare_lists_the_teams_with_their_shares(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    out = _head(hosts, plan).check_output("sshare --noheader --parsable2 --all --format=Account,User,RawShares")
    shares = {r["account"].strip(): r["raw"] for r in _rows(out, ["account", "user", "raw"]) if not r["user"]}
    for a in plan["slurm"]["accounting"]["accounts"]:
        if a["name"] == "root":  # the association tree's root (the active checks' account): sshare shows no share
            assert "root" in shares, shares
            continue
        assert int(shares[a["name"]]) == a["fairshare"], (a["name"], shares)


def test_nodes_carry_their_features(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = _head(hosts, plan)
    seen = []
    for group in plan["slurm"]["accounting"]["node_features"]:
        for name in head.check_output(f"scontrol show hostnames {group['nodes']}").split():
            shown = head.check_output(f"scontrol show node {name}")
            fields = dict(w.split("=", 1) for w in shown.split() if "=" in w)
            assert fields["AvailableFeatures"].split(",") == group["features"], shown
            seen.append(name)
    assert sorted(seen) == sorted(hosts_with(plan, "compute"))


def test_a_job_above_its_qos_gpu_limit_waits_and_one_within_runs(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """root joins the first team's account for the test only (sacctmgr accepts any user name)."""
    head = _head(hosts, plan)
    acct = plan["slurm"]["accounting"]
    account = acct["accounts"][0]["name"]
    qos = next(q for q in acct["qos"] if q["max_gpus_per_user"] is not None)
    per_node = plan["cluster"]["gpus_per_node"]
    nodes_over = qos["max_gpus_per_user"] // per_node + 1
    assert nodes_over <= len(hosts_with(plan, "compute")), "the lab cannot hold a job above the limit"
    cluster = plan["slurm"]["cluster_name"]
    head.check_output(f"sacctmgr --immediate add user root account={account} cluster={cluster}")
    job = ""
    try:
        job = head.check_output(
            f"sbatch --parsable --job-name=qos-over --account={account} --qos={qos['name']} "
            f"--nodes={nodes_over} --gres=gpu:{per_node} --time=1 --wrap='sleep 5'"
        ).split(";")[0]
        # slurmctld sets the reason at its next scheduling pass
        reason = head.check_output(
            f"for i in $(seq 30); do r=$(squeue --noheader --jobs={job} --format='%T %r'); "
            'case $r in *QOS*) break;; esac; sleep 1; done; echo "$r"'
        )
        assert reason.split()[0] == "PENDING", reason
        assert reason.split()[1] == "QOSMaxGRESPerUser", reason
        within = head.run(
            f"srun --job-name=qos-within --account={account} --qos={qos['name']} --nodes=1 "
            f"--gres=gpu:{min(per_node, qos['max_gpus_per_user'])} --time=1 hostname"
        )
        assert within.rc == 0, within.stderr
        assert within.stdout.strip() in hosts_with(plan, "compute")
    finally:
        if job:
            head.run(f"scancel {job}")
        head.run(f"sacctmgr --immediate delete user root account={account} cluster={cluster}")
