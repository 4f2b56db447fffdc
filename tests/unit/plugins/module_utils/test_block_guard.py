"""block_guard parsers and decisions (module_utils/block_guard.py): blkid, wipefs, mdadm and the allow list."""

from __future__ import annotations

import pytest
from conftest import FLAG, MDADM_EXPORT

from ansible_collections.gpucluster.tiers.plugins.module_utils.block_guard import (
    GuardError,
    guard,
    parse_blkid_export,
    parse_mdadm_detail_export,
    parse_mdstat,
    parse_wipefs_json,
    probe_signatures,
    signatures,
)

MDSTAT = """Personalities : [raid0] [linear] [multipath] [raid1] [raid6] [raid5] [raid4] [raid10]
md0 : active raid0 nvme5n1[3] nvme4n1[2] nvme3n1[1] nvme2n1[0]
      7501211648 blocks super 1.2 512k chunks

md127 : inactive sdb[0](S)
      1953382488 blocks super 1.2

unused devices: <none>
"""


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


# -- probe_signatures: "blank" only when the device was read, blkid and wipefs agree ----------

WIPEFS_EMPTY = '{"signatures": []}'


def _probe(**kw: object) -> list[dict]:
    args: dict = {"read_error": None, "blkid_rc": 2, "blkid_out": "", "wipefs_rc": 0, "wipefs_out": WIPEFS_EMPTY}
    args.update(kw)
    return probe_signatures("/dev/nvme1n1", **args)


def test_blkid_exit_2_after_a_read_is_blank() -> None:
    assert _probe() == []


@pytest.mark.parametrize("blkid_rc", [0, 2, 8])
def test_unreadable_device_is_never_blank(blkid_rc: int) -> None:
    with pytest.raises(
        GuardError, match=r"cannot read /dev/nvme1n1 \(open: No such device or address\).*never formatted"
    ):
        _probe(read_error="open: No such device or address", blkid_rc=blkid_rc)


def test_blkid_other_failure_stops() -> None:
    with pytest.raises(GuardError, match=r"cannot read /dev/nvme1n1 with blkid \(rc 4\): usage"):
        _probe(blkid_rc=4, blkid_err="usage\n")


def test_missing_wipefs_with_silent_blkid_is_not_blank() -> None:
    with pytest.raises(GuardError, match=r"wipefs \(util-linux\) is not installed.*not proven blank"):
        _probe(wipefs_rc=None)


def test_missing_wipefs_keeps_what_blkid_found() -> None:
    sigs = _probe(blkid_rc=0, blkid_out="TYPE=xfs\nLABEL=old\nUSAGE=filesystem\n", wipefs_rc=None)
    assert sigs == [{"type": "xfs", "offset": None, "label": "old", "usage": "filesystem"}]


def test_failing_wipefs_is_not_blank() -> None:
    with pytest.raises(GuardError, match=r"with wipefs \(rc 1\): busy; /dev/nvme1n1 is not proven blank"):
        _probe(wipefs_rc=1, wipefs_err="busy")


def test_wipefs_sees_what_blkid_missed() -> None:
    out = '{"signatures": [{"device": "nvme1n1", "offset": "0x1fe", "type": "dos", "uuid": null, "label": null}]}'
    assert _probe(wipefs_out=out)[0]["type"] == "dos"


def test_ambivalent_blkid_is_a_signature() -> None:
    assert _probe(blkid_rc=8)[0]["type"] == "ambivalent-signatures"


# -- Lustre targets on md RAID (issue 38): the plan's array, as lustre_targets.yml passes it -----------


def _ost_args(**kw: object) -> dict[str, object]:
    members = ["/dev/nvme1n1", "/dev/nvme2n1", "/dev/nvme3n1", "/dev/nvme4n1"]
    args: dict[str, object] = dict(
        devices=members, raid_device="/dev/md/aifs-OST0000", raid_level="raid6", filesystem="lustre",
        label="aifs-OST0000", allow_format=False, allow_format_devices=[], flag="gpucluster_storage.lustre",
        present=dict.fromkeys(members, True), probes={}, array=None, mdstat={},
    )  # fmt: skip
    args.update(kw)
    return args


def test_blank_members_get_a_new_array_and_target() -> None:
    out = guard(**_ost_args())
    assert out["state"] == "create" and out["create_array"] and out["mkfs"]


def test_an_array_holding_its_target_is_left_as_is() -> None:
    array = {"level": "raid6", "devices": ["/dev/nvme1n1", "/dev/nvme2n1", "/dev/nvme3n1", "/dev/nvme4n1"]}
    ldiskfs = {"/dev/md/aifs-OST0000": [{"type": "ext4", "label": "aifs-OST0000", "offset": "0x438"}]}
    out = guard(**_ost_args(array=array, probes=ldiskfs))
    assert (out["state"], out["create_array"], out["mkfs"], out["wipe"]) == ("ready", False, False, [])


def test_members_of_an_unrecorded_array_are_never_taken() -> None:
    """After a reboot without the ARRAY line the array may run as md127: its members stay untouched."""
    mdstat = {"md127": {"state": "active", "level": "raid6", "devices": ["/dev/nvme1n1", "/dev/nvme2n1"]}}
    with pytest.raises(GuardError, match=r"belong to the active array /dev/md127"):
        guard(**_ost_args(mdstat=mdstat, allow_format=True, allow_format_devices=["/dev/nvme1n1"]))
    # not running: its members carry linux_raid_member signatures, refused without the allow list
    member = [{"type": "linux_raid_member", "label": "oss01:aifs-OST0000", "offset": "0x1000"}]
    with pytest.raises(GuardError, match=r"refusing to format /dev/nvme1n1: it carries linux_raid_member"):
        guard(**_ost_args(probes={"/dev/nvme1n1": member}))
