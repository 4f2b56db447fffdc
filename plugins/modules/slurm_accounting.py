#!/usr/bin/python
"""Bring Slurm accounting (QOS, accounts, users) to the plan's state with sacctmgr, idempotently."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_accounting
short_description: Create and update Slurm QOS, accounts and users with sacctmgr, only where they differ
version_added: 0.1.0
description:
  - Reads the QOS and the associations of O(cluster) with
    C(sacctmgr --noheader --parsable2 show qos|assoc format=...), compares them with O(qos) and
    O(accounts), and runs C(sacctmgr --immediate add|modify ...) for what differs, each as an
    argument list (never through a shell). A second run with the same input changes nothing.
  - QOS settings managed - Priority, Preempt, PreemptMode, the C(gres/gpu) part of GrpTRES and of
    MaxTRESPerUser (other TRES in those limits are kept). A GPU limit of null clears the limit
    (C(gres/gpu=-1), sacctmgr(1)). An entry's C(gpu_tres) (default C(gres/gpu)) names the TRES the
    GPU limits are in; C(billing) on a MIG site, whose limits count MIG slices, and then a
    C(gres/gpu) limit left from before is cleared.
  - Account settings managed (the account's own association on O(cluster)) - Fairshare (RawShares),
    the QOS list, the default QOS and the C(gres/gpu) part of GrpTRES. Each listed user gets an
    association under the account.
  - Nothing is deleted - QOS, accounts and users that are not listed are left alone and reported in
    RV(unmanaged). Remove them with C(sacctmgr delete) (docs/runbook.md).
  - Runs on the host where sacctmgr reaches slurmdbd (the head). Check mode reports the commands
    it would run.
options:
  cluster:
    description: The Slurm ClusterName whose associations are managed (registered already).
    type: str
    required: true
  qos:
    description: The QOS, each with name, priority, preempt (list), preempt_mode, grp_gpus, max_gpus_per_user, gpu_tres.
    type: list
    elements: dict
    default: []
  accounts:
    description:
      - The accounts, each with name, fairshare, users, qos (list), default_qos, grp_gpus,
        description, organization, gpu_tres.
    type: list
    elements: dict
    default: []
  sacctmgr:
    description: The sacctmgr command.
    type: str
    default: sacctmgr
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Accounts, users and QOS from the plan
  gpucluster.tiers.slurm_accounting:
    cluster: "{{ gpucluster_host_plan.slurm.cluster_name }}"
    qos: "{{ gpucluster_host_plan.slurm.accounting.qos }}"
    accounts: "{{ gpucluster_host_plan.slurm.accounting.accounts }}"
"""

RETURN = r"""
commands:
  description: The sacctmgr argument lists run (or, in check mode, that would run), in order.
  type: list
  elements: list
  returned: always
unmanaged:
  description: QOS and accounts of the cluster that the input does not list (left alone).
  type: dict
  returned: always
  sample: {"qos": ["scavenger"], "accounts": ["root"]}
"""

from typing import Any  # noqa: E402  (module layout: docs first)

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

GPU = "gres/gpu"
#: sacctmgr(1): PreemptMode "OFF", "" or "Cluster" all mean "use the cluster-wide PreemptMode"
CLUSTER_MODES = ("", "off", "cluster")


def parse_tres(text: str) -> dict[str, str]:
    """``cpu=2,gres/gpu=4`` -> {"cpu": "2", "gres/gpu": "4"}."""
    out = {}
    for part in filter(None, (text or "").split(",")):
        key, _sep, value = part.partition("=")
        out[key.lower()] = value
    return out


def _names(text: str) -> list[str]:
    return sorted(n.lower() for n in (text or "").split(",") if n)


def _mode(text: str) -> str:
    m = (text or "").strip().lower()
    return "cluster" if m in CLUSTER_MODES else m


def _gpu_limit(value: int | None) -> str:
    return "-1" if value is None else str(int(value))


def _gpu_now(tres: str, name: str = GPU) -> str:
    return parse_tres(tres).get(name, "-1")


def _limit_sets(key: str, entry: dict[str, Any], field: str, now: str) -> list[str]:
    """``key=<tres>=<n>`` when the limit differs; on another TRES than gres/gpu (billing), a gres/gpu
    limit left from before is cleared in the same setting (``key=billing=<n>,gres/gpu=-1``)."""
    tres = (entry.get("gpu_tres") or GPU).lower()
    parts = []
    if _gpu_limit(entry.get(field)) != _gpu_now(now, tres):
        parts.append(f"{tres}={_gpu_limit(entry.get(field))}")
    if tres != GPU and _gpu_now(now) != "-1":
        parts.append(f"{GPU}=-1")
    return ["{}={}".format(key, ",".join(parts))] if parts else []


def parse_rows(text: str, fields: list[str]) -> list[dict[str, str]]:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        parts += [""] * (len(fields) - len(parts))
        rows.append(dict(zip(fields, parts, strict=False)))
    return rows


QOS_FIELDS = ["name", "priority", "preempt", "preemptmode", "grptres", "maxtrespu"]
ASSOC_FIELDS = ["account", "user", "partition", "fairshare", "grptres", "qos", "defaultqos"]


def qos_commands(want: list[dict[str, Any]], have: dict[str, dict[str, str]]) -> list[list[str]]:
    """sacctmgr argument lists that bring the QOS in ``have`` to ``want`` (add, then modify)."""
    cmds: list[list[str]] = []
    for q in want:
        name = q["name"].lower()
        now = have.get(name)
        if now is None:
            cmds.append(["add", "qos", name])
            now = {"priority": "0", "preempt": "", "preemptmode": "cluster", "grptres": "", "maxtrespu": ""}
        sets = []
        if str(int(q.get("priority", 0))) != (now.get("priority") or "0"):
            sets.append(f"priority={int(q.get('priority', 0))}")
        want_preempt = sorted(p.lower() for p in q.get("preempt") or [])
        have_preempt = _names(now.get("preempt", ""))
        if want_preempt != have_preempt:
            if want_preempt:
                sets.append("preempt=" + ",".join(want_preempt))
            else:  # sacctmgr(1): "-=" removes QOS from the Preempt list
                sets.append("preempt-=" + ",".join(have_preempt))
        want_mode = _mode(q.get("preempt_mode") or "cluster")
        if want_mode != _mode(now.get("preemptmode", "")):
            sets.append("preemptmode=" + want_mode)
        sets += _limit_sets("grptres", q, "grp_gpus", now.get("grptres", ""))
        sets += _limit_sets("maxtresperuser", q, "max_gpus_per_user", now.get("maxtrespu", ""))
        if sets:
            cmds.append(["modify", "qos", "where", "name=" + name, "set", *sets])
    return cmds


def account_commands(cluster: str, want: list[dict[str, Any]], assocs: list[dict[str, str]]) -> list[list[str]]:
    """sacctmgr argument lists for the accounts' own associations and their users on ``cluster``."""
    cmds: list[list[str]] = []
    acct_rows = {r["account"].lower(): r for r in assocs if not r["user"] and not r["partition"]}
    users = {(r["account"].lower(), r["user"].lower()) for r in assocs if r["user"]}
    for a in want:
        name = a["name"].lower()
        now = acct_rows.get(name)
        if now is None:
            cmds.append(
                [
                    "add",
                    "account",
                    name,
                    "cluster=" + cluster,
                    "description=" + (a.get("description") or name),
                    "organization=" + (a.get("organization") or name),
                ]
            )
            now = {"fairshare": "1", "grptres": "", "qos": "", "defaultqos": ""}
        sets = []
        if str(int(a.get("fairshare", 1))) != now.get("fairshare", ""):
            sets.append(f"fairshare={int(a.get('fairshare', 1))}")
        want_qos = sorted(q.lower() for q in a.get("qos") or [])
        if want_qos and want_qos != _names(now.get("qos", "")):
            sets.append("qos=" + ",".join(want_qos))
        sets += _limit_sets("grptres", a, "grp_gpus", now.get("grptres", ""))
        where = ["where", "name=" + name, "cluster=" + cluster, "set"]
        if sets:
            cmds.append(["modify", "account", *where, *sets])
        # the default QOS must be in the association's QOS list: set it after the list
        dq = (a.get("default_qos") or "").lower()
        if dq and dq != (now.get("defaultqos") or "").lower():
            cmds.append(["modify", "account", *where, "defaultqos=" + dq])
        for user in sorted(u.lower() for u in a.get("users") or []):
            if (name, user) not in users:
                cmds.append(["add", "user", user, "account=" + name, "cluster=" + cluster])
    return cmds


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "cluster": {"type": "str", "required": True},
            "qos": {"type": "list", "elements": "dict", "default": []},
            "accounts": {"type": "list", "elements": "dict", "default": []},
            "sacctmgr": {"type": "str", "default": "sacctmgr"},
        },
        supports_check_mode=True,
    )
    p = module.params
    tool = p["sacctmgr"]
    cluster = p["cluster"].lower()

    def read(args: list[str]) -> str:
        rc, out, err = module.run_command([tool, "--noheader", "--parsable2", *args])
        if rc != 0:
            module.fail_json(msg=f"sacctmgr {' '.join(args)} failed (rc {rc}): {err.strip() or out.strip()}")
        return out

    qos_rows = parse_rows(read(["show", "qos", "format=" + ",".join(QOS_FIELDS)]), QOS_FIELDS)
    have_qos = {r["name"].lower(): r for r in qos_rows}
    assocs = parse_rows(
        read(["show", "assoc", "where", "cluster=" + cluster, "format=" + ",".join(ASSOC_FIELDS)]), ASSOC_FIELDS
    )
    # QOS first: an account's QOS list may only name QOS that exist
    commands = qos_commands(p["qos"], have_qos) + account_commands(cluster, p["accounts"], assocs)
    want_qos = {q["name"].lower() for q in p["qos"]}
    want_accounts = {a["name"].lower() for a in p["accounts"]}
    unmanaged = {
        "qos": sorted(set(have_qos) - want_qos),
        "accounts": sorted({r["account"].lower() for r in assocs if not r["user"]} - want_accounts),
    }
    argvs = [[tool, "--immediate", *c] for c in commands]
    if not module.check_mode:
        for argv in argvs:
            rc, out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(
                    msg=f"{' '.join(argv)} failed (rc {rc}): {err.strip() or out.strip()}",
                    commands=argvs,
                    unmanaged=unmanaged,
                )
    module.exit_json(changed=bool(argvs), commands=argvs, unmanaged=unmanaged)


if __name__ == "__main__":
    main()
