"""block_device_guard: nothing with a signature is formatted unless the inventory allows that device.

Real blkid and wipefs (util-linux) read file-backed images in tmp_path; mkfs.ext4 makes the
file systems. An existing md array is given by a fake ``mdadm --detail --export`` on PATH and a
fake /proc/mdstat, since this sandbox cannot assemble arrays.
"""

from __future__ import annotations

import errno
import json
import os
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from conftest import FLAG, MDADM_EXPORT

from ansible_collections.gpucluster.tiers.plugins.modules import block_device_guard


def _image(path: Path, fs: str | None = None, label: str | None = None) -> str:
    with open(path, "wb") as handle:
        handle.truncate(8 << 20)
    if fs == "ext4":
        cmd = ["mkfs.ext4", "-q", "-F", *(["-L", label] if label else []), str(path)]
        subprocess.run(cmd, check=True, capture_output=True)
    elif fs == "dos":  # an MBR partition table: one Linux partition, boot signature 0x55AA
        data = bytearray(path.read_bytes())
        data[446:462] = struct.pack("<B3sB3sII", 0, b"\0\0\0", 0x83, b"\0\0\0", 2048, 4096)
        data[510:512] = b"\x55\xaa"
        path.write_bytes(bytes(data))
    return str(path)


def run_module(capsys: pytest.CaptureFixture[str], **args: Any) -> dict[str, Any]:
    args.setdefault("filesystem", "ext4")
    with patch_module_args(args), pytest.raises(SystemExit):
        block_device_guard.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def no_arrays(tmp_path: Path) -> str:
    mdstat = tmp_path / "mdstat"
    mdstat.write_text("Personalities : \nunused devices: <none>\n")
    return str(mdstat)


def test_blank_device_passes(tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]) -> None:
    dev = _image(tmp_path / "nvme2n1.img")
    out = run_module(capsys, devices=[dev], mdstat=no_arrays)
    assert not out.get("failed"), out
    assert out["changed"] is False and out["present"] and out["mkfs"] and out["wipe"] == []
    assert out["target"] == dev and out["signatures"] == {dev: []}


def test_device_with_a_filesystem_is_refused_naming_device_and_flag(
    tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _image(tmp_path / "nvme3n1.img", "ext4", label="olddata")
    out = run_module(capsys, devices=[dev], filesystem="xfs", mdstat=no_arrays)
    assert out["failed"]
    msg = out["msg"]
    assert f"refusing to format {dev}" in msg and "ext4" in msg and "olddata" in msg
    assert f"{FLAG}.allow_format: true" in msg and f"{FLAG}.allow_format_devices" in msg


def test_allowed_when_flag_set_and_device_listed(
    tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _image(tmp_path / "nvme3n1.img", "ext4")
    out = run_module(
        capsys, devices=[dev], filesystem="xfs", allow_format=True, allow_format_devices=[dev], mdstat=no_arrays
    )
    assert not out.get("failed"), out
    assert out["mkfs"] and out["wipe"] == [dev] and out["state"] == "mkfs"


def test_refused_when_flag_set_but_device_not_listed(
    tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = _image(tmp_path / "nvme2n1.img", "ext4")
    other = _image(tmp_path / "nvme3n1.img", "ext4")
    raid = str(tmp_path / "md0")
    out = run_module(
        capsys,
        devices=[listed, other],
        raid_device=raid,
        allow_format=True,
        allow_format_devices=[listed],
        mdstat=no_arrays,
    )
    assert out["failed"]
    assert (
        f"refusing to format {other}" in out["msg"]
        and f"{other} is not listed in {FLAG}.allow_format_devices" in (out["msg"])
    )
    assert f"refusing to format {listed}" not in out["msg"]


def test_partition_table_is_a_signature_too(tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]) -> None:
    dev = _image(tmp_path / "nvme4n1.img", "dos")
    out = run_module(capsys, devices=[dev], mdstat=no_arrays)
    assert out["failed"] and "dos" in out["msg"] and dev in out["msg"]


def test_rerun_never_reformats_the_planned_filesystem(
    tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _image(tmp_path / "nvme2n1.img", "ext4")
    out = run_module(capsys, devices=[dev], filesystem="ext4", mdstat=no_arrays)
    assert not out.get("failed"), out
    assert out["state"] == "ready" and not out["mkfs"] and not out["create_array"] and out["changed"] is False


def test_new_array_from_blank_devices(tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]) -> None:
    devs = [_image(tmp_path / f"nvme{i}n1.img") for i in (2, 3)]
    out = run_module(capsys, devices=devs, raid_device=str(tmp_path / "md0"), mdstat=no_arrays)
    assert out["state"] == "create" and out["create_array"] and out["mkfs"] and out["target"] == str(tmp_path / "md0")


def _fake_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> Path:
    """A shell script ``name`` first on PATH (before the system's tools); returns its folder."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir(exist_ok=True)
    script = bindir / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/sbin:/usr/bin:/sbin:/bin")
    return bindir


@pytest.fixture
def fake_mdadm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return _fake_tool(tmp_path, monkeypatch, "mdadm", 'cat "$(dirname "$0")/detail.txt"\n') / "detail.txt"


def test_existing_array_with_a_different_device_list_is_refused(
    tmp_path: Path, fake_mdadm: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, c = (_image(tmp_path / f"nvme{i}n1.img") for i in (2, 3, 4))
    raid = _image(tmp_path / "md0", "ext4")
    fake_mdadm.write_text(MDADM_EXPORT.format(a="nvme2n1", pa=a, b="nvme4n1", pb=c))
    out = run_module(
        capsys, devices=[a, b], raid_device=raid, allow_format=True, allow_format_devices=[a, b], mdstat=no_arrays
    )
    assert out["failed"]
    assert f"{raid} is an existing raid0 array of {sorted([a, c])}" in out["msg"]
    assert "not rebuilt" in out["msg"] and f"{FLAG}.devices" in out["msg"]


def test_existing_array_as_planned_is_left_alone(
    tmp_path: Path, fake_mdadm: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = (_image(tmp_path / f"nvme{i}n1.img") for i in (2, 3))
    raid = _image(tmp_path / "md0", "ext4")
    fake_mdadm.write_text(MDADM_EXPORT.format(a="nvme2n1", pa=a, b="nvme3n1", pb=b))
    out = run_module(capsys, devices=[a, b], raid_device=raid, mdstat=no_arrays)
    assert not out.get("failed"), out
    assert out["state"] == "ready" and not out["create_array"] and not out["mkfs"]
    assert out["array"]["devices"] == sorted([a, b]) and out["array"]["level"] == "raid0"


def test_lustre_target_recognised_by_its_label(
    tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _image(tmp_path / "nvme1n1.img", "ext4", label="aifs:OST0001")  # ldiskfs before registration
    out = run_module(
        capsys,
        devices=[dev],
        filesystem="lustre",
        label="aifs-OST0001",
        flag="gpucluster_storage.lustre",
        mdstat=no_arrays,
    )
    assert out["state"] == "ready" and not out["mkfs"]
    out = run_module(
        capsys,
        devices=[dev],
        filesystem="lustre",
        label="aifs-OST0002",
        flag="gpucluster_storage.lustre",
        mdstat=no_arrays,
    )
    assert out["failed"] and "gpucluster_storage.lustre.allow_format" in out["msg"]


def test_absent_devices_are_a_skip_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_module(capsys, devices=["/dev/nvme-not-here-0", "/dev/nvme-not-here-1"], raid_device="/dev/md-not-here")
    assert out["present"] is False and out["state"] == "absent" and not out["mkfs"] and not out.get("failed")


def test_partly_absent_devices_fail(tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]) -> None:
    dev = _image(tmp_path / "nvme2n1.img")
    out = run_module(capsys, devices=[dev, "/dev/nvme-not-here"], raid_device=str(tmp_path / "md0"), mdstat=no_arrays)
    assert out["failed"] and "/dev/nvme-not-here" in out["msg"]


def test_member_of_a_running_array_is_refused_even_when_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _image(tmp_path / "nvme3n1.img")
    mdstat = tmp_path / "mdstat"
    # /proc/mdstat names members relative to /dev: "/dev/.." + the image path resolves to the image
    mdstat.write_text(f"md5 : active raid1 ..{dev}[0] sdz[1]\n      100 blocks\n")
    out = run_module(capsys, devices=[dev], allow_format=True, allow_format_devices=[dev], mdstat=str(mdstat))
    assert out["failed"] and "/dev/md5" in out["msg"] and dev in out["msg"]


# -- check mode, and "blank" only when proven (issue 16, item 4) ------------------------------


def test_check_mode_changes_nothing_and_reports_what_it_would_do(
    tmp_path: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _image(tmp_path / "nvme3n1.img", "ext4", label="olddata")
    before = Path(dev).read_bytes()
    out = run_module(
        capsys,
        devices=[dev],
        filesystem="xfs",
        allow_format=True,
        allow_format_devices=[dev],
        mdstat=no_arrays,
        _ansible_check_mode=True,
    )
    assert not out.get("failed"), out
    assert out["changed"] is False and out["state"] == "mkfs" and out["mkfs"] and out["wipe"] == [dev]
    assert any("allow erasing it" in r for r in out["reasons"])
    assert Path(dev).read_bytes() == before  # the guard only reads


@pytest.fixture
def blkid_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A blkid that prints nothing and exits 2, as util-linux blkid does when it cannot open a device."""
    body = 'echo "$@" >> "$(dirname "$0")/blkid.calls"\nexit 2\n'
    return _fake_tool(tmp_path, monkeypatch, "blkid", body) / "blkid.calls"


def test_unopenable_device_with_blkid_exit_2_is_refused(
    tmp_path: Path,
    no_arrays: str,
    blkid_exit_2: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dev = _image(tmp_path / "nvme2n1.img", "ext4", label="olddata")  # data blkid cannot see
    real_open = os.open

    def deny(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path) == dev:
            raise PermissionError(errno.EACCES, "Permission denied", dev)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(block_device_guard.os, "open", deny)
    out = run_module(capsys, devices=[dev], mdstat=no_arrays)
    assert out["failed"] and not out.get("mkfs")
    assert f"cannot read {dev} (open: Permission denied)" in out["msg"] and "never formatted" in out["msg"]


def test_unreadable_device_is_refused_even_when_allowed(
    tmp_path: Path, no_arrays: str, blkid_exit_2: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = tmp_path / "nvme4n1"
    dev.mkdir()  # opens read-only, but read() fails (EISDIR): not a device whose blankness is known
    out = run_module(capsys, devices=[str(dev)], allow_format=True, allow_format_devices=[str(dev)], mdstat=no_arrays)
    assert out["failed"] and f"cannot read {dev} (read: " in out["msg"] and "never formatted" in out["msg"]
    assert not blkid_exit_2.exists()  # blkid's exit 2 never gets the chance to read as "blank"


def test_blkid_exit_2_on_a_readable_device_is_blank(
    tmp_path: Path, no_arrays: str, blkid_exit_2: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = _image(tmp_path / "nvme2n1.img")
    out = run_module(capsys, devices=[dev], mdstat=no_arrays)
    assert not out.get("failed"), out
    assert out["state"] == "mkfs" and out["signatures"] == {dev: []}
    assert dev in blkid_exit_2.read_text()


def _without(monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    real = block_device_guard.AnsibleModule.get_bin_path

    def get_bin_path(self: Any, arg: str, *args: Any, **kwargs: Any) -> str | None:
        return None if arg == tool else real(self, arg, *args, **kwargs)

    monkeypatch.setattr(block_device_guard.AnsibleModule, "get_bin_path", get_bin_path)


def test_wipefs_missing_and_blkid_silent_is_not_blank(
    tmp_path: Path, no_arrays: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _without(monkeypatch, "wipefs")
    dev = _image(tmp_path / "nvme2n1.img")
    out = run_module(capsys, devices=[dev], mdstat=no_arrays)
    assert out["failed"] and not out.get("mkfs")
    assert f"blkid finds no signature on {dev}, but wipefs (util-linux) is not installed" in out["msg"]
    assert "not proven blank" in out["msg"]


def test_wipefs_missing_still_sees_what_blkid_finds(
    tmp_path: Path, no_arrays: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _without(monkeypatch, "wipefs")
    dev = _image(tmp_path / "nvme2n1.img", "ext4", label="olddata")
    out = run_module(capsys, devices=[dev], filesystem="xfs", mdstat=no_arrays)
    assert out["failed"] and f"refusing to format {dev}: it carries ext4" in out["msg"]
    out = run_module(capsys, devices=[dev], filesystem="ext4", mdstat=no_arrays)
    assert not out.get("failed") and out["state"] == "ready"  # a re-run keeps the planned file system


def test_wipefs_failure_is_not_blank(
    tmp_path: Path, no_arrays: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_tool(tmp_path, monkeypatch, "wipefs", "echo 'wipefs: error: probing initialization failed' >&2\nexit 1\n")
    dev = _image(tmp_path / "nvme2n1.img")
    out = run_module(capsys, devices=[dev], mdstat=no_arrays)
    assert out["failed"] and f"cannot read {dev} with wipefs (rc 1)" in out["msg"] and "not proven blank" in out["msg"]


RAID6_EXPORT = """MD_LEVEL=raid6
MD_DEVICES=4
MD_METADATA=1.2
MD_UUID=9a0c4e1b:77d2f3a8:1e5b6c90:4f2a8d13
MD_DEVNAME=aifs-OST0000
MD_NAME=oss01:aifs-OST0000
""" + "".join(
    f"MD_DEVICE_dev_{n}_ROLE={i}\nMD_DEVICE_dev_{n}_DEV={{p{i}}}\n" for i, n in enumerate(("a", "b", "c", "d"))
)


def test_existing_raid6_lustre_target_is_neither_recreated_nor_reformatted(
    tmp_path: Path, fake_mdadm: Path, no_arrays: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A re-run on an OSS whose RAID-6 array holds its OST (issue 38): the guard says ready, nothing else."""
    members = [_image(tmp_path / f"nvme{i}n1.img") for i in (1, 2, 3, 4)]
    raid = _image(tmp_path / "aifs-OST0000", "ext4", label="aifs-OST0000")  # ldiskfs after registration
    fake_mdadm.write_text(RAID6_EXPORT.format(**{f"p{i}": m for i, m in enumerate(members)}))
    args = dict(devices=members, raid_device=raid, filesystem="lustre", label="aifs-OST0000", mdstat=no_arrays)
    out = run_module(capsys, raid_level="raid6", allow_format=True, allow_format_devices=[*members, raid], **args)
    assert not out.get("failed"), out
    assert out["state"] == "ready" and not out["create_array"] and not out["mkfs"] and out["wipe"] == []
    # the same members as a RAID-1 in the plan: a changed level is never rebuilt, whatever the flags
    out = run_module(capsys, raid_level="raid1", allow_format=True, allow_format_devices=[*members, raid], **args)
    assert out["failed"] and "existing raid6 array" in out["msg"] and "not rebuilt" in out["msg"]
