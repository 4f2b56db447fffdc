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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import choices as groups

#: A plan condition: the plan (the sections it reads are assembled before ``services``) -> bool.
Condition = Callable[[Mapping[str, Any]], bool]
#: One planned unit as the plan carries it: ``unit``, ``role``, ``switch`` (a role variable or None).
PlannedUnit = dict[str, str | None]

#: The unit that loads the firewall policy (common role): the audit's firewall check follows it.
FIREWALL_UNIT = "gpucluster-nftables"


def _always(_plan: Mapping[str, Any]) -> bool:
    return True


def _slurm(plan: Mapping[str, Any]) -> bool:
    return bool(plan["cluster"]["scheduler"] == "slurm")


def _accounting(plan: Mapping[str, Any]) -> bool:
    return _slurm(plan) and bool((plan.get("slurm") or {}).get("accounting"))


def _fabric_manager(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    return dict((plan["gpu"].get("bringup") or {}).get("fabric_manager") or {})


def _fabric_manager_started(plan: Mapping[str, Any]) -> bool:
    """NVSwitch boards need Fabric Manager (compute role, tasks/gpu_software.yml); the lab has no GPU."""
    return bool(_fabric_manager(plan).get("required")) and not plan["cluster"]["lab"]


def _fabric_manager_unit(plan: Mapping[str, Any]) -> str:
    return str(_fabric_manager(plan).get("service") or "nvidia-fabricmanager.service").removesuffix(".service")


@dataclass(frozen=True)
class Service:
    """One row of :data:`SERVICES`: ``unit`` is the unit's name, or a function of the plan that names it."""

    unit: str | Callable[[Mapping[str, Any]], str]
    role: str  # the role whose tasks enable and start it
    hosts: frozenset[str] | None  # the host roles it runs on; None: every host
    when: Condition = _always  # the plan condition under which the role starts it
    switch: str | None = None  # a role variable that turns it off (the role's default: SWITCHES)

    def name(self, plan: Mapping[str, Any]) -> str:
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
    Service("munge", "common", None, _slurm),  # common/tasks/munge.yml: Slurm's authentication
    Service("slurmctld", "slurm", _CONTROLLERS, _slurm),  # slurm/tasks/main.yml
    Service("slurmdbd", "slurm", frozenset({groups.HEAD}), _accounting),  # slurm/tasks/accounting.yml
    Service("slurmd", "slurm", frozenset({groups.COMPUTE}), _slurm),
    Service(_fabric_manager_unit, "compute", frozenset({groups.COMPUTE}), _fabric_manager_started),
)

#: The role switches the rows name, each with its role's default (a unit test compares them with
#: roles/<role>/defaults/main.yml).
SWITCHES: dict[str, bool] = {"common_firewall_enabled": True}


def services_plan(plan: Mapping[str, Any]) -> dict[str, list[PlannedUnit]]:
    """{host: [{unit, role, switch}, ...]}: the units the roles start on each host of the plan.

    Reads ``cluster``, ``hosts``, ``gpu`` and ``slurm`` (when planned)."""
    rows = [row for row in SERVICES if row.when(plan)]
    by_roles: dict[frozenset[str], list[PlannedUnit]] = {}
    out: dict[str, list[PlannedUnit]] = {}
    for host, entry in plan["hosts"].items():
        roles = frozenset(entry.get("roles") or [])
        if roles not in by_roles:
            by_roles[roles] = [
                {"unit": row.name(plan), "role": row.role, "switch": row.switch}
                for row in rows
                if row.hosts is None or roles & row.hosts
            ]
        out[host] = by_roles[roles]
    return out


__all__ = ["FIREWALL_UNIT", "SERVICES", "SWITCHES", "PlannedUnit", "Service", "services_plan"]
