"""block_device_guard: nothing with a signature is formatted unless the inventory allows that device.

Real blkid and wipefs (util-linux) read file-backed images in tmp_path; mkfs.ext4 makes the
file systems. An existing md array is given by a fake ``mdadm --detail --export`` on PATH and a
fake /proc/mdstat, since this sandbox cannot assemble arrays.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpucluster.tiers.plugins.module_utils.block_guard import (
    GuardError,
    guard,
    parse_blkid_export,
    parse_mdadm_detail_export,
    parse_mdstat,
    parse_wipefs_json,
    signatures,
)
from ansible_collections.gpucluster.tiers.plugins.modules import block_device_guard

pytestmark = pytest.mark.skipif(
    not (shutil.which("blkid") and shutil.which("wipefs") and shutil.which("mkfs.ext4")),
    reason="needs util-linux blkid/wipefs and e2fsprogs",
)
FLAG = "gpucluster_storage.local_nvme"

# mdadm --detail --export of a 2-member raid0 (keys as mdadm Detail.c prints them)
MDADM_EXPORT = """MD_LEVEL=raid0
MD_DEVICES=2
MD_METADATA=1.2
MD_UUID=3b1f6a2c:5d0e41a7:9c2b7e13:0f4d8a61
MD_DEVNAME=0
MD_NAME=dgx01:0
MD_DEVICE_dev_{a}_ROLE=0
MD_DEVICE_dev_{a}_DEV={pa}
MD_DEVICE_dev_{b}_ROLE=1
MD_DEVICE_dev_{b}_DEV={pb}
"""

MDSTAT = """Personalities : [raid0] [linear] [multipath] [raid1] [raid6] [raid5] [raid4] [raid10]
md0 : active raid0 nvme5n1[3] nvme4n1[2] nvme3n1[1] nvme2n1[0]
      7501211648 blocks super 1.2 512k chunks

md127 : inactive sdb[0](S)
      1953382488 blocks super 1.2

unused devices: <none>
"""


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


# -- file-backed images through the module --------------------------------------------------


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


@pytest.fixture
def fake_mdadm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    script = bindir / "mdadm"
    script.write_text('#!/bin/sh\ncat "$(dirname "$0")/detail.txt"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/sbin:/usr/bin:/sbin:/bin")
    return bindir / "detail.txt"


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


# -- the pure parts -------------------------------------------------------------------------


def test_parsers() -> None:
    assert parse_blkid_export("DEVNAME=/dev/x\nTYPE=ext4\nUSAGE=filesystem\n")["TYPE"] == "ext4"
    assert parse_wipefs_json('{\n   "signatures": [\n\n   ]\n}\n') == []
    detail = parse_mdadm_detail_export(
        MDADM_EXPORT.format(a="nvme2n1", pa="/dev/nvme2n1", b="nvme3n1", pb="/dev/nvme3n1")
    )
    assert detail == {
        "level": "raid0",
        "raid_devices": 2,
        "metadata": "1.2",
        "uuid": "3b1f6a2c:5d0e41a7:9c2b7e13:0f4d8a61",
        "devices": ["/dev/nvme2n1", "/dev/nvme3n1"],
        "spares": [],
    }
    assert parse_mdadm_detail_export("mdadm: cannot open /dev/md0: No such file or directory\n") is None
    arrays = parse_mdstat(MDSTAT)
    assert arrays["md0"] == {
        "state": "active",
        "level": "raid0",
        "devices": ["/dev/nvme5n1", "/dev/nvme4n1", "/dev/nvme3n1", "/dev/nvme2n1"],
    }
    assert arrays["md127"] == {"state": "inactive", "level": None, "devices": ["/dev/sdb"]}


def test_signatures_merge_blkid_and_wipefs() -> None:
    wipefs = [{"device": "x", "offset": "0x438", "type": "ext4", "uuid": "u", "label": "d"}]
    sigs = signatures({"TYPE": "ext4", "USAGE": "filesystem"}, wipefs)
    assert sigs == [{"type": "ext4", "offset": "0x438", "label": "d", "usage": "filesystem"}]
    assert signatures({}, []) == []
    assert signatures({"PTTYPE": "gpt"}, None)[0]["type"] == "gpt"


BASE = dict(
    devices=["/dev/nvme2n1", "/dev/nvme3n1"], raid_device="/dev/md0", raid_level="raid0", filesystem="ext4",
    label=None, allow_format=False, allow_format_devices=[], flag=FLAG,
    present={"/dev/nvme2n1": True, "/dev/nvme3n1": True}, probes={}, array=None, mdstat={},
)  # fmt: skip


def test_typo_in_the_allow_list_is_an_error() -> None:
    with pytest.raises(GuardError, match=rf"{FLAG}\.allow_format_devices lists \['/dev/nvme9n1'\]"):
        guard(**{**BASE, "allow_format": True, "allow_format_devices": ["/dev/nvme9n1"]})


def test_existing_array_without_filesystem_gets_one_and_foreign_filesystem_is_refused() -> None:
    array = {"level": "raid0", "devices": ["/dev/nvme2n1", "/dev/nvme3n1"]}
    fresh = guard(**{**BASE, "array": array, "probes": {"/dev/md0": []}})
    assert fresh["state"] == "mkfs" and not fresh["create_array"] and fresh["wipe"] == []
    xfs = {"/dev/md0": [{"type": "xfs", "label": None, "offset": "0x0"}]}
    with pytest.raises(GuardError, match=r"refusing to format /dev/md0: it carries xfs"):
        guard(**{**BASE, "array": array, "probes": xfs})
    level = {"level": "raid1", "devices": ["/dev/nvme2n1", "/dev/nvme3n1"]}
    with pytest.raises(GuardError, match="existing raid1 array"):
        guard(**{**BASE, "array": level, "probes": {"/dev/md0": []}})
