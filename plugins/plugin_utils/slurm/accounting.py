"""Who may use how much of the cluster under Slurm: priority, QOS, accounts, node features.

Inputs: ``plan["tenants"]`` (inventory ``gpucluster_tenants``, one Slurm account per team),
the cluster's GPU count and fabric/cooling from the plan, and the optional inventory section
``gpucluster_slurm`` (weights, QOS overrides, preemption). Output: data for slurm.conf.j2 and
for the ``slurm_accounting`` module, which applies accounts, users and QOS with sacctmgr.

Behaviour relied on (Slurm 22.05, the version of Debian 12):
- priority/multifactor: a job's priority is the sum of each factor (0.0-1.0) times its
  PriorityWeight*; the fair-share factor comes from the association's RawShares (sacctmgr
  ``fairshare=``) relative to its siblings, and the QOS factor is the QOS priority divided
  by the highest QOS priority (https://slurm.schedmd.com/priority_multifactor.html, "Job
  Priority Factors", "Fair-share Factor", "QOS Factor"). Usage decays with
  PriorityDecayHalfLife (default 7 days, slurm.conf(5)).
- TRESBillingWeights on a partition: with only ``GRES/gpu`` listed, a job's billing (and so
  its fair-share usage) is its GPU count; without it Slurm bills allocated CPUs
  (slurm.conf(5), TRESBillingWeights; https://slurm.schedmd.com/tres.html).
- AccountingStorageEnforce=associations,limits,qos: a job needs an association, the
  association's and QOS limits apply, and only the association's QOS may be requested
  (slurm.conf(5), AccountingStorageEnforce; https://slurm.schedmd.com/resource_limits.html).
  A job above a QOS's MaxTRESPerUser stays pending with reason QOSMax*PerUser unless the QOS
  has Flags=DenyOnLimit (resource_limits.html, "QOS specific limits"; sacctmgr(1) Flags).
- PreemptType=preempt/qos with PreemptMode=REQUEUE: a job of a QOS listed in another QOS's
  ``Preempt`` is requeued when the other needs its resources
  (https://slurm.schedmd.com/preempt.html, "PreemptType", "PreemptMode").
- MIG (compute/mig.py ``billing_weights``): each MIG device is one ``gres/gpu``, so the site's
  TRESBillingWeights bill MIG slices instead (1g = 1, a whole GPU = 7) and the QOS and account GPU
  limits are ``billing`` limits in the same slices (GrpTRES=billing=<GPUs x 7>): a 1g.10gb job uses a
  seventh of what a whole-GPU job uses of its share and of its limits (tres.html: the Billing TRES
  comes from the partition's TRESBillingWeights and can be limited like any TRES).
- Node Features are free-form strings a job selects with ``--constraint``
  (slurm.conf(5), NodeName ... Features; sbatch(1) --constraint).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import mig as mig_mod
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.model import (
    Accounting,
    AccountRow,
    Billing,
    NodeFeatures,
    QosRow,
    QosSpec,
)

FIELD = "gpucluster_slurm"

#: PriorityWeight* defaults (slurm.conf(5) defaults are 0, which leaves only the age factor
#: at work once multifactor is on). Fair share dominates, so a team below its share goes first;
#: the QOS can lift urgent work by half as much; age breaks ties among waiting jobs and keeps
#: big jobs from starving (priority_multifactor.html, "Job Priority Factors": a factor is 0.0-1.0
#: times its weight, so the weights are the maximum points a factor can give).
DEFAULT_WEIGHTS = {"fairshare": 10000, "qos": 5000, "age": 1000, "job_size": 0, "partition": 0}
#: slurm.conf(5): the PriorityWeight* values are 32-bit unsigned integers.
WEIGHT_MAX = 4294967295
#: PriorityDecayHalfLife in days (slurm.conf(5) default 7-0); PriorityMaxAge (default 7-0).
DEFAULT_DECAY_HALF_LIFE_DAYS = 7
DEFAULT_MAX_AGE_DAYS = 7
#: PreemptMode values that go with preempt/qos (preempt.html: SUSPEND needs GANG, not used here).
PREEMPT_MODES = ("off", "cancel", "requeue")
DEFAULT_PREEMPT_MODE = "requeue"
#: The account of every job when the inventory lists no teams.
DEFAULT_ACCOUNT = "general"
#: The QOS every association gets as its default (Slurm creates "normal" with the database).
DEFAULT_QOS = "normal"

#: The built-in QOS set; GPU limits are percentages of the cluster's GPUs so one set fits every tier.
#: high: urgent work, top priority, at most a quarter of the GPUs in all (GrpTRES) so it cannot
#: starve the teams' fair share; normal: everyday work, limited only by the teams' shares;
#: preemptible: scavenger work on idle GPUs, requeued when normal or high needs them, at most
#: half the GPUs per user (MaxTRESPerUser).
DEFAULT_QOS_SET: tuple[QosSpec, ...] = (
    {"name": "preemptible", "priority": 0, "preempt": [], "grp_gpus_percent": None, "max_gpus_per_user_percent": 50},
    {
        "name": "normal",
        "priority": 10,
        "preempt": ["preemptible"],
        "grp_gpus_percent": None,
        "max_gpus_per_user_percent": None,
    },
    {
        "name": "high",
        "priority": 100,
        "preempt": ["preemptible"],
        "grp_gpus_percent": 25,
        "max_gpus_per_user_percent": 25,
    },
)


#: The maintenance QOS of the head's active check jobs (plan healing.active.qos, compute/healing.py QOS):
#: priority 0, no Preempt list and in no other QOS's list (it never preempts and is never preempted: a
#: check job only starts on an idle node, and gpucluster-heal cancels one that does not start), no
#: limits; only root's association may use it (the teams' accounts do not list it).
#: the billing of a site without MIG: one GPU bills one (compute/mig.py billing_weights)
NO_MIG_BILLING: Billing = {
    "unit": "gpu",
    "per_gpu": 1,
    "tres": "gres/gpu",
    "untyped": 1.0,
    "weights": {},
    "text": "GRES/gpu=1.0",
}

MAINTENANCE_QOS = "gpucluster-check"
MAINTENANCE_ACCOUNT = "root"  # slurmdbd's own account of root (created with the cluster)


@dataclass(frozen=True)
class Qos:
    """One QOS as sacctmgr sets it; GPU limits in units of ``gpu_tres`` (None: no limit): GPUs
    (gres/gpu), or MIG slices (billing) on a MIG site."""

    name: str
    priority: int
    preempt: list[str]
    preempt_mode: str
    grp_gpus: int | None
    max_gpus_per_user: int | None
    description: str = ""
    gpu_tres: str = "gres/gpu"

    def as_row(self) -> QosRow:
        return QosRow(
            name=self.name,
            priority=self.priority,
            preempt=self.preempt,
            preempt_mode=self.preempt_mode,
            grp_gpus=self.grp_gpus,
            max_gpus_per_user=self.max_gpus_per_user,
            description=self.description,
            gpu_tres=self.gpu_tres,
        )


@dataclass(frozen=True)
class Account:
    """A Slurm account (one per team): RawShares, users, QOS it may use, GPU cap (GrpTRES)."""

    name: str
    fairshare: int
    users: list[str]
    qos: list[str]
    default_qos: str
    grp_gpus: int | None
    description: str = ""
    organization: str = "gpucluster"
    gpu_tres: str = "gres/gpu"

    def as_row(self) -> AccountRow:
        return AccountRow(
            name=self.name,
            fairshare=self.fairshare,
            users=self.users,
            qos=self.qos,
            default_qos=self.default_qos,
            grp_gpus=self.grp_gpus,
            description=self.description,
            organization=self.organization,
            gpu_tres=self.gpu_tres,
        )


def _gpus(percent: float | None, gpus_total: int) -> int | None:
    """A percentage of the cluster's GPUs, floored, at least one GPU (None: no limit)."""
    if percent is None:
        return None
    return max(1, int(gpus_total * percent // 100))


def _weights(section: Mapping[str, Any]) -> dict[str, int]:
    raw = section.get("priority_weights") or {}
    out = dict(DEFAULT_WEIGHTS)
    for key, value in raw.items():
        require(key in DEFAULT_WEIGHTS, f"{FIELD}.priority_weights", key, f"one of {sorted(DEFAULT_WEIGHTS)}")
        out[key] = int(check_range(value, f"{FIELD}.priority_weights.{key}", 0, WEIGHT_MAX, integer=True))
    return out


def _units(gpus: int | None, billing: Billing) -> int | None:
    """A GPU limit in the unit of the plan's billing (GPUs, or MIG slices: GPUs x compute slices)."""
    return None if gpus is None else gpus * int(billing["per_gpu"])


def _qos_set(
    section: Mapping[str, Any], gpus_total: int, preempt_mode: str, billing: Billing | None = None
) -> list[Qos]:
    """The built-in QOS merged by name with ``gpucluster_slurm.qos`` (new names are added)."""
    merged: dict[str, QosSpec] = {q["name"]: QosSpec(**q) for q in DEFAULT_QOS_SET}
    for item in section.get("qos") or []:
        name = item["name"]
        base: QosSpec = merged.get(
            name,
            {"name": name, "priority": 0, "preempt": [], "grp_gpus_percent": None, "max_gpus_per_user_percent": None},
        )
        merged[name] = {
            "name": name,
            "priority": item.get("priority", base["priority"]),
            "preempt": item.get("preempt", base["preempt"]),
            "grp_gpus_percent": item.get("grp_gpus_percent", base["grp_gpus_percent"]),
            "max_gpus_per_user_percent": item.get("max_gpus_per_user_percent", base["max_gpus_per_user_percent"]),
        }
    billing = billing or NO_MIG_BILLING
    out = []
    for name, q in merged.items():
        where = f"{FIELD}.qos[{name}]"
        prio = int(check_range(q["priority"], f"{where}.priority", 0, WEIGHT_MAX, integer=True))
        for key, percent in (
            ("grp_gpus_percent", q["grp_gpus_percent"]),
            ("max_gpus_per_user_percent", q["max_gpus_per_user_percent"]),
        ):
            if percent is not None:
                check_range(percent, f"{where}.{key}", 0, 100)
                require(percent > 0, f"{where}.{key}", percent, "a percentage > 0 (leave it out for no limit)")
        for other in q["preempt"]:
            require(
                other in merged and other != name,
                f"{where}.preempt",
                other,
                f"another QOS of the set: {sorted(n for n in merged if n != name)}",
            )
        out.append(
            Qos(
                name=name,
                priority=prio,
                preempt=sorted(q["preempt"]) if preempt_mode != "off" else [],
                # only a QOS that another may preempt carries the mode; "cluster" leaves the others
                # at the cluster-wide PreemptMode (sacctmgr(1), QOS PreemptMode: OFF, "" or Cluster)
                preempt_mode=preempt_mode
                if preempt_mode != "off" and any(name in o["preempt"] for o in merged.values())
                else "cluster",
                grp_gpus=_units(_gpus(q["grp_gpus_percent"], gpus_total), billing),
                max_gpus_per_user=_units(_gpus(q["max_gpus_per_user_percent"], gpus_total), billing),
                description=f"gpucluster: {name}",
                gpu_tres=billing["tres"],
            )
        )
    return out


def _accounts(
    plan: Mapping[str, Any], qos: list[Qos], default_account: str, billing: Billing | None = None
) -> list[Account]:
    billing = billing or NO_MIG_BILLING
    names = [q.name for q in qos]
    gpus_total = plan["cluster"]["gpus_total"]
    tenants = plan.get("tenants") or []
    if not tenants:
        return [
            Account(default_account, 1, [], names, DEFAULT_QOS, None, "gpucluster: every job", gpu_tres=billing["tres"])
        ]
    out = []
    for t in tenants:
        # A team may hold its guaranteed GPUs plus what it may borrow, never more than the cluster;
        # at the whole cluster no cap is set (GrpTRES=gres/gpu=-1 clears it, sacctmgr(1)).
        cap = min(gpus_total, t["gpus"] + t["borrowing_limit_gpus"])
        out.append(
            Account(
                name=t["name"],
                fairshare=t["fairshare"],
                users=sorted(t.get("users") or []),
                qos=names,
                default_qos=DEFAULT_QOS,
                grp_gpus=_units(cap, billing) if cap < gpus_total else None,
                description=f"gpucluster tenant {t['name']}: {t['gpu_share_percent']:g}% of the GPUs",
                gpu_tres=billing["tres"],
            )
        )
    return out


def _features(plan: Mapping[str, Any]) -> list[NodeFeatures]:
    """Node features: GPU type, fabric type, scalable unit (rail block), cooling; one entry per set
    of compute hosts with the same features ({"nodes": hostlist, "features": [...]}), so the plan
    grows with the scalable units, not the nodes."""
    gpu_type = plan["cluster"]["gpu_model"].split("_")[0]
    fab = plan["fabric"]
    cooling = plan["cooling"]["cooling"]
    su_of = {h: su["name"] for su in fab["cabling"]["scalable_units"] for h in su["hosts"]}
    groups: dict[tuple[str, ...], list[str]] = {}
    for host, data in plan["hosts"].items():
        if "compute" not in data["roles"]:
            continue
        feats = [gpu_type]
        if fab["type"] != "none":
            feats.append(fab["type"])
        if host in su_of:
            feats.append(su_of[host])
        feats.append(cooling)
        groups.setdefault(tuple(feats), []).append(host)
    return [
        {"nodes": hostlist.compress(sorted(hosts)), "features": list(feats)} for feats, hosts in sorted(groups.items())
    ]


def _billing(raw: Mapping[str, Any]) -> Billing:
    """compute/mig.py ``billing_weights`` as its typed row (the same keys, in its order)."""
    return {
        "unit": raw["unit"],
        "per_gpu": raw["per_gpu"],
        "tres": raw["tres"],
        "untyped": raw["untyped"],
        "weights": raw["weights"],
        "text": raw["text"],
    }


def accounting_plan(section: object, plan: Mapping[str, Any]) -> Accounting:
    """``plan["slurm"]["accounting"]``: priority, preemption, QOS, accounts and node features."""
    section = section or {}
    if not isinstance(section, dict):
        raise PlanError(FIELD, section, "a mapping (priority_weights, qos, preempt_mode, ...)")
    gpus_total = plan["cluster"]["gpus_total"]
    preempt_mode = check_choice(
        section.get("preempt_mode", DEFAULT_PREEMPT_MODE), f"{FIELD}.preempt_mode", PREEMPT_MODES
    )
    half_life = int(
        check_range(
            section.get("decay_half_life_days", DEFAULT_DECAY_HALF_LIFE_DAYS),
            f"{FIELD}.decay_half_life_days",
            0,
            365,
            integer=True,
        )
    )
    max_age = int(
        check_range(section.get("max_age_days", DEFAULT_MAX_AGE_DAYS), f"{FIELD}.max_age_days", 0, 365, integer=True)
    )
    default_account = str(section.get("default_account", DEFAULT_ACCOUNT))
    tenant_names = {t["name"] for t in plan.get("tenants") or []}
    require(
        default_account not in tenant_names or not tenant_names,
        f"{FIELD}.default_account",
        default_account,
        "a name no team in gpucluster_tenants has",
    )
    billing = _billing(
        mig_mod.billing_weights(
            (plan.get("gpu") or {}).get("mig"),
            plan["cluster"]["gpu_model"].split("_")[0],
            section.get("mig_billing_weights"),
        )
    )
    qos = _qos_set(section, gpus_total, preempt_mode, billing)
    require(
        all(q.name != MAINTENANCE_QOS for q in qos),
        f"{FIELD}.qos",
        MAINTENANCE_QOS,
        "a name other than the maintenance QOS of the active checks",
    )
    accounts = _accounts(plan, qos, default_account, billing)
    qos.append(
        Qos(MAINTENANCE_QOS, 0, [], "cluster", None, None, "gpucluster: active checks (root only)", billing["tres"])
    )
    accounts.append(
        Account(
            MAINTENANCE_ACCOUNT,
            1,
            ["root"],
            [DEFAULT_QOS, MAINTENANCE_QOS],
            DEFAULT_QOS,
            None,
            "root: the maintenance QOS of the active checks",
            gpu_tres=billing["tres"],
        )
    )
    return {
        "priority_type": "priority/multifactor",
        "weights": _weights(section),
        "decay_half_life": f"{half_life}-0",
        "max_age": f"{max_age}-0",
        "enforce": "associations,limits,qos",
        "preempt_type": "preempt/none" if preempt_mode == "off" else "preempt/qos",
        "preempt_mode": preempt_mode.upper(),
        "billing_weights": billing["text"],
        "billing": billing,  # unit: gpu or mig_slice; the GPU limits of qos and accounts are in it
        "default_qos": DEFAULT_QOS,
        "qos": [q.as_row() for q in qos],
        "accounts": [a.as_row() for a in accounts],
        "node_features": _features(plan),
    }
