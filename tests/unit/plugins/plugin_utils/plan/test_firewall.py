"""Every node's firewall policy (plugin_utils/plan/firewall.py) and the nftables file the common role
renders from it."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.firewall import (
    POLICY_FILE,
    UNIT,
    firewall_plan,
    host_policy,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import host_view

HEAD = {
    3000: "grafana",
    6817: "slurmctld",
    6819: "slurmdbd",
    9090: "prometheus",
    9093: "alertmanager",
    9100: "node-exporter",
}
COMPUTE = {6818: "slurmd", 9100: "node-exporter", 9400: "dcgm-exporter"}
STORAGE = {9100: "node-exporter"}


def _services(policy: dict[str, Any]) -> dict[int, str]:
    assert policy["tcp_ports"] == sorted(policy["tcp_ports"])
    assert policy["tcp_ports"] == [s["port"] for s in policy["services"]]
    return {s["port"]: s["name"] for s in policy["services"]}


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        (["head"], HEAD),
        (["compute"], COMPUTE),
        (["storage", "nfs_server"], STORAGE),
        (["storage", "lustre_oss"], STORAGE),
        (["compute", "head", "storage"], HEAD | COMPUTE),  # tier1's one host: the union
    ],
)
def test_ports_per_role_and_their_union(roles: list[str], expected: dict[int, str]) -> None:
    assert _services(host_policy(roles)) == expected


def test_a_host_without_a_service_role_still_limits_node_exporter() -> None:
    # the common role runs node-exporter on every host
    assert _services(host_policy([])) == STORAGE


def test_the_shared_part_names_the_management_cidr() -> None:
    shared = firewall_plan({"pools": {"management": {"cidr": "10.20.0.0/24"}, "storage": {"cidr": "10.20.2.0/24"}}})
    assert shared["management_cidr"] == "10.20.0.0/24"
    assert shared["policy_file"] == POLICY_FILE and shared["unit"] == UNIT


@pytest.mark.parametrize("tier", ["tier1", "tier2", "tier3", "tier4"])
def test_every_host_of_a_tier_gets_its_roles_policy(tier: str) -> None:
    plan = cluster_plan(*load_inventory(tier))
    assert plan["firewall"]["management_cidr"] == plan["network"]["pools"]["management"]["cidr"]
    for name, host in plan["hosts"].items():
        services = _services(host["firewall"])
        assert (6818 in services) == ("compute" in host["roles"]), name
        # slurmctld: the head and the backup controllers (group slurm_backup: tier4's head02)
        assert (6817 in services) == bool({"head", "slurm_backup"} & set(host["roles"])), name
        assert 9100 in services, name
        # the host's slice carries its own policy and the shared CIDR: constant, whatever the node count
        view = host_view(plan, name)
        assert view["hosts"][name]["firewall"] == host["firewall"]
        assert view["firewall"] == plan["firewall"]


def test_role_files_and_unit_use_the_plans_names() -> None:
    entries = {e["src"]: e for e in yaml.safe_load((ROOT / "roles/common/vars/files.yml").read_text())["common_files"]}
    policy = entries["nftables-gpucluster.nft.j2"]
    unit = entries["gpucluster-nftables.service.j2"]
    assert policy["dest"] == POLICY_FILE and policy["hosts"] == "all"
    assert unit["dest"] == f"/etc/systemd/system/{UNIT}" and unit["hosts"] == "all"
    assert "nft --check" in policy["validate"]
    # rendered by make plan (molecule compares them byte for byte)
    assert "plan" not in policy and "plan" not in unit and "task" not in policy and "task" not in unit


def _rules(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_rendered_policy_limits_exactly_the_hosts_ports_to_the_management_network() -> None:
    plan = cluster_plan(*load_inventory("tier2"))
    cidr = plan["network"]["pools"]["management"]["cidr"]
    for name, host in plan["hosts"].items():
        text = render_role_template("common", "nftables-gpucluster.nft.j2", plan, name)
        rules = _rules(text)
        # atomic replace: create (so that the delete never fails), delete, define, in one file
        assert rules[:3] == ["table inet gpucluster", "delete table inet gpucluster", "table inet gpucluster {"]
        elements = re.search(r"elements = \{ ([0-9, ]+) \}", text)
        assert elements and [int(p) for p in elements.group(1).split(", ")] == host["firewall"]["tcp_ports"], name
        assert "policy accept;" in text  # every other port stays open
        assert 'iif "lo" accept' in rules
        assert f"tcp dport @management_tcp ip saddr != {cidr} drop" in rules
        assert "tcp dport @management_tcp meta nfproto ipv6 drop" in rules
        assert rules.index('iif "lo" accept') < rules.index(f"tcp dport @management_tcp ip saddr != {cidr} drop")
        # the comment names every limited service of the host
        for service in host["firewall"]["services"]:
            assert f"#   {service['name']} tcp/{service['port']}" in text, (name, service)


def test_unit_loads_and_reloads_the_policy_file() -> None:
    plan = cluster_plan(*load_inventory("tier1"))
    text = render_role_template("common", "gpucluster-nftables.service.j2", plan, "dgx01")
    assert f"ExecStart=/usr/sbin/nft -f {POLICY_FILE}" in text
    assert f"ExecReload=/usr/sbin/nft -f {POLICY_FILE}" in text
    assert "ExecStop=/usr/sbin/nft delete table inet gpucluster" in text
    assert "WantedBy=multi-user.target" in text


def test_monitoring_no_longer_carries_a_head_only_firewall() -> None:
    plan = cluster_plan(*load_inventory("tier1"))
    assert "firewall" not in plan["monitoring"]
