"""Each host's services: the systemd units the roles enable and start on it (the plan's ``services``).

One table (:data:`SERVICES`), one row per unit: the role whose tasks start it, the hosts (by role)
it runs on, the plan condition under which the role starts it, and the role switch that turns it off.
A role switch is a role variable (group_vars, host_vars; e.g. ``common_firewall_enabled``), not site
data: the engine cannot see its value, so a row names it, with the role's default
(roles/<role>/defaults/main.yml), and whoever reads the plan decides with the value it sees
(playbooks/audit.yml hands the audit each host's switches, docs/audit.md).

A new unit is one row here: the audit reads it on every host the row selects (``gpucluster.tiers.audit_facts``)
and reports it stopped or disabled. Pure (no I/O); O(hosts x rows), and hosts with the same roles share
one list object (the plan's JSON is the same; its memory does not grow with a copy per node).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import choices as groups
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import PlanView
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import PlannedUnit, ServicesSection

#: A plan condition: the plan (the sections it reads are assembled before ``services``) -> bool.
Condition = Callable[[PlanView], bool]

#: The unit that loads the firewall policy (common role): the audit's firewall check follows it.
FIREWALL_UNIT = "gpucluster-nftables"


def _always(_plan: PlanView) -> bool:
    return True


def _slurm(plan: PlanView) -> bool:
    return plan["cluster"]["scheduler"] == "slurm"


def _accounting(plan: PlanView) -> bool:
    slurm = plan.get("slurm")
    return _slurm(plan) and bool(slurm and slurm["accounting"])


def _slurm_queue(plan: PlanView) -> bool:
    """The Slurm queue exporter's timer (head role): where the plan has the exporter (Slurm path)."""
    return _slurm(plan) and plan["monitoring"].get("slurm_queue") is not None


def _fabric_manager(plan: PlanView) -> dict[str, object]:
    return dict((plan["gpu"].get("bringup") or {}).get("fabric_manager") or {})


def _fabric_manager_started(plan: PlanView) -> bool:
    """NVSwitch boards need Fabric Manager (compute role, tasks/gpu_software.yml); the lab has no GPU."""
    return bool(_fabric_manager(plan).get("required")) and not plan["cluster"]["lab"]


def _fabric_manager_unit(plan: PlanView) -> str:
    return str(_fabric_manager(plan).get("service") or "nvidia-fabricmanager.service").removesuffix(".service")


def _primary_controller(plan: PlanView) -> str | None:
    """The primary Slurm controller (plan slurm.controller, the head), None without Slurm."""
    return str(plan["slurm"]["controller"]) if _slurm(plan) and plan.get("slurm") else None


@dataclass(frozen=True)
class Service:
    """One row of :data:`SERVICES`: ``unit`` is the unit's name, or a function of the plan that names it."""

    unit: str | Callable[[PlanView], str]
    role: str  # the role whose tasks enable and start it
    hosts: frozenset[str] | None  # the host roles it runs on; None: every host
    when: Condition = _always  # the plan condition under which the role starts it
    switch: str | None = None  # a role variable that turns it off (the role's default: SWITCHES)
    primary: bool = False  # on the primary Slurm controller only (plan slurm.controller), not on a backup

    def name(self, plan: PlanView) -> str:
        return self.unit if isinstance(self.unit, str) else self.unit(plan)


_CONTROLLERS = groups.SLURM_CONTROLLERS

#: The units the roles enable and start, in the order the audit reads them. A new unit: one row (its
#: role, hosts, plan condition and role switch); a new role switch also goes into SWITCHES.
SERVICES: tuple[Service, ...] = (
    Service("chrony", "common", None),  # common/tasks/main.yml
    Service("prometheus-node-exporter", "common", None),
    Service(FIREWALL_UNIT, "common", None, switch="common_firewall_enabled"),
    Service("prometheus", "head", frozenset({groups.HEAD})),  # head/tasks/main.yml
    Service("prometheus-alertmanager", "head", frozenset({groups.HEAD})),
    # head/tasks/main.yml: the Slurm queue exporter's and the self-healing loop's timers, on the primary
    # controller only (scontrol, sbatch and the healing history live there)
    Service("gpucluster-slurm-metrics.timer", "head", frozenset({groups.HEAD}), _slurm_queue, primary=True),
    Service("gpucluster-heal.timer", "head", frozenset({groups.HEAD}), _slurm, primary=True),
    Service("munge", "common", None, _slurm),  # common/tasks/munge.yml: Slurm's authentication
    Service("slurmctld", "slurm", _CONTROLLERS, _slurm),  # slurm/tasks/main.yml
    Service("slurmdbd", "slurm", frozenset({groups.HEAD}), _accounting),  # slurm/tasks/accounting.yml
    Service("slurmd", "slurm", frozenset({groups.COMPUTE}), _slurm),
    Service(_fabric_manager_unit, "compute", frozenset({groups.COMPUTE}), _fabric_manager_started),
)

#: The role switches the rows name, each with its role's default (a unit test compares them with
#: roles/<role>/defaults/main.yml).
SWITCHES: dict[str, bool] = {"common_firewall_enabled": True}


def services_plan(plan: PlanView) -> ServicesSection:
    """{host: [{unit, role, switch}, ...]}: the units the roles start on each host of the plan.

    Reads ``cluster``, ``hosts``, ``gpu``, ``monitoring`` and ``slurm`` (when planned)."""
    rows = [row for row in SERVICES if row.when(plan)]
    primary = _primary_controller(plan)
    by_roles: dict[tuple[frozenset[str], bool], list[PlannedUnit]] = {}
    out: ServicesSection = {}
    for host, entry in plan["hosts"].items():
        key = (frozenset(entry["roles"]), host == primary)
        if key not in by_roles:
            roles, is_primary = key
            by_roles[key] = [
                {"unit": row.name(plan), "role": row.role, "switch": row.switch}
                for row in rows
                if (row.hosts is None or roles & row.hosts) and (is_primary or not row.primary)
            ]
        out[host] = by_roles[key]
    return out


__all__ = ["FIREWALL_UNIT", "SERVICES", "SWITCHES", "PlannedUnit", "Service", "services_plan"]
