"""gpucluster.tiers.role_services: the units a role starts on a host, taken from the plan's services (the list
the audit reads), as host_state's services; and the roles that start planned units hand it that list."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.filter.gpucluster import FilterModule

role_services = FilterModule().filters()["role_services"]


def _names(entries: list[dict[str, object]]) -> list[object]:
    assert all(e["enabled"] is True and e["state"] == "started" for e in entries)
    return [e["name"] for e in entries]


def test_each_role_gets_its_own_units_in_the_plans_order() -> None:
    plan = cluster_plan(*load_inventory("tier4"))
    head = plan["services"]["head01"]
    assert _names(role_services(head, "head")) == [
        "prometheus",
        "prometheus-alertmanager",
        "gpucluster-slurm-metrics.timer",
        "gpucluster-heal.timer",
    ]
    assert _names(role_services(head, "common")) == [
        "chrony",
        "prometheus-node-exporter",
        "gpucluster-nftables",
        "munge",
    ]
    # the backup controller runs no head timers; a storage server no head unit at all
    assert role_services(plan["services"]["head02"], "head") == []
    assert role_services(plan["services"]["oss01"], "head") == []


def test_a_role_switch_that_is_off_leaves_its_unit_out() -> None:
    units = cluster_plan(*load_inventory("tier2"))["services"]["compute01"]
    off = _names(role_services(units, "common", {"common_firewall_enabled": False}))
    assert "gpucluster-nftables" not in off
    assert _names(role_services(units, "common", {"common_firewall_enabled": "yes"})) == [
        *off[:2],
        "gpucluster-nftables",
        *off[2:],
    ]


def test_input_that_is_no_planned_unit_list_is_an_error() -> None:
    with pytest.raises(AnsibleFilterError, match="services\\[host\\]"):
        role_services({"chrony": {}}, "common")


@pytest.mark.parametrize(("role", "units"), [("head", "role_services('head')"), ("common", "role_services('common'")])
def test_the_roles_start_the_planned_units_from_the_plan(role: str, units: str) -> None:
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    starts = [t for t in tasks if "gpucluster.tiers.host_state" in t and "services" in t["gpucluster.tiers.host_state"]]
    text = " ".join(str(t["gpucluster.tiers.host_state"]["services"]) for t in starts)
    assert "gpucluster_host_plan.services[inventory_hostname]" in text and f"gpucluster.tiers.{units}" in text
