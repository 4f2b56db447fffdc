"""Every node's firewall policy (plugin_utils/plan/firewall.py) and the nftables file the common role
renders from it."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.firewall import (
    ICMPV6_ND_TYPES,
    ICMPV6_TYPES,
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
    assert shared["input_policy"] == "drop" and shared["forward_policy"] == "drop"
    assert shared["open_tcp_ports"] == [22]


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
        assert 'iif "lo" accept' in rules
        assert f"tcp dport @management_tcp ip saddr != {cidr} drop" in rules
        assert "tcp dport @management_tcp meta nfproto ipv6 drop" in rules
        assert rules.index('iif "lo" accept') < rules.index(f"tcp dport @management_tcp ip saddr != {cidr} drop")
        # the comment names every limited service of the host
        for service in host["firewall"]["services"]:
            assert f"#   {service['name']} tcp/{service['port']}" in text, (name, service)


def _chain(text: str, name: str) -> list[str]:
    """The rules of one chain of the rendered table (its lines between ``chain <name> {`` and ``}``)."""
    rules = _rules(text)
    start = rules.index(f"chain {name} {{")
    return rules[start + 1 : rules.index("}", start)]


@pytest.mark.parametrize("tier", ["tier1", "tier2", "tier3", "tier4"])
def test_input_and_forward_drop_what_is_not_accepted(tier: str) -> None:
    plan = cluster_plan(*load_inventory(tier))
    cidr = plan["network"]["pools"]["management"]["cidr"]
    for name in plan["hosts"]:
        text = render_role_template("common", "nftables-gpucluster.nft.j2", plan, name)
        chain = _chain(text, "input")
        assert chain[0] == "type filter hook input priority filter; policy drop;", name
        assert _chain(text, "forward") == ["type filter hook forward priority filter; policy drop;"], name
        # the order: loopback and established first, the limited ports' drops before any accept of a
        # network or a port (a cluster network never reaches the management-only ports)
        order = [
            'iif "lo" accept',
            "ct state established,related accept",
            "ct state invalid drop",
            f"tcp dport @management_tcp ip saddr != {cidr} drop",
            "tcp dport @management_tcp meta nfproto ipv6 drop",
            "tcp dport { 22 } accept",
            "ip saddr @cluster_ipv4 accept",
        ]
        assert [r for r in chain if r in order] == order, (name, chain)
        # nothing else is accepted: no bare "accept", no accept of another port or address
        accepts = [r for r in chain if r.endswith("accept")]
        assert all(r in order or r.startswith(("icmp type", "icmpv6 type")) for r in accepts), (name, accepts)


def test_icmpv6_keeps_neighbour_discovery_and_path_mtu() -> None:
    """RFC 4890 4.4.1: packet too big (PMTU) and the errors; neighbour discovery on the link only."""
    plan = cluster_plan(*load_inventory("tier3"))
    text = render_role_template("common", "nftables-gpucluster.nft.j2", plan, "compute01")
    chain = _chain(text, "input")
    assert f"icmpv6 type {{ {', '.join(ICMPV6_TYPES)} }} accept" in chain
    assert f"icmpv6 type {{ {', '.join(ICMPV6_ND_TYPES)} }} ip6 hoplimit 255 accept" in chain
    assert {"packet-too-big", "destination-unreachable"} <= set(ICMPV6_TYPES)
    assert {"nd-neighbor-solicit", "nd-neighbor-advert"} <= set(ICMPV6_ND_TYPES)
    assert any(r.startswith("icmp type {") and "destination-unreachable" in r for r in chain)


def test_each_host_accepts_the_cluster_networks_it_is_on() -> None:
    plan = cluster_plan(*load_inventory("tier3"))
    pools = plan["network"]["pools"]
    mgmt, storage = pools["management"]["cidr"], pools["storage"]["cidr"]
    # the eight rails of /24 (10.31.0.0/24 .. 10.31.7.0/24) merged into one /21
    rails = "10.31.0.0/21"
    assert [r["cidr"] for r in plan["network"]["rails"]] == [f"10.31.{i}.0/24" for i in range(8)]
    expected = {"compute": [mgmt, storage, rails], "head": [mgmt], "storage": [mgmt, storage]}
    for name, host in plan["hosts"].items():
        kind = "compute" if "compute" in host["roles"] else "storage" if "storage" in host["roles"] else "head"
        assert host["firewall"]["accept_ipv4"] == expected[kind], name
        text = render_role_template("common", "nftables-gpucluster.nft.j2", plan, name)
        assert f"elements = {{ {', '.join(expected[kind])} }}" in text, name
    # never the BMC network: a host talks to BMCs, BMCs never to a host
    assert all(pools["bmc"]["cidr"] not in h["firewall"]["accept_ipv4"] for h in plan["hosts"].values())


def test_a_host_without_storage_or_rails_accepts_the_management_network_only() -> None:
    network = {"pools": {"management": {"cidr": "10.20.0.0/24"}, "storage": {"cidr": "10.20.2.0/24"}}, "rails": []}
    assert host_policy(["head"], {"management": "10.20.0.10"}, network)["accept_ipv4"] == ["10.20.0.0/24"]
    with_storage = host_policy(["storage"], {"management": "10.20.0.11", "storage": "10.20.2.10"}, network)
    assert with_storage["accept_ipv4"] == ["10.20.0.0/24", "10.20.2.0/24"]


def test_kubernetes_keeps_forwarding_for_the_cni() -> None:
    """The CNI forwards the pods' traffic through the host: forward accept there, input still drop."""
    net = {"pools": {"management": {"cidr": "10.20.0.0/24"}}}
    assert firewall_plan(net, "kubernetes")["forward_policy"] == "accept"
    assert firewall_plan(net, "kubernetes")["input_policy"] == "drop"
    assert firewall_plan(net, "slurm")["forward_policy"] == "drop"
    plan = cluster_plan(*load_inventory("tier4-k8s"))
    text = render_role_template("common", "nftables-gpucluster.nft.j2", plan, "compute01")
    assert _chain(text, "forward") == ["type filter hook forward priority filter; policy accept;"]
    assert _chain(text, "input")[0] == "type filter hook input priority filter; policy drop;"


def test_the_sites_extra_networks_and_ports_come_after_the_limited_ports() -> None:
    plan = cluster_plan(*load_inventory("tier2"))
    cidr = plan["network"]["pools"]["management"]["cidr"]
    text = render_role_template(
        "common",
        "nftables-gpucluster.nft.j2",
        plan,
        plan["cluster"]["head"],
        common_firewall_extra_cidrs=["192.0.2.0/24", "2001:db8::/32"],
        common_firewall_extra_tcp_ports=[6443, 443],
        common_firewall_extra_udp_ports=[4789],
    )
    chain = _chain(text, "input")
    ip4 = "ip saddr 192.0.2.0/24 accept  # the site's (common_firewall_extra_cidrs)"
    ip6 = "ip6 saddr 2001:db8::/32 accept  # the site's (common_firewall_extra_cidrs)"
    tcp = "tcp dport { 6443, 443 } accept  # the site's (common_firewall_extra_tcp_ports)"
    udp = "udp dport { 4789 } accept  # the site's (common_firewall_extra_udp_ports)"
    for rule in (ip4, ip6, tcp, udp):
        assert rule in chain
        # a site's network or port never opens a limited port to the world
        assert chain.index(rule) > chain.index(f"tcp dport @management_tcp ip saddr != {cidr} drop")
        assert chain.index(rule) > chain.index("tcp dport @management_tcp meta nfproto ipv6 drop")


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
