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


def test_storage_and_fabric_units_go_to_networkd_and_management_stays(
    hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    """common_network_units_enabled's default (storage, fabric): those units are in systemd-networkd's
    folder, as the review copy, and networkd runs; the management unit is not there, and every link of
    the container (its management and storage networks are podman's, none has a planned name) stays
    unmanaged with its address. No systemd-networkd restart is left pending: the converge started it."""
    for name, host in hosts.items():
        units = plan["hosts"][name]["network_units"]
        applied = sorted(u["name"] for u in units if u["network"] in ("storage", "fabric"))
        found = host.check_output("ls /etc/systemd/network | grep '^10-gpucluster-' || true").split()
        assert sorted(found) == applied, name
        for unit in applied:
            review = host.file(f"/etc/gpucluster/network/{unit}").content_string
            assert host.file(f"/etc/systemd/network/{unit}").content_string == review, (name, unit)
        assert host.service("systemd-networkd").is_running == bool(applied), name
        assert not host.file("/var/lib/gpucluster/pending/systemd-networkd.service").exists, name
        if applied:
            rows = host.check_output("networkctl list --no-legend").splitlines()
            setup = {row.split()[1]: row.split()[4] for row in rows}
            assert set(setup.values()) == {"unmanaged"}, (name, setup)
        mgmt = plan["hosts"][name]["addresses"]["management"]
        assert f" {mgmt}/" in host.check_output("ip -o -4 addr show"), name
