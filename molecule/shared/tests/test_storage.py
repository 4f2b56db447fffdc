"""Shared storage in the lab: the NFS server is real (nfs-ganesha) and answers on the planned
storage network at the address the clients mount (lab/create.yml attaches every storage and
compute container to that network at its planned storage address); Lustre exists only as
rendered configuration (no kernel modules in containers)."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
from conftest import hosts_with

# An ONC RPC NULL call (RFC 5531) to NFS version 4 over TCP: record mark, xid, CALL, RPC 2,
# program 100003, version 4, procedure 0, AUTH_NONE credential and verifier. The reply
# must be MSG_ACCEPTED with SUCCESS. Run with the node's own python3 (no rpcinfo needed).
NFS_NULL_CALL = """
import socket, struct, sys
body = struct.pack(">10I", 0x6770, 0, 2, 100003, 4, 0, 0, 0, 0, 0)
with socket.create_connection((sys.argv[1], 2049), timeout=10) as s:
    s.sendall(struct.pack(">I", 0x80000000 | len(body)) + body)
    reply = s.recv(4096)
    local = s.getsockname()[0]
xid, mtype, stat, _flavor, vlen = struct.unpack(">5I", reply[4:24])
accept = struct.unpack(">I", reply[24 + vlen:28 + vlen])[0]
print(f"ok {local}" if (xid, mtype, stat, accept) == (0x6770, 1, 0, 0) else f"bad reply {reply!r}")
"""


def _mount_section(mount: dict[str, Any]) -> str:
    """The [Mount] keys a planned mount unit carries, from the plan's data."""
    return "".join(f"{key.capitalize()}={mount[key]}\n" for key in ("what", "where", "type", "options"))


def test_nfs_server_answers_from_every_compute_node(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    if plan["storage"]["type"] != "nfs":
        pytest.skip(f"storage is {plan['storage']['type']}, not NFS")
    nfs = plan["storage"]["nfs"]
    server = hosts[nfs["server"]]
    assert server.service("nfs-ganesha").is_running
    address = nfs["server_address"]
    assert nfs["network"] == "storage" and address == plan["hosts"][nfs["server"]]["addresses"]["storage"]
    for name in hosts_with(plan, "compute"):
        # the NFS server answers an NFSv4 NULL call at the address the mount units name, and the
        # client reaches it from its own planned storage address (the storage network, not management)
        out = hosts[name].check_output(f"python3 -c {shlex.quote(NFS_NULL_CALL)} {address}")
        assert out == f"ok {plan['hosts'][name]['addresses']['storage']}", (name, out)
        for mount in nfs["client_mounts"]:
            assert mount["what"].startswith(f"{address}:"), mount
            unit = hosts[name].file(mount["unit_path"])
            # the plan holds the mount's data; the unit is rendered from it (filter nfs_mount_unit)
            assert unit.exists and _mount_section(mount) in unit.content_string, (name, mount["unit_name"])


def test_lustre_is_configuration_only_in_the_lab(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    if plan["storage"]["type"] != "lustre":
        pytest.skip(f"storage is {plan['storage']['type']}, not Lustre")
    for name, host in hosts.items():
        assert "lustre" not in host.file("/proc/mounts").content_string, name


def test_lustre_md_arrays_are_recorded_not_built(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """Each Lustre server has mdadm and its targets' planned ARRAY lines where mdadm reads them; no array is
    built in the lab (the host kernel has no md driver loaded, the containers no NVMe devices)."""
    if plan["storage"]["type"] != "lustre":
        pytest.skip(f"storage is {plan['storage']['type']}, not Lustre")
    for name, targets in plan["storage"]["lustre"]["targets"].items():
        host = hosts[name]
        assert host.package("mdadm").is_installed, name
        conf = host.file("/etc/mdadm/mdadm.conf.d/gpucluster-lustre.conf").content_string
        want = [t["array"]["conf_line"] for t in targets if t["array"]]
        assert want and [x for x in conf.splitlines() if x.startswith("ARRAY ")] == want, name
        assert " active " not in host.run("cat /proc/mdstat 2>/dev/null").stdout, name


def test_lustre_client_units_verify_and_come_before_slurmd(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """Each compute node has LNet's files and the planned mount and tunables units, installed and
    enabled, verified by systemd, ordered after LNet and before slurmd; slurmd runs although the mount
    cannot happen here (no Lustre modules in a container: the role says so and does not start it)."""
    if plan["storage"]["type"] != "lustre":
        pytest.skip(f"storage is {plan['storage']['type']}, not Lustre")
    lu = plan["storage"]["lustre"]
    mount = lu["client_mount"]
    unit, tunables = mount["unit_name"], mount["tunables_unit"]
    slurm = plan["cluster"]["scheduler"] == "slurm"
    script = "; ".join(
        [
            f"systemd-analyze verify --man=no {shlex.quote(mount['unit_path'])} 2>&1; echo verify=$?",
            f"systemd-analyze verify --man=no /etc/systemd/system/{tunables} 2>&1; echo tunables=$?",
            f"echo enabled=$(systemctl is-enabled {shlex.quote(unit)} {tunables} | tr '\\n' ,)",
            f"echo active=$(systemctl show -p ActiveState --value {shlex.quote(unit)})",
            f"echo before=$(systemctl show -p Before --value {shlex.quote(unit)})",
            "echo slurmd_after=$(systemctl show -p After --value slurmd.service)",
            "echo slurmd_requires=$(systemctl show -p Requires -p BindsTo --value slurmd.service | tr '\\n' ' ')",
            "echo slurmd=$(systemctl show -p ActiveState --value slurmd.service)",
            "modinfo lustre >/dev/null 2>&1; echo modinfo=$?",
        ]
    )
    for name in hosts_with(plan, "compute"):
        host = hosts[name]
        assert f"net type: {lu['lnet']['net']}" in host.file("/etc/lnet.conf").content_string, name
        assert lu["lnet"]["modprobe"] in host.file("/etc/modprobe.d/lustre.conf").content_string, name
        assert _mount_section(mount) in host.file(mount["unit_path"]).content_string, name
        out = host.check_output(script)
        lines = out.splitlines()
        facts = dict(line.split("=", 1) for line in lines if re.fullmatch(r"[a-z_]+=.*", line))
        assert facts["verify"] == "0", (name, out)
        # the tunables unit's only complaint where the Lustre utilities are missing is their lctl
        complaints = [line for line in lines if line.startswith(f"{tunables}:") and "/usr/sbin/lctl" not in line]
        assert not complaints and (facts["tunables"] == "0" or facts["modinfo"] != "0"), (name, out)
        assert facts["enabled"] == "enabled,enabled,", (name, out)
        if facts["modinfo"] != "0":  # no client modules (the lab): installed, enabled, not started
            assert facts["active"] in ("inactive", "failed"), (name, out)
        if slurm:
            assert "slurmd.service" in facts["before"].split() and unit in facts["slurmd_after"].split(), (name, out)
            assert unit not in facts["slurmd_requires"].split(), (name, out)
            assert facts["slurmd"] == "active", (name, out)  # the mount that cannot happen never stops slurmd


def test_local_raid_is_not_built_without_devices(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    if plan["storage"]["type"] != "local_nvme":
        pytest.skip(f"storage is {plan['storage']['type']}, not local NVMe")
    for name in hosts_with(plan, "storage"):
        mdstat = hosts[name].run("cat /proc/mdstat 2>/dev/null").stdout  # no md driver: no file at all
        assert " active " not in mdstat, name
