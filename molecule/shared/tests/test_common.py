"""The common role's real state on every lab host, compared with the plan."""

from __future__ import annotations

from typing import Any

from conftest import hosts_with


def test_etc_hosts_matches_the_plan(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    expected = {(ip, fqdn, short) for ip, fqdn, short in plan["etc_hosts"]}
    for name, host in hosts.items():
        lines = host.file("/etc/hosts").content_string.splitlines()
        found = {tuple(line.split()) for line in lines if line and not line.startswith("#")}
        assert expected <= found, name
        assert host.check_output("hostname") == name


def test_names_resolve_to_management_addresses(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = plan["cluster"]["head"]
    for name, host in hosts.items():
        assert host.check_output(f"getent hosts {head}").split()[0] == plan["hosts"][head]["addresses"]["management"]
        assert name


def test_munge_credentials_decode_across_hosts(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """A credential made on the head decodes on every other host: one shared key."""
    head = plan["cluster"]["head"]
    for name, host in hosts.items():
        assert host.service("munge").is_running, name
        key = host.file("/etc/munge/munge.key")
        assert (key.user, key.mode) == ("munge", 0o400), name
    credential = hosts[head].check_output("munge -n")
    for name, host in hosts.items():
        result = host.run(f"echo '{credential}' | unmunge")
        assert result.rc == 0 and "STATUS:          Success" in result.stdout, (name, result.stderr)


def test_chrony_followers_use_the_head(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = plan["cluster"]["head"]
    head_address = plan["hosts"][head]["addresses"]["management"]
    assert hosts[head].service("chrony").is_running
    for name, host in hosts.items():
        if name == head:
            continue
        assert host.service("chrony").is_running, name
        sources = host.check_output("chronyc -n sources")
        assert head_address in sources, (name, sources)


def test_limits_and_sysctls_in_effect(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    for name in hosts_with(plan, "compute") + hosts_with(plan, "storage"):
        host = hosts[name]
        wanted = {entry["value"] for entry in plan["hosts"][name]["limits"] if entry["item"] == "memlock"}
        # a login session (pam_limits) gets the planned locked-memory limit
        assert host.check_output("bash -lc 'ulimit -l'") in wanted, name
    for name, host in hosts.items():
        for entry in plan["hosts"][name]["sysctl"]:
            assert f"{entry['key']} = {entry['value']}" in host.file("/etc/sysctl.d/90-gpucluster.conf").content_string
            if entry["netns"]:  # settable in a container's own network namespace
                value = host.check_output(f"sysctl -n {entry['key']}")
                assert value.split() == entry["value"].split(), (name, entry["key"])
