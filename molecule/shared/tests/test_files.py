"""Every file the plan lists for a host is on that host, byte for byte as make plan renders it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host


def test_installed_files_match_the_plan(hosts: dict[str, Any], plan: dict[str, Any], lab: Path) -> None:
    checked = 0
    for name, host in hosts.items():
        for item in files_by_host(plan)[name]:
            dest = item["dest"]
            planned = (lab / "planned" / name / dest.lstrip("/")).read_bytes()
            installed = host.file(dest)
            assert installed.exists, (name, dest)
            assert installed.content == planned, (name, dest)
            checked += 1
    assert checked >= len(hosts) * 4


def test_gpudirect_pcie_path_waits_for_a_reboot(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """DMA-BUF on Debian 12: no module to load at boot; iommu=pt in the GRUB drop-in and the PCIe ACS unit
    (valid, enabled, never run in a container), and the reboot they need recorded, never done in the lab."""
    pcie = plan["gpu"]["bringup"]["gpudirect"]["pcie"]
    if not pcie["reboot_paths"]:
        pytest.skip("no GPUDirect RDMA in this plan (no RDMA fabric)")
    nodes = [n for n, h in plan["hosts"].items() if "compute" in h["roles"]]
    for name in nodes:
        host = hosts[name]
        assert not host.file("/etc/modules-load.d/gpucluster-gpudirect.conf").exists, name
        grub = host.file(pcie["grub_dropin"]).content_string.splitlines()
        assert grub[-1] == 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }iommu=pt"', name
        # what update-grub would compute from it: the planned argument appended to Debian's line
        line = host.run(f"sh -c 'GRUB_CMDLINE_LINUX=quiet; . {pcie['grub_dropin']}; echo \"$GRUB_CMDLINE_LINUX\"'")
        assert line.stdout.strip() == "quiet " + " ".join(pcie["kernel_args"]), name
        unit = f"/etc/systemd/system/{pcie['acs_unit']}"
        verify = host.run(f"systemd-analyze verify {unit}")
        assert verify.rc == 0, (name, verify.stderr)
        assert host.service(pcie["acs_unit"]).is_enabled, name
        assert host.file(pcie["acs_program"]).mode == 0o755, name
        assert host.run(f"sh -n {pcie['acs_program']}").rc == 0, name
        # recorded as pending (the lab never reboots), naming what changed
        pending = host.file("/var/lib/gpucluster/reboot-pending")
        assert pending.exists, name
        assert pcie["grub_dropin"] in pending.content_string, name
