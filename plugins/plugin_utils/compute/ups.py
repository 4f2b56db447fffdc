"""Power protection: does the UPS carry the cluster long enough for the graceful shutdown?

The reference design asks for a UPS with a 10-minute minimum for a graceful shutdown
(docs/sources.md [U1]). This module answers, from the plan's power load and the site's UPS
(``gpucluster_facility.ups``), how many minutes the UPS holds that load, and whether that covers
the shutdown sequence the head runs on a UPS event (playbooks/shutdown.yml, :func:`shutdown_steps`).

- Rating: a UPS has a kVA (apparent power) and a kW (real power) rating, kW = kVA x output power
  factor ([U2]); the load must fit the kW rating. ``rating_kw`` from the datasheet wins; otherwise
  ``rating_kva`` x ``power_factor`` (default 0.9, **unconfirmed**: a common output power factor of
  current double-conversion UPS; read the datasheet).
- Load: the compute nodes' planned kW (``plan.power``, after any rack cap) of the whole cluster
  (``scope: cluster``) or of the fullest rack (``scope: rack``, one UPS per rack), plus
  ``other_load_kw`` (head, storage, switches, CDU pumps on the same UPS: the plan does not know
  their draw, default 0).
- Runtime at that load: from the datasheet's runtime-at-load points (``runtime_points``, with the
  rated-load ``runtime_minutes`` as the 100 % point), interpolated as a power law between the two
  neighbouring points (straight on log-log axes, the shape of a battery discharge table). Without
  points, or below the lowest point, an **approximation**, labelled as such in the plan: constant
  battery energy, ``minutes = minutes at the nearest known load x known load / load``. It is
  conservative for lead-acid batteries, which deliver more energy at slower discharge (Peukert's
  law, [U3]), and optimistic at very light loads, where the inverter's own losses dominate
  (below :data:`LIGHT_LOAD` the plan says so).
- Battery age: the datasheet's minutes are for new batteries. A lead-acid battery is replaced when
  its capacity falls to 80 % of rated ([U4]); the plan derates the minutes by ``end_of_life_capacity``
  (default 0.8) so the check still holds on the battery's last day.
- Shutdown: ``checkpoint_grace_s`` (default 300: the time running jobs get after the checkpoint
  signal, **unconfirmed**: set it to your job's checkpoint time) plus ``power_off_allowance_s``
  (default 180: slurmd stop and the power-off of compute, storage and head, **unconfirmed**: time
  it on your hosts). Runtime below that sequence is an error; below the 10-minute minimum [U1]
  (with the sequence covered) a warning.

No I/O; pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    PowerSection,
    ShutdownStep,
    UpsCheck,
    UpsRating,
    UpsSection,
    UpsShutdown,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    check_choice,
    check_range,
    require,
)

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import ClusterSection

FIELD = "gpucluster_facility.ups"
#: the reference design's minimum UPS runtime for a graceful shutdown (docs/sources.md [U1])
MINIMUM_MINUTES = 10.0
#: kW = kVA x power factor ([U2]); 0.9 is a common UPS output power factor: unconfirmed, a default only
DEFAULT_POWER_FACTOR = 0.9
#: replace a lead-acid battery at 80 % of its rated capacity (docs/sources.md [U4])
DEFAULT_END_OF_LIFE_CAPACITY = 0.8
#: time jobs get to checkpoint after the signal (unconfirmed default: the site's checkpoint time)
DEFAULT_CHECKPOINT_GRACE_S = 300
#: slurmd stop and power-off of compute, storage and head (unconfirmed default: time it on the hosts)
DEFAULT_POWER_OFF_ALLOWANCE_S = 180
#: below this share of the rating the constant-energy approximation is optimistic (inverter losses)
LIGHT_LOAD = 0.25
SCOPES = ("cluster", "rack")
#: what the running jobs receive (scancel --signal, docs/sources.md [U5]); the job traps it to checkpoint
CHECKPOINT_SIGNAL = "USR1"
DRAIN_REASON = "gpucluster: UPS on battery, shutdown"
#: what powers a host off (shutdown(8) schedules it and returns: the connection ends with the host)
POWER_OFF = "shutdown --poweroff +0"
#: kubectl drain on the Kubernetes path: DaemonSet pods (device plugin, exporters) stay until the power-off
K8S_DRAIN_ARGS = "--ignore-daemonsets --delete-emptydir-data"
KEYS = frozenset(
    {
        "rating_kva",
        "rating_kw",
        "power_factor",
        "runtime_minutes",
        "runtime_points",
        "scope",
        "other_load_kw",
        "end_of_life_capacity",
        "checkpoint_grace_s",
        "power_off_allowance_s",
    }
)


@dataclass(frozen=True)
class Ups:
    """The site's UPS, checked."""

    rating_kva: float
    rating_kw: float
    power_factor: float
    power_factor_source: str
    runtime_minutes: float  # at the rated kW load, new batteries
    points: tuple[tuple[float, float], ...]  # (load fraction, minutes), rising load, incl. (1.0, runtime_minutes)
    scope: str
    other_load_kw: float
    end_of_life_capacity: float


@dataclass(frozen=True)
class Runtime:
    """Minutes at a load fraction and how they were reached."""

    minutes: float
    method: str  # "datasheet points" | "approximation: constant energy ..." | "overloaded"


@dataclass(frozen=True)
class Shutdown:
    grace_s: int
    power_off_s: int

    @property
    def sequence_s(self) -> int:
        return self.grace_s + self.power_off_s


#: How often the shutdown playbook looks whether jobs or drains are done.
POLL_S = 10


def parse_shutdown(raw: Mapping[str, object]) -> Shutdown:
    """The shutdown timing (also without a UPS entry: the playbook needs its grace time)."""
    grace = raw.get("checkpoint_grace_s", DEFAULT_CHECKPOINT_GRACE_S)
    off = raw.get("power_off_allowance_s", DEFAULT_POWER_OFF_ALLOWANCE_S)
    return Shutdown(
        grace_s=int(check_range(grace, f"{FIELD}.checkpoint_grace_s", 0, 3600, integer=True, unit=" s")),
        power_off_s=int(check_range(off, f"{FIELD}.power_off_allowance_s", 10, 3600, integer=True, unit=" s")),
    )


def _points(raw: object, full_minutes: float) -> tuple[tuple[float, float], ...]:
    field = f"{FIELD}.runtime_points"
    require(isinstance(raw, list), field, raw, "a list of {load_percent, minutes}")
    if not isinstance(raw, list):  # narrowed by the require above
        raise AssertionError(raw)
    points = {1.0: full_minutes}
    for i, p in enumerate(raw):
        where = f"{field}[{i}]"
        require(isinstance(p, Mapping) and set(p) == {"load_percent", "minutes"}, where, p, "{load_percent, minutes}")
        load = check_range(p["load_percent"], f"{where}.load_percent", 1, 100, unit=" %") / 100
        minutes = check_range(p["minutes"], f"{where}.minutes", 0.1, 10000, unit=" min")
        require(load not in points or points[load] == minutes, f"{where}.load_percent", p["load_percent"], "unique")
        points[load] = minutes
    ordered = tuple(sorted(points.items()))
    for (l1, m1), (l2, m2) in pairwise(ordered):
        require(
            m2 < m1,
            field,
            raw,
            f"fewer minutes at a higher load (a discharge table): {l2 * 100:g} % has {m2:g} min, "
            f"{l1 * 100:g} % has {m1:g} min (runtime_minutes is the 100 % point)",
        )
    return ordered


def parse_ups(raw: object) -> Ups | None:
    """``gpucluster_facility.ups`` checked, or None when the site gives none."""
    if raw is None:
        return None
    require(isinstance(raw, Mapping), FIELD, raw, "a mapping")
    if not isinstance(raw, Mapping):  # narrowed by the require above
        raise AssertionError(raw)
    unknown = sorted(set(raw) - KEYS)
    require(not unknown, f"{FIELD}.{unknown[0] if unknown else ''}", unknown, "keys " + ", ".join(sorted(KEYS)))
    require("rating_kva" in raw, f"{FIELD}.rating_kva", None, "the UPS's kVA rating (datasheet)")
    require("runtime_minutes" in raw, f"{FIELD}.runtime_minutes", None, "battery minutes at the rated load")
    kva = check_range(raw["rating_kva"], f"{FIELD}.rating_kva", 0.5, 100000, unit=" kVA")
    require(
        not ("rating_kw" in raw and "power_factor" in raw),
        f"{FIELD}.power_factor",
        raw.get("power_factor"),
        "unset when rating_kw is given (the power factor is rating_kw / rating_kva)",
    )
    if "rating_kw" in raw:
        kw = check_range(raw["rating_kw"], f"{FIELD}.rating_kw", 0.1, kva, unit=" kW")
        pf, pf_source = kw / kva, "rating_kw / rating_kva"
    else:
        pf = check_range(raw.get("power_factor", DEFAULT_POWER_FACTOR), f"{FIELD}.power_factor", 0.5, 1.0)
        pf_source = "power_factor" if "power_factor" in raw else "default 0.9 (unconfirmed: read the datasheet's kW)"
        kw = kva * pf
    full = check_range(raw["runtime_minutes"], f"{FIELD}.runtime_minutes", 0.1, 10000, unit=" min")
    eol = check_range(
        raw.get("end_of_life_capacity", DEFAULT_END_OF_LIFE_CAPACITY), f"{FIELD}.end_of_life_capacity", 0.5, 1.0
    )
    return Ups(
        rating_kva=kva,
        rating_kw=round(kw, 3),
        power_factor=round(pf, 4),
        power_factor_source=pf_source,
        runtime_minutes=full,
        points=_points(raw.get("runtime_points", []), full),
        scope=check_choice(raw.get("scope", "cluster"), f"{FIELD}.scope", SCOPES),
        other_load_kw=check_range(raw.get("other_load_kw", 0), f"{FIELD}.other_load_kw", 0, 100000, unit=" kW"),
        end_of_life_capacity=eol,
    )


def runtime_at(load: float, points: tuple[tuple[float, float], ...]) -> Runtime:
    """Minutes (new batteries) at ``load`` (a fraction of the kW rating) from the discharge points."""
    if load > 1.0:
        return Runtime(0.0, "overloaded: the load exceeds the UPS's kW rating")
    if load <= 0:
        return Runtime(math.inf, "no load")
    low_load, low_minutes = points[0]
    if load < low_load:
        approx = "approximation: constant energy from " + (
            "the rated-load runtime" if len(points) == 1 else f"the lowest datasheet point ({low_load * 100:g} %)"
        )
        if load < LIGHT_LOAD:
            approx += f"; optimistic below {LIGHT_LOAD * 100:g} % load (inverter losses): give runtime_points"
        return Runtime(low_minutes * low_load / load, approx)
    for (l1, m1), (l2, m2) in pairwise(points):
        if l1 <= load <= l2:
            # straight line on log-log axes between the two points
            k = math.log(m2 / m1) / math.log(l2 / l1)
            return Runtime(m1 * (load / l1) ** k, "datasheet points (log-log interpolation)")
    return Runtime(points[-1][1], "datasheet points")  # load == 1.0 with a single point


def load_kw(ups: Ups, power: PowerSection) -> float:
    """The kW the UPS carries: the planned compute load (cluster or fullest rack) plus the site's other load."""
    compute = power["total_kw"] if ups.scope == "cluster" else power["rack_kw"]
    return round(float(compute) + ups.other_load_kw, 3)


def shutdown_steps(cluster: ClusterSection, shutdown: Shutdown) -> list[ShutdownStep]:
    """The graceful sequence the head runs on a UPS event, in order (playbooks/shutdown.yml runs these).

    Each step: ``step`` (its name in the playbook), ``on`` (which hosts) and ``does`` (the command).
    On the Kubernetes path (``cluster.scheduler``) the first five steps cordon and drain the nodes
    through the API instead of Slurm: a pod evicted by ``kubectl drain`` gets SIGTERM and its own
    termination grace to checkpoint, the drains run in parallel for at most the grace time, and what is
    left is deleted without eviction; then kubelet stops."""
    hostlist = cluster["compute_hostlist"]
    if cluster.get("scheduler") == "kubernetes":
        return [
            {"step": "drain", "on": "head", "does": f"kubectl cordon {hostlist}"},
            {
                "step": "checkpoint_signal",
                "on": "head",
                "does": f"kubectl drain <node> {K8S_DRAIN_ARGS} --timeout={shutdown.grace_s}s, every node at once"
                " (eviction: SIGTERM to every pod)",
            },
            {"step": "wait_for_jobs", "on": "head", "does": f"wait for the drains, at most {shutdown.grace_s} s"},
            {
                "step": "cancel_remaining",
                "on": "head",
                "does": f"kubectl drain <node> {K8S_DRAIN_ARGS} --disable-eviction --force --grace-period=1",
            },
            {"step": "stop_kubelet", "on": "compute", "does": "systemctl stop kubelet"},
            {"step": "power_off_compute", "on": "compute (not head, not storage)", "does": POWER_OFF},
            {"step": "power_off_storage", "on": "storage (not head)", "does": POWER_OFF},
            {"step": "power_off_head", "on": "head", "does": POWER_OFF},
        ]
    return [
        {
            "step": "drain",
            "on": "head",
            "does": f'scontrol update nodename={hostlist} state=drain reason="{DRAIN_REASON}"',
        },
        {
            "step": "checkpoint_signal",
            "on": "head",
            "does": f"scancel --signal={CHECKPOINT_SIGNAL} --full --state=RUNNING",
        },
        {
            "step": "wait_for_jobs",
            "on": "head",
            "does": f"squeue --states=RUNNING,COMPLETING until empty, at most {shutdown.grace_s} s",
        },
        {"step": "cancel_remaining", "on": "head", "does": "scancel --state=RUNNING"},
        {"step": "stop_slurmd", "on": "compute", "does": "systemctl stop slurmd"},
        {"step": "power_off_compute", "on": "compute (not head, not storage)", "does": POWER_OFF},
        {"step": "power_off_storage", "on": "storage (not head)", "does": POWER_OFF},
        {"step": "power_off_head", "on": "head", "does": POWER_OFF},
    ]


def _check(ups: Ups, load: float, runtime: Runtime, minutes: float, shutdown: Shutdown) -> tuple[str, str]:
    sequence_min = shutdown.sequence_s / 60
    if runtime.method.startswith("overloaded"):
        return (
            "error",
            f"the UPS carries {load:g} kW, above its {ups.rating_kw:g} kW rating: it goes to bypass or trips",
        )
    if minutes < sequence_min:
        return "error", (
            f"{minutes:.1f} min of battery at {load:g} kW (end of battery life) is shorter than the shutdown "
            f"sequence's {sequence_min:g} min (checkpoint grace {shutdown.grace_s} s + power-off "
            f"{shutdown.power_off_s} s)"
        )
    if minutes < MINIMUM_MINUTES:
        return "warning", (
            f"{minutes:.1f} min of battery at {load:g} kW covers the {sequence_min:g} min shutdown but is below "
            f"the reference design's {MINIMUM_MINUTES:g} min minimum"
        )
    return "ok", f"{minutes:.1f} min of battery at {load:g} kW covers the {sequence_min:g} min shutdown"


def ups_plan(raw: object, power: PowerSection, cluster: ClusterSection) -> UpsSection:
    """``plan.ups``: the runtime check (None without ``gpucluster_facility.ups``) and the shutdown sequence."""
    raw_map = raw if isinstance(raw, Mapping) else {}
    ups = parse_ups(raw)
    shutdown = parse_shutdown(raw_map)
    sequence: UpsShutdown = {
        "grace_s": shutdown.grace_s,
        "power_off_s": shutdown.power_off_s,
        "sequence_s": shutdown.sequence_s,
        # the playbook's waits: polled every POLL_S for the grace time, a drain's job a minute longer
        "poll_s": POLL_S,
        "polls": max(shutdown.grace_s // POLL_S, 1),
        "drain_async_s": shutdown.grace_s + 60,
        "signal": CHECKPOINT_SIGNAL,
        "reason": DRAIN_REASON,
        "steps": shutdown_steps(cluster, shutdown),
    }
    if ups is None:
        return {"configured": False, "shutdown": sequence, "check": None}
    load = load_kw(ups, power)
    fraction = load / ups.rating_kw
    runtime = runtime_at(fraction, ups.points)
    minutes = runtime.minutes * ups.end_of_life_capacity
    status, message = _check(ups, load, runtime, minutes, shutdown)
    rating: UpsRating = {
        "rating_kva": ups.rating_kva,
        "rating_kw": ups.rating_kw,
        "power_factor": ups.power_factor,
        "power_factor_source": ups.power_factor_source,
        "runtime_minutes": ups.runtime_minutes,
        "scope": ups.scope,
        "other_load_kw": ups.other_load_kw,
        "end_of_life_capacity": ups.end_of_life_capacity,
        "runtime_points": [{"load_percent": round(lf * 100, 2), "minutes": m} for lf, m in ups.points],
    }
    check: UpsCheck = {
        "ups": rating,
        "load_kw": load,
        "compute_load_kw": round(load - ups.other_load_kw, 3),
        "load_percent": round(fraction * 100, 1),
        "runtime_minutes_new": None if math.isinf(runtime.minutes) else round(runtime.minutes, 1),
        "runtime_minutes": None if math.isinf(minutes) else round(minutes, 1),
        "method": runtime.method,
        "approximation": runtime.method.startswith("approximation"),
        "sequence_minutes": round(shutdown.sequence_s / 60, 2),
        "minimum_minutes": MINIMUM_MINUTES,
        "status": status,
        "message": message,
    }
    return {"configured": True, "shutdown": sequence, "check": check}


def ups_rows(ups: UpsSection) -> list[list[str]]:
    """The report's rows (setting, value, how it was reached)."""
    sd = ups["shutdown"]
    seq = f"checkpoint grace {sd['grace_s']} s + power-off {sd['power_off_s']} s"
    rows = [["shutdown sequence", f"{sd['sequence_s'] / 60:g} min", seq]]
    rows += [[f"shutdown step {i}: {s['step']}", s["on"], s["does"]] for i, s in enumerate(sd["steps"], 1)]
    check = ups["check"]
    if check is None:
        return [["UPS", "not checked", "no gpucluster_facility.ups in the inventory"], *rows]
    u = check["ups"]
    return [
        [
            "UPS rating",
            f"{u['rating_kw']:g} kW",
            f"{u['rating_kva']:g} kVA x power factor {u['power_factor']:g} ({u['power_factor_source']})",
        ],
        [
            "UPS load",
            f"{check['load_kw']:g} kW ({check['load_percent']:g} % of rating)",
            f"compute {check['compute_load_kw']:g} kW ({u['scope']}, plan.power) + other {u['other_load_kw']:g} kW",
        ],
        [
            "battery runtime at that load",
            "n/a" if check["runtime_minutes"] is None else f"{check['runtime_minutes']:g} min",
            f"{check['runtime_minutes_new']} min new x end-of-life capacity {u['end_of_life_capacity']:g}; "
            f"{check['method']}",
        ],
        ["UPS check", check["status"], check["message"]],
        *rows,
    ]


def ups_warnings(ups: UpsSection | None) -> list[str]:
    """The report summary's warnings: a runtime check that is not ok."""
    check = ups["check"] if ups else None
    if not check or check["status"] == "ok":
        return []
    return [f"UPS {check['status']}: {check['message']}."]


__all__ = [
    "MINIMUM_MINUTES",
    "Runtime",
    "Shutdown",
    "Ups",
    "parse_shutdown",
    "parse_ups",
    "runtime_at",
    "shutdown_steps",
    "ups_plan",
    "ups_rows",
    "ups_warnings",
]
