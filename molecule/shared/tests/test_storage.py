"""Shared storage in the lab: the NFS server is real (nfs-ganesha) and answers on the planned
storage network at the address the clients mount (lab/create.yml attaches every storage and
compute container to that network at its planned storage address); Lustre exists only as
rendered configuration (no kernel modules in containers)."""

from __future__ import annotations

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


def test_local_raid_is_not_built_without_devices(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    if plan["storage"]["type"] != "local_nvme":
        pytest.skip(f"storage is {plan['storage']['type']}, not local NVMe")
    for name in hosts_with(plan, "storage"):
        mdstat = hosts[name].run("cat /proc/mdstat 2>/dev/null").stdout  # no md driver: no file at all
        assert " active " not in mdstat, name
