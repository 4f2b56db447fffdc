"""Backup Slurm controllers: SlurmctldHost order, the shared StateSaveLocation and its mount,
SlurmctldTimeout (docs/sources.md [SL20]); tier1-3 keep one controller and a local state folder."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import ha

ADDRESSES = {"hosts": {"head01": {"management": "10.0.0.10"}, "ctl02": {"management": "10.0.0.30"}}}
MOUNT = {"what": "filer:/export/slurm", "type": "nfs"}


def _tier4(**slurm: Any) -> dict[str, Any]:
    site, groups = load_inventory("tier4")
    site = copy.deepcopy(site)
    site["gpucluster_slurm"] = {**site["gpucluster_slurm"], **slurm}
    return cluster_plan(site, groups)


@pytest.fixture(scope="module")
def tier4() -> dict[str, Any]:
    return _tier4()


def test_one_controller_keeps_its_state_on_the_head() -> None:
    plan = ha.ha_plan(None, primary="head01", backups=[], addresses=ADDRESSES, lab={})
    assert plan == {
        "enabled": False,
        "controllers": [{"name": "head01", "address": "10.0.0.10", "role": "primary"}],
        "backups": [],
        "state_save_location": "/var/lib/slurm/slurmctld",
        "state_save_mount": None,
        "slurmctld_timeout_s": 120,  # slurm.conf(5) default [SL20]
        "primary_on": None,  # no takeover: no hook
        "slurmctld_kill_mode": None,  # systemd's default: only the lab sets one (gpucluster_lab)
    }


def test_a_backup_comes_after_the_primary_with_shared_state() -> None:
    section = {"state_save_location": "/var/spool/slurmctld/", "state_save_mount": MOUNT, "slurmctld_timeout_s": 60}
    plan = ha.ha_plan(section, primary="head01", backups=["ctl02"], addresses=ADDRESSES, lab={})
    assert [(c["name"], c["role"]) for c in plan["controllers"]] == [("head01", "primary"), ("ctl02", "backup")]
    assert plan["enabled"] and plan["backups"] == ["ctl02"]
    assert plan["state_save_location"] == "/var/spool/slurmctld"
    mount = plan["state_save_mount"]
    assert mount["where"] == "/var/spool/slurmctld" and mount["options"] == "rw,hard,proto=tcp,vers=4.2"
    assert mount["unit_name"] == "var-spool-slurmctld.mount"
    assert "unit_text" not in mount  # the plan is data: the unit is rendered on the way to the controllers
    unit = ha.state_mount_unit_text(mount)
    assert "What=filer:/export/slurm\nWhere=/var/spool/slurmctld\nType=nfs\n" in unit
    assert "Before=slurmctld.service" in unit
    assert plan["slurmctld_timeout_s"] == 60
    # the takeover hook holds GPU nodes for 1.5 x SlurmctldTimeout (a slurmd's retries) + 30 s
    assert plan["primary_on"] == {
        "program": "/usr/local/sbin/gpucluster-slurmctld-primary-on",
        "off_program": "/usr/local/sbin/gpucluster-slurmctld-primary-off",
        "config": {
            "hold_s": 120,
            "poll_s": 2,
            "answer_poll_s": 0.1,
            "reason": "slurmctld-takeover: slurmd not registered yet",
            "hosts": ["head01", "ctl02"],  # every controller: the window opens at a takeover and a hand-back
            "state_dir": "/var/lib/gpucluster/slurmctld",
        },
        # a backup that handed control back restarts (Slurm 22.05: one takeover per slurmctld process)
        "standby_restart": {
            "unit": "gpucluster-slurmctld-standby",
            "request": "/var/lib/gpucluster/slurmctld/restart-request",
            "in_control": "/var/lib/gpucluster/slurmctld/in-control",
        },
    }


def test_the_lab_shortens_the_timeout_and_lustre_has_its_own_options() -> None:
    section = {
        "state_save_location": "/ctl",
        "state_save_mount": {"what": "10.0.2.10@o2ib0:/aifs/slurm", "type": "lustre"},
    }
    lab = {"slurmctld_timeout_s": 30, "slurmctld_kill_mode": "process"}
    plan = ha.ha_plan(section, primary="head01", backups=["ctl02"], addresses=ADDRESSES, lab=lab)
    assert plan["slurmctld_timeout_s"] == 30
    assert plan["slurmctld_kill_mode"] == "process"  # the lab's drop-in (cgroup v1 containers, docs/lab.md)
    assert plan["state_save_mount"]["options"] == "defaults,_netdev,flock"


@pytest.mark.parametrize(
    ("section", "field", "fragment"),
    [
        ({}, "gpucluster_slurm.state_save_location", "shared storage when groups.slurm_backup"),
        ({"state_save_location": "/s"}, "gpucluster_slurm.state_save_mount", "{what, type, options}"),
        (
            {"state_save_location": "/s", "state_save_mount": {"what": "filer"}},
            "gpucluster_slurm.state_save_mount.what",
            "SERVER:/PATH",
        ),
        (
            {"state_save_location": "/s", "state_save_mount": {**MOUNT, "type": "cifs"}},
            "gpucluster_slurm.state_save_mount.type",
            "nfs",
        ),
        (
            {"state_save_location": "/s", "state_save_mount": {**MOUNT, "options": "rw;rm -rf"}},
            "gpucluster_slurm.state_save_mount.options",
            "mount options",
        ),
        (
            {"state_save_location": "/", "state_save_mount": MOUNT},
            "gpucluster_slurm.state_save_location",
            "not '/' itself",
        ),
        (
            {"state_save_location": "/s", "state_save_mount": MOUNT, "slurmctld_timeout_s": 70000},
            "gpucluster_slurm.slurmctld_timeout_s",
            "65533",
        ),
    ],
)
def test_a_backup_needs_a_shared_state(section: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(PlanError) as err:
        ha.ha_plan(section, primary="head01", backups=["ctl02"], addresses=ADDRESSES, lab={})
    assert err.value.field == field
    assert fragment in str(err.value)


def test_tier4_renders_both_controllers_in_slurm_conf(tier4: dict[str, Any]) -> None:
    conf = render_role_template("slurm", "slurm.conf.j2", tier4, "compute01")
    lines = conf.splitlines()
    assert [x for x in lines if x.startswith("SlurmctldHost=")] == [
        f"SlurmctldHost=head01({tier4['hosts']['head01']['addresses']['management']})",
        f"SlurmctldHost=head02({tier4['hosts']['head02']['addresses']['management']})",
    ]
    assert "StateSaveLocation=/var/spool/slurmctld" in lines and "SlurmctldTimeout=120" in lines
    assert "AccountingStorageHost=head01" in lines  # slurmdbd stays on the primary only
    assert "SlurmctldPrimaryOnProg=/usr/local/sbin/gpucluster-slurmctld-primary-on" in lines


@pytest.mark.parametrize("tier", ["tier1", "tier2", "tier3"])
def test_one_controller_tiers_render_as_before(tier: str) -> None:
    site, groups = load_inventory(tier)
    plan = cluster_plan(site, groups)
    conf = render_role_template("slurm", "slurm.conf.j2", plan, plan["cluster"]["head"])
    assert conf.count("SlurmctldHost=") == 1 and "SlurmctldTimeout" not in conf
    assert "SlurmctldPrimaryOnProg" not in conf
    assert "StateSaveLocation=/var/lib/slurm/slurmctld\nSlurmdSpoolDir=" in conf


def test_the_backup_is_planned_last_and_moves_no_address(tier4: dict[str, Any]) -> None:
    site, groups = load_inventory("tier4")
    groups = {k: [h for h in v if h != "head02"] for k, v in groups.items() if k != "slurm_backup"}
    single = cluster_plan({**site, "gpucluster_slurm": {}}, groups)
    assert list(tier4["hosts"])[-1] == "head02"
    for name, host in single["hosts"].items():
        assert tier4["hosts"][name]["addresses"] == host["addresses"], name
    backup = tier4["hosts"]["head02"]
    assert backup["roles"] == ["slurm_backup"] and "storage" not in backup["addresses"]
    assert ["10.40.0.22", "head02.cluster.internal", "head02"] in tier4["etc_hosts"]


def test_the_backup_opens_slurmctld_and_gets_the_controller_files(tier4: dict[str, Any]) -> None:
    assert tier4["hosts"]["head02"]["firewall"]["tcp_ports"] == [6817, 9100]
    files = {f["dest"] for f in files_by_host(tier4)["head02"] if f["role"] == "slurm"}
    assert files == {
        "/etc/slurm/slurm.conf",
        "/etc/slurm/cgroup.conf",
        "/etc/slurm/topology.conf",
        "/etc/systemd/system/slurmctld.service.d/gpucluster-state.conf",
        "/etc/systemd/system/var-spool-slurmctld.mount",  # the planned mount unit (each: slurm_state_mount)
        "/usr/local/sbin/gpucluster-slurmctld-primary-on",  # SlurmctldPrimaryOnProg, the takeover hook
        "/etc/slurm/gpucluster-primary-on.json",
        "/usr/local/sbin/gpucluster-slurmctld-primary-off",  # SlurmctldPrimaryOffProg, a shell wrapper
        "/etc/systemd/system/gpucluster-slurmctld-standby.path",
        "/etc/systemd/system/gpucluster-slurmctld-standby.service",
    }
    head = {f["dest"] for f in files_by_host(tier4)["head01"]}
    controller = {
        "/etc/systemd/system/slurmctld.service.d/gpucluster-state.conf",
        "/usr/local/sbin/gpucluster-slurmctld-primary-on",  # SlurmctldPrimaryOnProg, the takeover hook
        "/etc/slurm/gpucluster-primary-on.json",
        "/usr/local/sbin/gpucluster-slurmctld-primary-off",  # SlurmctldPrimaryOffProg, a shell wrapper
        "/etc/systemd/system/gpucluster-slurmctld-standby.path",
        "/etc/systemd/system/gpucluster-slurmctld-standby.service",
    }
    assert controller <= head
    hook = json.loads(render_role_template("slurm", "slurmctld-primary-on.json.j2", tier4, "head02", core_filters=True))
    assert hook == tier4["slurm"]["ha"]["primary_on"]["config"]
    assert "/etc/systemd/system/slurmctld.service.d/gpucluster-state.conf" not in {
        f["dest"] for f in files_by_host(tier4)["compute01"]
    }
    dropin = render_role_template("slurm", "slurmctld-state.conf.j2", tier4, "head02")
    assert "RequiresMountsFor=/var/spool/slurmctld\n" in dropin


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"head": ["head01", "head02"]}, "groups.head"),
        ({"compute": [f"compute0{i}" for i in range(1, 9)] + ["head02"]}, "groups.slurm_backup"),
    ],
)
def test_a_backup_is_a_host_of_its_own(change: dict[str, list[str]], field: str) -> None:
    site, groups = load_inventory("tier4")
    with pytest.raises(PlanError) as err:
        cluster_plan(site, {**groups, **change})
    assert err.value.field == field
