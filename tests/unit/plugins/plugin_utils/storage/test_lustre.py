"""Lustre layouts and tunables (dossier 4: man page [L1], source [L2], guidance [L3][L4])."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.lustre import (
    client_mount,
    lctl_set_param_commands,
    lnet_conf_yaml,
    lnet_config,
    lustre_client_tunables,
    lustre_layouts,
    mount_unit_text,
    tunables_unit_text,
)

PATHS = {"checkpoints": "/l/ckpt", "datasets": "/l/data", "home": "/l/home"}


def test_reference_layouts_for_8_osts() -> None:
    lay = lustre_layouts(ost_count=8, paths=PATHS)
    assert lay["checkpoints"]["setstripe_args"] == "-E 64M -c 1 -S 4M -E 4G -c 4 -S 4M -E -1 -c 8 -S 16M"
    assert lay["home"]["setstripe_args"] == "-E 1M -L mdt -E -1 -c 1 -S 1M"  # Data-on-MDT [L1]
    assert lay["datasets"]["components"][-1]["end"] == -1


@given(osts=st.integers(1, 512))
def test_stripes_within_osts_and_64k_multiples(osts: int) -> None:
    """[L1]: stripe size must be a multiple of 64 KiB; counts never above the OST count."""
    for layout in lustre_layouts(ost_count=osts, paths=PATHS).values():
        for comp in layout["components"]:
            assert comp["stripe_size"] % 65536 == 0
            assert comp["stripe_count"] <= osts


def test_override_above_ost_count_names_the_field() -> None:
    bad = {"checkpoints": [{"end": 1048576, "stripe_count": 1}, {"end": -1, "stripe_count": 9}]}
    with pytest.raises(PlanError, match=r"gpucluster_storage\.lustre\.layouts\.checkpoints\[1\]\.stripe_count"):
        lustre_layouts(ost_count=8, paths=PATHS, overrides=bad)


def test_override_stripe_size_not_64k_multiple() -> None:
    bad = {"datasets": [{"end": -1, "stripe_count": 2, "stripe_size": 100000}]}
    with pytest.raises(PlanError, match=r"datasets\[0\]\.stripe_size.*64 KiB"):
        lustre_layouts(ost_count=8, paths=PATHS, overrides=bad)


def test_valid_override_and_all_osts() -> None:
    ok = {"datasets": [{"end": -1, "stripe_count": -1, "stripe_size": 4194304}]}
    assert lustre_layouts(ost_count=8, paths=PATHS, overrides=ok)["datasets"]["setstripe_args"] == "-E -1 -c -1 -S 4M"


@pytest.mark.parametrize("ram", [1, 4, 16, 64, 512, 2048, 4096])
def test_client_tunables_within_source_bounds(ram: int) -> None:
    """[L2]: max_dirty_mb < 2048 and <= RAM/4; read-ahead <= RAM/2; per-file <= total; RPCs <= 256."""
    t = lustre_client_tunables(client_ram_gib=ram)
    ram_mb = ram * 1024
    assert t["osc.*.max_dirty_mb"] < 2048 and t["osc.*.max_dirty_mb"] <= ram_mb / 4
    assert t["llite.*.max_read_ahead_mb"] <= ram_mb / 2
    assert t["llite.*.max_read_ahead_per_file_mb"] <= t["llite.*.max_read_ahead_mb"]
    assert 1 <= t["osc.*.max_rpcs_in_flight"] <= 256
    assert "osc.*.max_pages_per_rpc" not in t  # 1024 pages = 4 MiB is already the default (tiers.md)


def test_set_param_commands_are_permanent_and_scoped() -> None:
    cmds = lctl_set_param_commands({"osc.*.max_rpcs_in_flight": 32, "llite.*.max_read_ahead_mb": 1024}, "aifs")
    assert cmds == [
        "lctl set_param -P osc.aifs-OST*.max_rpcs_in_flight=32",
        "lctl set_param -P llite.aifs-*.max_read_ahead_mb=1024",
    ]


def test_lnet() -> None:
    """dossier 4.6: options lnet networks="o2ib0(ib0,...)"."""
    cfg = lnet_config(interfaces=["ibp41s0f0", "ibp170s0f0"])
    assert cfg["modprobe"] == 'options lnet networks="o2ib0(ibp41s0f0,ibp170s0f0)"'
    assert "lnet_conf_yaml" not in cfg  # the plan is data: the file is rendered on the way to the host
    assert "net type: o2ib0" in lnet_conf_yaml(cfg)
    with pytest.raises(PlanError, match=r"lnet_net"):
        lnet_config(interfaces=["ib0"], net="ethernet")


def _mount(mount_point: str = "/lustre/aifs") -> dict[str, Any]:
    return client_mount(
        mgs_nid="10.30.2.10@o2ib0",
        fsname="aifs",
        mount_point=mount_point,
        tunables=lustre_client_tunables(client_ram_gib=2048),
    )


def test_client_mount_names_its_unit_and_scopes_the_tunables() -> None:
    m = _mount()
    assert m["what"] == "10.30.2.10@o2ib0:/aifs" and m["where"] == "/lustre/aifs" and m["type"] == "lustre"
    assert "_netdev" in m["options"].split(",")
    assert m["unit_name"] == "lustre-aifs.mount"  # systemd-escape --path --suffix=mount /lustre/aifs
    assert m["unit_path"] == "/etc/systemd/system/lustre-aifs.mount"
    assert _mount("/mnt/ai-fs.1")["unit_name"] == "mnt-ai\\x2dfs.1.mount"
    # the same scoping as the MGS's permanent settings, without -P: this client's own
    assert [f"lctl set_param -P {p}" for p in m["set_param"]] == lctl_set_param_commands(
        lustre_client_tunables(client_ram_gib=2048), "aifs"
    )
    assert {"slurmd.service", "gpucluster-ckpt-drain.service", "kubelet.service"} <= set(m["before"])


def test_a_percent_in_the_mount_point_is_doubled_in_the_units() -> None:
    """Where=, What=, Description= resolve specifiers (systemd.unit(5)): a path's '%' is written '%%'."""
    m = _mount("/lustre/a%b")
    assert m["unit_name"] == "lustre-a\\x25b.mount"
    assert "Where=/lustre/a%%b\n" in mount_unit_text(m)
    assert "Requires=lustre-a\\x25b.mount\n" in tunables_unit_text(m)


@pytest.mark.parametrize("bad", ["lustre/aifs", "/lustre/aifs/", "/lustre/../etc", "/lustre/a fs", "/", "", None, 3])
def test_a_bad_mount_point_names_the_field(bad: Any) -> None:
    with pytest.raises(PlanError, match=r"gpucluster_storage\.lustre\.mount_point"):
        _mount(bad)


def test_mount_unit_orders_after_lnet_before_slurmd_without_requiring() -> None:
    """LNet and the network before the mount; slurmd, the drain and the runtimes after it, ordering only:
    nothing the mount cannot reach makes slurmd fail (systemd.unit(5): Before= orders, Requires= binds)."""
    text = mount_unit_text(_mount())
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert "What=10.30.2.10@o2ib0:/aifs" in lines and "Where=/lustre/aifs" in lines and "Type=lustre" in lines
    assert "After=network-online.target lnet.service" in lines
    assert "Wants=network-online.target lnet.service" in lines
    assert not any(line.startswith(("Requires=", "BindsTo=", "RequiredBy=")) for line in lines)
    before = next(line for line in lines if line.startswith("Before="))
    assert "slurmd.service" in before and "gpucluster-ckpt-drain.service" in before
    assert "WantedBy=remote-fs.target" in lines
    unit = tunables_unit_text(_mount())
    assert "Requires=lustre-aifs.mount" in unit and "After=lustre-aifs.mount" in unit
    assert "WantedBy=lustre-aifs.mount" in unit and "ConditionPathExists=/usr/sbin/lctl" in unit
    assert "ExecStart=/usr/sbin/lctl set_param osc.aifs-OST*.max_rpcs_in_flight=32 " in unit
    assert "set_param -P" not in unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_units_verify(tmp_path: Path) -> None:
    """systemd-analyze verify accepts both units; the tunables unit's only complaint on a host without
    the Lustre utilities is their missing lctl (the lab test runs the same check on the nodes)."""
    m = _mount()
    (tmp_path / m["unit_name"]).write_text(mount_unit_text(m))
    (tmp_path / m["tunables_unit"]).write_text(tunables_unit_text(m))
    run = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(tmp_path / m["unit_name"])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    run = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(tmp_path / m["tunables_unit"])],
        capture_output=True,
        text=True,
        check=False,
    )
    problems = [line for line in run.stderr.splitlines() if line.strip() and "/usr/sbin/lctl" not in line]
    assert not problems, run.stderr
    if Path("/usr/sbin/lctl").exists():
        assert run.returncode == 0, run.stderr
