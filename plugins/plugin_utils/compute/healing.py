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
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import xid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import PROGRAM as HEALTH_PROGRAM
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import REASON_PREFIX
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range, require

FIELD = "gpucluster_healing"
SCHEMA_VERSION = 1
PROGRAM = "/usr/local/sbin/gpucluster-heal"
UNIT = "gpucluster-heal"
STATE_DIR = "/var/lib/gpucluster/heal"
HISTORY = "/var/log/gpucluster/node-history.jsonl"
METRICS_FILE = "/var/lib/prometheus/node-exporter/gpucluster_heal.prom"
QOS = "gpucluster-check"
CHECK_USER = "root"
ACTIONS = xid.ACTIONS
#: the states gpucluster_heal_node_state carries
NODE_STATES = ("remediating", "validating", "replace")
CHECK_RESULTS = ("pass", "fail")

#: The loop's metrics (node-exporter textfile on the head): name -> (type, labels, help). The head
#: program's ``METRICS`` must be equal (a unit test compares them).
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "gpucluster_heal_events_total": ("counter", ("node", "class", "action"), "healing events from the history"),
    "gpucluster_heal_node_state": ("gauge", ("node", "state"), "1 while a node is remediating, validating or replace"),
    "gpucluster_heal_last_run_timestamp_seconds": ("gauge", (), "when the healing loop last ran"),
    "gpucluster_active_check_last_timestamp_seconds": (
        "gauge",
        ("node", "check", "result"),
        "when a node last finished an active check, by result",
    ),
    "gpucluster_active_check_value": ("gauge", ("node", "check", "unit"), "the last figure of an active check"),
}

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

#: The remediation classes, in order: the first whose ``match`` finds the drain reason (the text after
#: ``reason_prefix``) wins. Each regex is written against the problems gpucluster-healthcheck writes
#: (roles/compute/files/gpucluster-healthcheck, its ``problems`` lines) and the active check's reasons.
#: ``written``: a literal reason of each format (the unit tests match every class against them).
CLASSES: tuple[dict[str, Any], ...] = (
    {
        "class": "check",
        "match": r"\bcheck (?P<check>[a-z_]+) ",
        "action": "reboot",
        "why": "an active check below its floor or unable to run: a reboot clears a stuck driver or link state",
        "written": ["check allreduce 312.4 GB/s < floor 460 GB/s", "check dcgm failed: dcgmi missing"],
    },
    {
        "class": "xid",
        "match": r"\bxid (?P<xid>\d+)\b",
        "action": None,  # by_xid, else default
        "why": "NVIDIA's Xid catalog, Resolution Bucket (Immediate Action) (compute/xid.py)",
        "written": ["gpu3 xid 79", "0000:3b:00.0 xid 48"],
    },
    {
        "class": "ecc",
        "match": r"\bgpu\d+ dbe ecc \d+",
        "action": "gpu_reset",
        "why": "uncorrectable ECC: a GPU reset activates the pending row remap (docs/sources.md [XID3])",
        "written": ["gpu0 dbe ecc 2"],
    },
    {
        "class": "gpu_count",
        "match": r"(?:^|, )\d+/\d+ gpus\b(?! listed)",
        "action": "reboot",
        "why": "a GPU missing from nvidia-smi (fallen off the bus, like XID 79): only a reboot brings it back",
        "written": ["7/8 gpus"],
    },
    {
        "class": "thermal",
        "match": r"\bgpu\d+ -?\d+(?:\.\d+)?C >= -?\d+(?:\.\d+)?C",
        "action": "none",
        "why": "a hot GPU: idle under the drain it cools down; the re-validation shows whether it holds",
        "written": ["gpu2 91C >= 87C"],
    },
    {
        "class": "coolant",
        "match": r"\bcoolant (?:supply|return|flow) ",
        "action": "none",
        "why": "the facility's loop, not the node: re-validate once the loop is back",
        "written": ["coolant supply 46C > 45C", "coolant return 61.5C > 60C", "coolant flow 8 < 10lpm"],
    },
    {
        "class": "fabric_port",
        "match": r"\b[\w.-]+/\d+ (?:missing|[A-Z][A-Z_]*|\d+(?:\.\d+)?<\d+(?:\.\d+)?Gb)(?=,|\s|$)",
        "action": "reboot",
        "why": "an HCA port down, missing or below its rate: a reboot re-trains the link (a cable stays a ticket)",
        "written": ["mlx5_0/1 DOWN", "mlx5_3/1 missing", "mlx5_1/1 200<400Gb", "mlx5_2/1 POLLING"],
    },
    {
        "class": "bringup",
        "match": (
            r"\bgpu\d+ fabric |\bgpu\d+ nvlink \d+/\d+|\bnvlink \d+/\d+ gpus listed|\bnot loaded\b"
            r"|\bnot running\b|\bGPUDirect RDMA\b|\bnvidia-smi (?:missing|rc )"
        ),
        "action": "reboot",
        "why": "Fabric Manager, NVLink, the GPUDirect module or the driver did not come up: a reboot brings it up",
        "written": [
            "gpu0 fabric In Progress",
            "gpu1 fabric status Failure (nvlsm)",
            "gpu0 nvlink 16/18",
            "nvlink 7/8 gpus listed",
            "nvidia_peermem not loaded",
            "ib_umad not loaded (nvlsm)",
            "nvlsm not running",
            "GPUDirect RDMA by DMA-BUF: no NVIDIA driver loaded (/proc/driver/nvidia/version)",
            "nvidia-smi missing",
            "nvidia-smi rc 9",
        ],
    },
    {
        "class": "dcgm",
        "match": r"\bdcgm (?:diag r\d+ no answer|\S.* fail\b)",
        "action": "gpu_reset",
        "why": "dcgmi diag failed after a job: reset the GPUs, then the re-validation runs the diag again",
        "written": ["dcgm Memory fail gpu0", "dcgm diag r1 no answer in 120s"],
    },
)


def _bool(value: Any, field: str) -> bool:
    require(isinstance(value, bool), field, value, "true or false")
    return bool(value)


def _mapping(raw: Any, field: str, keys: tuple[str, ...]) -> dict[str, Any]:
    raw = {} if raw is None else raw
    require(isinstance(raw, dict), field, raw, f"a mapping with keys {', '.join(keys)}")
    unknown = sorted(set(raw) - set(keys), key=str)
    require(not unknown, f"{field}.{unknown[0] if unknown else ''}", unknown, f"only the keys {', '.join(keys)}")
    return dict(raw)


def batch_nodes(batch_size: int | str, nodes: int) -> int:
    """The rollout's batch as a node count over ``nodes`` compute nodes: a count (at most the nodes) or
    a percentage rounded down, at least 1 (Ansible's ``serial``; plan/rollout.py)."""
    count = nodes * int(batch_size.rstrip("%")) // 100 if isinstance(batch_size, str) else int(batch_size)
    return max(1, min(count, max(nodes, 1)))


def _interval(tier: str, raw: Any) -> int:
    default = TIER_INTERVAL_S.get(tier, DEFAULT_INTERVAL_S)
    if raw is None:
        return default
    low, high = INTERVAL_RANGE_S
    return int(check_range(raw, f"{FIELD}.active.interval_s", low, high, integer=True, unit=" s (an hour to a week)"))


def _check_settings(raw: Any, name: str) -> tuple[bool | None, int | None]:
    field = f"{FIELD}.active.checks.{name}"
    got = _mapping(raw, field, ("enabled", "budget_s"))
    enabled = _bool(got["enabled"], f"{field}.enabled") if "enabled" in got else None
    budget = None
    if "budget_s" in got:
        low, high = BUDGET_RANGE_S
        budget = int(
            check_range(
                got["budget_s"], f"{field}.budget_s", low, high, integer=True, unit=" s (a job's start to an hour)"
            )
        )
    return enabled, budget


def _shared_read_path(validation: Mapping[str, Any]) -> str | None:
    """The shared file system's validation directory (validation.tests.fio: the gated shared entry)."""
    for entry in (validation.get("tests") or {}).get("fio") or []:
        if entry.get("scope") == "shared":
            return str(entry["dir"])
    return None


def _checks(plan: Mapping[str, Any], raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    floors = plan["validation"]
    dcgm = plan["health"]["dcgm"]
    gpus = plan["cluster"]["gpus_per_node"]
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
    planned: dict[str, dict[str, Any]] = {
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
    raw_checks = _mapping(raw.get("checks"), f"{FIELD}.active.checks", CHECKS)
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


def _override(value: Any, field: str) -> str:
    require(value in ACTIONS, field, value, "one of " + ", ".join(ACTIONS))
    return str(value)


def _classes(raw_actions: Any) -> list[dict[str, Any]]:
    names = (*(c["class"] for c in CLASSES), "xid_default")
    field = f"{FIELD}.remediation.actions"
    got = _mapping(raw_actions, field, names)
    by_xid = dict(xid.XID_ACTIONS)
    default = xid.UNKNOWN_XID_ACTION
    xid_raw = got.get("xid")
    if xid_raw is not None:
        require(isinstance(xid_raw, list), f"{field}.xid", xid_raw, "a list of {xid, action} (xid: 1 to 999)")
        for i, item in enumerate(xid_raw):
            where = f"{field}.xid[{i}]"
            require(isinstance(item, dict) and set(item) == {"xid", "action"}, where, item, "a mapping {xid, action}")
            code = int(check_range(item["xid"], f"{where}.xid", 1, 999, integer=True))
            by_xid[str(code)] = _override(item["action"], f"{where}.action")
    if "xid_default" in got:
        default = _override(got["xid_default"], f"{field}.xid_default")
    out = []
    for cls in CLASSES:
        name = cls["class"]
        entry: dict[str, Any] = {"class": name, "match": cls["match"]}
        if name == "xid":
            entry["by_xid"] = dict(sorted(by_xid.items(), key=lambda kv: int(kv[0])))
            entry["default"] = default
            # several XIDs in one reason: the most severe action of them (the order of "actions")
            entry["combine"] = "most_severe"
            entry["source"] = "docs/sources.md [XID1] [XID2] (compute/xid.py)"
        else:
            entry["action"] = _override(got[name], f"{field}.{name}") if name in got else cls["action"]
        entry["why"] = cls["why"]
        out.append(entry)
    return out


def healing_plan(plan: Mapping[str, Any], raw_section: Any) -> dict[str, Any]:
    """plan["healing"] from the plan's cluster, validation, health, fabric and rollout sections and the
    inventory's ``gpucluster_healing`` (None: every default)."""
    raw = _mapping(raw_section, FIELD, ("enabled", "dry_run", "active", "remediation"))
    enabled = _bool(raw.get("enabled", True), f"{FIELD}.enabled")
    dry_run = _bool(raw.get("dry_run", False), f"{FIELD}.dry_run")
    act = _mapping(raw.get("active"), f"{FIELD}.active", ("enabled", "interval_s", "checks"))
    rem = _mapping(
        raw.get("remediation"),
        f"{FIELD}.remediation",
        ("enabled", "retries", "window_s", "reboot_timeout_s", "nodes_at_once", "actions"),
    )
    nodes = int(plan["cluster"]["compute_nodes"])
    batch = batch_nodes(plan["rollout"]["batch_size"], nodes)
    at_once = batch
    if "nodes_at_once" in rem:
        at_once = int(
            check_range(
                rem["nodes_at_once"],
                f"{FIELD}.remediation.nodes_at_once",
                1,
                batch,
                integer=True,
                unit=f" (the rollout's batch: {plan['rollout']['batch_size']} of {nodes} compute nodes)",
            )
        )
    checks = _checks(plan, act)
    active_enabled = _bool(act.get("enabled", True), f"{FIELD}.active.enabled")
    rem_enabled = _bool(rem.get("enabled", True), f"{FIELD}.remediation.enabled")
    retries = int(
        check_range(rem.get("retries", RETRIES_DEFAULT), f"{FIELD}.remediation.retries", *RETRIES_RANGE, integer=True)
    )
    window = int(
        check_range(
            rem.get("window_s", WINDOW_DEFAULT_S),
            f"{FIELD}.remediation.window_s",
            *WINDOW_RANGE_S,
            integer=True,
            unit=" s (an hour to 30 days)",
        )
    )
    reboot_timeout = int(
        check_range(
            rem.get("reboot_timeout_s", REBOOT_TIMEOUT_DEFAULT_S),
            f"{FIELD}.remediation.reboot_timeout_s",
            *REBOOT_TIMEOUT_RANGE_S,
            integer=True,
            unit=" s (5 minutes to 2 hours)",
        )
    )
    classes = _classes(rem.get("actions"))
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
        "remediation": {
            "enabled": enabled and rem_enabled,
            "interval_s": REMEDIATION_INTERVAL_S,
            "nodes_at_once": at_once,
            "rollout_batch_nodes": batch,
            "retries": retries,
            "window_s": window,
            "reboot_timeout_s": reboot_timeout,
            "validate_timeout_s": enabled_budgets + VALIDATE_SLACK_S,
            # the alerts' limits (monitoring/alerts.py): a node under remediation longer than a reboot and a
            # re-validation take; the loop silent for three of its intervals
            "stuck_after_s": reboot_timeout + enabled_budgets + VALIDATE_SLACK_S,
            "stale_after_s": 3 * REMEDIATION_INTERVAL_S,
            "classes": classes,
            "actions": list(ACTIONS),
            "ticket": TICKET,
        },
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


def healing_rows(heal: Mapping[str, Any]) -> list[list[str]]:
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
