"""plan["healing"]: a cluster that finds and heals its own bad nodes (inventory ``gpucluster_healing``).

Two loops on the first head (the program and the compute node's active check read this section):

- **Active checks.** Every ``active.interval_s`` each idle compute node runs a check job through Slurm
  itself, in a maintenance QOS that never preempts work (``active.qos``), at most ``active.nodes_at_once``
  nodes at a time: a single-node all_reduce against the plan's intra-node floor, ``dcgmi diag`` at the
  health check's level, the storage read probe (shared file systems only); GPUDirect ``ib_write_bw`` (a two-node
  test) is planned off, with the reason: validate.yml and the bisection's pair round run it. Each check's
  ``budget_s`` is the job's time limit. A failure drains the node with the check and the figure in the
  reason (``gpucluster: check allreduce 312.4 GB/s < floor 460 GB/s``).
- **Remediation.** Every ``remediation.interval_s`` the loop reads the drains whose reason starts with
  ``reason_prefix`` (an operator's drain is never touched), classifies the reason (``classes``: the first
  whose ``match`` finds the text after the prefix wins), runs the class's action under the drain
  (``none``, ``gpu_reset``, ``reboot``; XIDs by NVIDIA's recovery action, compute/xid.py), re-validates
  and resumes; after ``retries`` remediations of a class within ``window_s`` (or a reboot not back in
  ``reboot_timeout_s``), ``replace``: the node stays drained with a ticket text.

Defaults and why:
- ``active.interval_s``: 12 h on every tier: Nebius soperator runs its GPU checks as scheduled Slurm jobs
  on each worker, every 12 hours by issue 42's survey (docs/sources.md [HL1]: the chart schedules each check
  by cron; 12 h unconfirmed there); a check holds a node for minutes (Azure's node health checks run
  all_reduce, ib_write_bw and the ECC checks in 5 to 8 minutes, [HL2]), so twice a day costs well under
  1% of a node's time.
- budgets: ``allreduce`` 300 s (one 8 GiB all_reduce run takes under a minute on 8 GPUs, the rest is the
  job's start), ``dcgm`` the health check's ``dcgm_timeout_s`` plus that start ([D2]: level 2 is
  "~ 2 minutes"), ``ib_write_bw`` and ``storage_read`` 120 s each: within Azure's 5 to 8 minutes [HL2].
- ``nodes_at_once``: the rollout's batch (``gpucluster_rollout.batch_size`` over the compute nodes, at
  least 1): never more nodes out of service for a check or a repair than a change of the cluster takes;
  the site may only lower it.
- ``retries: 2`` within ``window_s`` 7 days, then ``replace``: a node that needs a third repair in a week
  is a hardware case (the history keeps the evidence for the RMA).
- ``reboot_timeout_s`` 1800: a GPU server's firmware POST takes several minutes; half an hour is generous.

Kubernetes (``gpucluster_cluster.scheduler: kubernetes``): ``enabled: false`` with ``why``; this release
implements the Slurm path only. No I/O; pure functions of plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.healing_classes import (
    ACTIONS,
    CLASSES,
    METRICS,
    check_bool,
    check_mapping,
    remediation_classes,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import PROGRAM as HEALTH_PROGRAM
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import REASON_PREFIX
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    ActiveCheck,
    HealingRemediation,
    HealingSection,
    HealthDcgm,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.model import ValidationSection

FIELD = "gpucluster_healing"
SCHEMA_VERSION = 1
PROGRAM = "/usr/local/sbin/gpucluster-heal"
UNIT = "gpucluster-heal"
STATE_DIR = "/var/lib/gpucluster/heal"
HISTORY = "/var/log/gpucluster/node-history.jsonl"
METRICS_FILE = "/var/lib/prometheus/node-exporter/gpucluster_heal.prom"
QOS = "gpucluster-check"
CHECK_USER = "root"

#: How often each idle node runs the active checks, per tier: 12 h (soperator, docs/sources.md [HL1])
TIER_INTERVAL_S: dict[str, int] = {"tier1": 43200, "tier2": 43200, "tier3": 43200, "tier4": 43200}
DEFAULT_INTERVAL_S = 43200
#: allowed interval: at least an hour (a pass holds each node for minutes: more often and checks compete
#: with work), at most a week (a node unchecked longer is no longer watched)
INTERVAL_RANGE_S = (3600, 604800)
#: the check job's start and end around the measurement (srun, the job's prolog): part of every budget
JOB_OVERHEAD_S = 60
#: default budgets (the check job's --time), see the module's docstring
BUDGET_S: dict[str, int] = {"allreduce": 300, "ib_write_bw": 120, "storage_read": 120}
#: a budget below 30 s cannot start a job; above an hour it is a burn-in, not a check
BUDGET_RANGE_S = (30, 3600)
CHECKS = ("allreduce", "dcgm", "ib_write_bw", "storage_read")
#: why the one-node active check does not run ib_write_bw (it needs a second node serving on the same rail)
IB_WRITE_BW_OFF = (
    "a two-node test: the one-node active check does not run it; playbooks/validate.yml and "
    "playbooks/bisect.yml's pair round do"
)

REMEDIATION_INTERVAL_S = 60  # the head's timer: a drain waits at most a minute to be classified
RETRIES_DEFAULT = 2
RETRIES_RANGE = (0, 10)  # 0: the first failure after a remediation replaces; more than 10 hides a bad node
WINDOW_DEFAULT_S = 7 * 86400
WINDOW_RANGE_S = (3600, 30 * 86400)  # an hour to a month: the span over which repeated repairs count
REBOOT_TIMEOUT_DEFAULT_S = 1800
REBOOT_TIMEOUT_RANGE_S = (300, 7200)  # firmware POST takes minutes; two hours: the node is not coming back
#: the re-validation's wait beyond the checks' budgets (the job queues in the node's own reservation)
VALIDATE_SLACK_S = 300

TICKET = "Replace {node}: {reason} ({tries} remediation(s) since {since}; history {history})"


def batch_nodes(batch_size: int | str, nodes: int) -> int:
    """The rollout's batch as a node count over ``nodes`` compute nodes: a count (at most the nodes) or
    a percentage rounded down, at least 1 (Ansible's ``serial``; plan/rollout.py)."""
    count = nodes * int(batch_size.rstrip("%")) // 100 if isinstance(batch_size, str) else int(batch_size)
    return max(1, min(count, max(nodes, 1)))


def _interval(tier: str, raw: object) -> int:
    default = TIER_INTERVAL_S.get(tier, DEFAULT_INTERVAL_S)
    if raw is None:
        return default
    low, high = INTERVAL_RANGE_S
    return int(check_range(raw, f"{FIELD}.active.interval_s", low, high, integer=True, unit=" s (an hour to a week)"))


def _check_settings(raw: object, name: str) -> tuple[bool | None, int | None]:
    field = f"{FIELD}.active.checks.{name}"
    got = check_mapping(raw, field, ("enabled", "budget_s"))
    enabled = check_bool(got["enabled"], f"{field}.enabled") if "enabled" in got else None
    budget = None
    if "budget_s" in got:
        low, high = BUDGET_RANGE_S
        budget = int(
            check_range(
                got["budget_s"], f"{field}.budget_s", low, high, integer=True, unit=" s (a job's start to an hour)"
            )
        )
    return enabled, budget


def _shared_read_path(validation: ValidationSection) -> str | None:
    """The shared file system's validation directory (validation.tests.fio: the gated shared entry)."""
    for entry in (validation.get("tests") or {}).get("fio") or []:
        if entry.get("scope") == "shared":
            return str(entry["dir"])
    return None


def _planned_checks(plan: Mapping[str, Any]) -> dict[str, ActiveCheck]:
    """The active checks as the plan's floors allow them, before the site's settings."""
    floors = plan["validation"]
    dcgm: HealthDcgm = plan["health"]["dcgm"]
    gpus = int(plan["cluster"]["gpus_per_node"])
    size = floors.get("gate_message_bytes") or 8 * 2**30
    size_arg = f"{size // 2**30}G" if size % 2**30 == 0 else str(size)
    rdma = plan["fabric"]["type"] in RDMA_FABRICS
    read_path = _shared_read_path(floors)
    intra = floors.get("allreduce_intra_node_busbw_gbs")
    nic = floors.get("nic_write_bw_gbps")
    # the tier's read floor is the sum over all compute nodes reading at once (validation/gates.py gate_fio):
    # one node alone must reach its share
    total_read = floors.get("storage_read_gbps")
    nodes = max(int(plan["cluster"]["compute_nodes"]), 1)
    read = round(total_read / nodes, 3) if total_read is not None else None
    return {
        "allreduce": {
            "enabled": intra is not None,
            "why": None if intra is not None else "no intra-node all_reduce floor in the plan",
            "budget_s": BUDGET_S["allreduce"],
            "floor": intra,
            "unit": "GB/s",
            "command": ["all_reduce_perf", "-b", size_arg, "-e", size_arg, "-g", str(gpus)],
        },
        "dcgm": {
            "enabled": dcgm["level"] > 0,
            "why": None if dcgm["level"] > 0 else "gpucluster_slurm.health.dcgm_level is 0 (DCGM diagnostics off)",
            "budget_s": min(int(dcgm["timeout_s"]) + JOB_OVERHEAD_S, BUDGET_RANGE_S[1]),
            "level": dcgm["level"],
        },
        "ib_write_bw": {
            # a two-node test (a server on a neighbour of the rail): the active check of one idle node does not
            # run it; playbooks/validate.yml and the bisection's pair round (playbooks/bisect.yml) do
            "enabled": False,
            "why": IB_WRITE_BW_OFF
            if rdma and nic is not None
            else "no RDMA fabric (ib_write_bw needs InfiniBand or RoCE)",
            "budget_s": BUDGET_S["ib_write_bw"],
            "floor": nic,
            "unit": "Gb/s",
            "rails": plan["fabric"].get("rails") if rdma else 0,
        },
        "storage_read": {
            "enabled": read_path is not None and read is not None,
            "why": None if read_path is not None else "no shared file system (local NVMe only)",
            "budget_s": BUDGET_S["storage_read"],
            "floor": read,
            "unit": "GB/s",
            "floor_basis": f"the shared read floor {total_read} GB/s over {nodes} compute nodes (one node's share)",
            "path": read_path,
        },
    }


def _checks(plan: Mapping[str, Any], raw: dict[str, object]) -> dict[str, ActiveCheck]:
    """The active checks: the planned ones with the site's ``enabled`` and ``budget_s`` (``raw``: its
    ``gpucluster_healing.active``); turning on a check the cluster cannot run is a PlanError."""
    planned = _planned_checks(plan)
    raw_checks = check_mapping(raw.get("checks"), f"{FIELD}.active.checks", CHECKS)
    for name, check in planned.items():
        enabled, budget = _check_settings(raw_checks.get(name), name)
        if enabled is not None:
            if enabled and not check["enabled"]:
                raise PlanError(
                    f"{FIELD}.active.checks.{name}.enabled", enabled, f"false on this cluster: {check['why']}"
                )
            check["enabled"] = enabled
            check["why"] = None if enabled else f"{FIELD}.active.checks.{name}.enabled is false"
        if budget is not None:
            check["budget_s"] = budget
    return planned


def _remediation(rem: dict[str, object], batch: int, at_once: int, budgets: int, enabled: bool) -> HealingRemediation:
    """plan.healing.remediation from the site's ``gpucluster_healing.remediation`` (``rem``): the loop's
    limits and classes. ``budgets``: the enabled active checks' budgets (a re-validation runs them)."""
    f = f"{FIELD}.remediation"
    rem_enabled = check_bool(rem.get("enabled", True), f"{f}.enabled")
    retries = int(check_range(rem.get("retries", RETRIES_DEFAULT), f"{f}.retries", *RETRIES_RANGE, integer=True))
    window = int(
        check_range(
            rem.get("window_s", WINDOW_DEFAULT_S),
            f"{f}.window_s",
            *WINDOW_RANGE_S,
            integer=True,
            unit=" s (an hour to 30 days)",
        )
    )
    reboot_timeout = int(
        check_range(
            rem.get("reboot_timeout_s", REBOOT_TIMEOUT_DEFAULT_S),
            f"{f}.reboot_timeout_s",
            *REBOOT_TIMEOUT_RANGE_S,
            integer=True,
            unit=" s (5 minutes to 2 hours)",
        )
    )
    classes = remediation_classes(rem.get("actions"))
    return {
        "enabled": enabled and rem_enabled,
        "interval_s": REMEDIATION_INTERVAL_S,
        "nodes_at_once": at_once,
        "rollout_batch_nodes": batch,
        "retries": retries,
        "window_s": window,
        "reboot_timeout_s": reboot_timeout,
        "validate_timeout_s": budgets + VALIDATE_SLACK_S,
        # the alerts' limits (monitoring/alerts.py): a node under remediation longer than a reboot and a
        # re-validation take; the loop silent for three of its intervals
        "stuck_after_s": reboot_timeout + budgets + VALIDATE_SLACK_S,
        "stale_after_s": 3 * REMEDIATION_INTERVAL_S,
        "classes": classes,
        "actions": list(ACTIONS),
        "ticket": TICKET,
    }


def _nodes_at_once(rem: dict[str, object], batch_size: int | str, nodes: int) -> tuple[int, int]:
    """(the rollout's batch in nodes, the nodes the loops take out at once: the batch or the site's lower
    ``remediation.nodes_at_once``)."""
    batch = batch_nodes(batch_size, nodes)
    if "nodes_at_once" not in rem:
        return batch, batch
    at_once = check_range(
        rem["nodes_at_once"],
        f"{FIELD}.remediation.nodes_at_once",
        1,
        batch,
        integer=True,
        unit=f" (the rollout's batch: {batch_size} of {nodes} compute nodes)",
    )
    return batch, int(at_once)


def healing_plan(plan: Mapping[str, Any], raw_section: object) -> HealingSection:
    """plan["healing"] from the plan's cluster, validation, health, fabric and rollout sections and the
    inventory's ``gpucluster_healing`` (None: every default)."""
    raw = check_mapping(raw_section, FIELD, ("enabled", "dry_run", "active", "remediation"))
    enabled = check_bool(raw.get("enabled", True), f"{FIELD}.enabled")
    dry_run = check_bool(raw.get("dry_run", False), f"{FIELD}.dry_run")
    act = check_mapping(raw.get("active"), f"{FIELD}.active", ("enabled", "interval_s", "checks"))
    rem = check_mapping(
        raw.get("remediation"),
        f"{FIELD}.remediation",
        ("enabled", "retries", "window_s", "reboot_timeout_s", "nodes_at_once", "actions"),
    )
    batch, at_once = _nodes_at_once(rem, plan["rollout"]["batch_size"], int(plan["cluster"]["compute_nodes"]))
    checks = _checks(plan, act)
    active_enabled = check_bool(act.get("enabled", True), f"{FIELD}.active.enabled")
    why = None
    if plan["cluster"]["scheduler"] == "kubernetes":
        enabled = False
        why = (
            "the Kubernetes path has no self-healing in this release (Slurm only): the health check cordons "
            "and taints a bad node, an operator repairs it"
        )
    elif not enabled:
        why = f"{FIELD}.enabled is false"
    interval = _interval(plan["cluster"]["tier"], act.get("interval_s"))
    enabled_budgets = sum(c["budget_s"] for c in checks.values() if c["enabled"])
    remediation = _remediation(rem, batch, at_once, enabled_budgets, enabled)
    return {
        "schema": SCHEMA_VERSION,
        "enabled": enabled,
        "why": why,
        "dry_run": dry_run,
        "reason_prefix": REASON_PREFIX,
        "program": PROGRAM,
        "unit": UNIT,
        "state_dir": STATE_DIR,
        "history": HISTORY,
        "metrics": METRICS_FILE,
        "metric_names": sorted(METRICS),
        "active": {
            "enabled": enabled and active_enabled,
            "interval_s": interval,
            "qos": QOS,
            "user": CHECK_USER,
            "program": HEALTH_PROGRAM,
            "nodes_at_once": at_once,
            # ActiveCheckOverdue: no result from a node within two intervals
            "overdue_after_s": 2 * interval,
            "checks": checks,
        },
        "remediation": remediation,
        "bisect": {
            "floor": plan["validation"].get("allreduce_inter_node_busbw_gbs"),
            "unit": "GB/s",
            "max_rounds": None,
        },
    }


HEALING_INTRO = (
    "The first head checks idle compute nodes on a schedule through Slurm (a maintenance QOS that never "
    "preempts work) and remediates the drains of the health check under the drain: the action of the drain's "
    "class, a re-validation in the node's own reservation, then resume. An operator's drain (any reason "
    "without the prefix) is never touched; gpucluster_healing turns each part off (docs/runbook.md)."
)


def _span(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def healing_rows(heal: HealingSection) -> list[list[str]]:
    """[setting, value, why] rows of the report's "Self-healing" section."""
    if not heal["enabled"]:
        return [["self-healing", "off", str(heal["why"])]]
    act, rem = heal["active"], heal["remediation"]
    mode = " (dry run: actions are printed, none runs)" if heal["dry_run"] else ""
    rows = [
        [
            "active checks",
            f"every {_span(act['interval_s'])} per idle node, at most {act['nodes_at_once']} at once"
            if act["enabled"]
            else "off",
            f"QOS {act['qos']}, jobs of {act['user']}; gpucluster_healing.active",
        ]
    ]
    for name, check in act["checks"].items():
        if not check["enabled"]:
            rows.append([f"check {name}", "off", str(check["why"])])
            continue
        floor = f">= {check['floor']:g} {check['unit']}, " if check.get("floor") is not None else ""
        level = f"dcgmi diag -r {check['level']}, " if name == "dcgm" else ""
        why = check.get("floor_basis") or ("the plan's validation floor" if floor else "the health check's level")
        rows.append([f"check {name}", f"{floor}{level}budget {check['budget_s']} s", why])
    rows.append(
        [
            "remediation",
            f"every {rem['interval_s']} s{mode}" if rem["enabled"] else "off",
            f"at most {rem['nodes_at_once']} node(s) at once (rollout batch {rem['rollout_batch_nodes']})",
        ]
    )
    for cls in rem["classes"]:
        if cls["class"] == "xid":
            by = ", ".join(f"{x}: {a}" for x, a in cls["by_xid"].items())
            rows.append(["class xid", f"{by}; other XIDs: {cls['default']}", cls["why"]])
        else:
            rows.append([f"class {cls['class']}", cls["action"], cls["why"]])
    rows.append(
        [
            "limits",
            f"{rem['retries']} remediation(s) per node and class in {_span(rem['window_s'])}, then replace",
            f"reboot back within {rem['reboot_timeout_s']} s, re-validation within {rem['validate_timeout_s']} s",
        ]
    )
    return rows


__all__ = ["ACTIONS", "CLASSES", "FIELD", "HEALING_INTRO", "METRICS", "batch_nodes", "healing_plan", "healing_rows"]
