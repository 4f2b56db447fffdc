"""Slurm against its tenants (slurm/tenancy.py): PrivateData, block_null_hash, pam_slurm_adopt's PAM
files and PrologFlags=Contain, in the plan and in the rendered files."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import tenancy


def _plan(tier: str = "tier3", lab: bool = False, **slurm: Any) -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    if slurm:
        site["gpucluster_slurm"] = {**(site.get("gpucluster_slurm") or {}), **slurm}
    if lab:
        site["gpucluster_lab"] = {"enabled": True, "slurm_proctrack": "proctrack/linuxproc", "slurm_prolog_flags": ""}
    return cluster_plan(site, groups)


@pytest.fixture(scope="module")
def tier3() -> dict[str, Any]:
    return _plan()


def _conf(text: str) -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in text.splitlines()
        if "=" in line and not line.startswith(("#", "NodeName", "Part"))
    )


def test_slurm_conf_hides_other_users_data_and_blocks_null_hash(tier3: dict[str, Any]) -> None:
    conf = _conf(render_role_template("slurm", "slurm.conf.j2", tier3, "compute01"))
    assert set(conf["PrivateData"].split(",")) == {"accounts", "events", "jobs", "reservations", "usage", "users"}
    # nodes and partitions stay visible: sinfo is how users place jobs
    assert "nodes" not in conf["PrivateData"] and "partitions" not in conf["PrivateData"]
    assert conf["CommunicationParameters"] == "block_null_hash"
    assert conf["PrologFlags"] == "Contain"


def test_slurmdbd_hides_other_users_accounting(tier3: dict[str, Any]) -> None:
    text = render_role_template("slurm", "slurmdbd.conf.j2", tier3, "head01", slurm_db_password="x")
    assert "PrivateData=accounts,events,jobs,reservations,usage,users\n" in text


def test_adoption_adds_contain_to_the_labs_empty_prolog_flags() -> None:
    plan = _plan(lab=True)
    # the extern step pam_slurm_adopt adopts into exists with the lab's proctrack/linuxproc too
    assert plan["slurm"]["plugins"]["prolog_flags"] == "Contain"
    assert plan["slurm"]["plugins"]["proctrack_type"] == "proctrack/linuxproc"


def test_adoption_off_keeps_the_prolog_flags_and_the_sshd_line_away() -> None:
    plan = _plan(lab=True, pam_slurm_adopt=False)
    assert plan["slurm"]["plugins"]["prolog_flags"] == ""
    assert plan["slurm"]["tenancy"]["pam_adopt"]["enabled"] is False


@pytest.mark.parametrize(
    ("base", "expected"),
    [("", "Contain"), ("Alloc", "Alloc,Contain"), ("Contain", "Contain"), ("contain,X11", "contain,X11")],
)
def test_contain_is_added_once(base: str, expected: str) -> None:
    assert tenancy.tenancy_plan(None, base)["prolog_flags"] == expected


def test_pam_files_exempt_root_and_the_admin_group_then_adopt() -> None:
    plan = _plan(admin_group="hpc-admins")
    pam = render_role_template("slurm", "pam-slurm-adopt.j2", plan, "compute01")
    lines = [line for line in pam.splitlines() if line and not line.startswith("#")]
    assert lines == [
        "account sufficient pam_access.so accessfile=/etc/security/gpucluster-slurm-adopt-access.conf",
        "account required pam_slurm_adopt.so action_no_jobs=deny action_unknown=newest "
        "action_adopt_failure=deny action_generic_failure=deny",
    ]
    access = render_role_template("slurm", "slurm-adopt-access.conf.j2", plan, "compute01")
    rules = [line for line in access.splitlines() if line and not line.startswith("#")]
    # first match wins: root and the admins before the catch-all
    assert rules == ["+:root:ALL", "+:(hpc-admins):ALL", "-:ALL:ALL"]


def test_the_pam_files_are_planned_for_compute_nodes_only(tier3: dict[str, Any]) -> None:
    dests = {h: {f["dest"] for f in files} for h, files in files_by_host(tier3).items()}
    for host, roles in ((h, tier3["hosts"][h]["roles"]) for h in tier3["hosts"]):
        planned = "/etc/pam.d/gpucluster-slurm-adopt" in dests.get(host, set())
        assert planned == ("compute" in roles), host


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("admin_group", "root"),
        ("admin_group", "Admins"),
        ("admin_group", "a b"),
        ("admin_group", ""),
        ("admin_group", 7),
        ("pam_slurm_adopt", "yes"),
    ],
)
def test_bad_values_are_refused_with_their_field(field: str, value: Any) -> None:
    with pytest.raises(PlanError, match=f"gpucluster_slurm.{field}"):
        tenancy.tenancy_plan({field: value}, "")
