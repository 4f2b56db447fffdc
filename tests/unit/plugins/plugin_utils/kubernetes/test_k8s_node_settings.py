"""The Kubernetes path's node settings (plan kubernetes.node, kubernetes/tenancy.py node_settings): containerd's
LimitMEMLOCK drop-in and the team folders the PersistentVolumes point to (docs/kubernetes.md, "Tenant isolation")."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes import tenancy


@pytest.fixture(scope="module")
def inventory() -> tuple[dict[str, Any], dict[str, list[str]]]:
    return load_inventory("tier4-k8s")


@pytest.fixture(scope="module")
def plan(inventory: tuple[dict[str, Any], dict[str, list[str]]]) -> dict[str, Any]:
    return cluster_plan(*inventory)


def _pv_folders(plan: dict[str, Any]) -> set[str]:
    return {
        m["object"]["spec"]["hostPath"]["path"]
        for m in plan["kubernetes"]["manifests"]
        if m["object"]["kind"] == "PersistentVolume"
    }


def test_every_persistent_volume_folder_is_created_and_nothing_else(plan: dict[str, Any]) -> None:
    folders = plan["kubernetes"]["node"]["team_folders"]
    assert {f["path"] for f in folders} == _pv_folders(plan)
    assert len(folders) == len(_pv_folders(plan)) == 3 * 5  # 3 teams x 3 shared paths, scratch, staging
    assert {(f["owner"], f["group"], f["mode"]) for f in folders} == {("root", "root", "1777")}
    assert "/lustre/aifs/checkpoints/research" in {f["path"] for f in folders}
    assert "/raid/checkpoint-staging/interns" in {f["path"] for f in folders}
    # only the keys gpucluster.tiers.host_state takes (the role passes the list as is)
    assert {k for f in folders for k in f} == {"path", "owner", "group", "mode"}


def test_shared_file_system_folders_wait_for_its_mount(plan: dict[str, Any]) -> None:
    mounts = plan["kubernetes"]["node"]["team_folder_mounts"]
    assert list(mounts) == ["/lustre/aifs"]
    assert all(p.startswith("/lustre/aifs/") for p in mounts["/lustre/aifs"])
    assert len(mounts["/lustre/aifs"]) == 3 * 3
    # the node's own folders are made on every run
    local = {f["path"] for f in plan["kubernetes"]["node"]["team_folders"]} - set(mounts["/lustre/aifs"])
    assert local and all(p.startswith("/raid/") for p in local)


def test_containerd_memlock_is_unlimited_as_limits_conf(plan: dict[str, Any]) -> None:
    c = plan["kubernetes"]["node"]["containerd"]
    assert c["limit_memlock"] == "infinity"
    assert c["dropin"] == tenancy.CONTAINERD_DROPIN
    assert "limits.conf" in c["source"]
    files = yaml.safe_load((ROOT / "roles/compute/vars/files.yml").read_text())["compute_files"]
    entry = next(f for f in files if f["src"] == "containerd-memlock.conf.j2")
    assert entry["dest"] == tenancy.CONTAINERD_DROPIN and entry["if"] == "kubernetes"
    assert {"Reload systemd", "Restart containerd"} <= set(entry["notify"])


def test_the_lab_plans_its_memlock_limit_and_no_shared_mount(
    inventory: tuple[dict[str, Any], dict[str, list[str]]],
) -> None:
    site, groups = copy.deepcopy(inventory)
    site["gpucluster_lab"] = {"enabled": True, "memlock_kb": 8192}
    node = cluster_plan(site, groups)["kubernetes"]["node"]
    assert node["containerd"]["limit_memlock"] == "8192K"  # systemd's K is KiB, as limits.conf's value
    assert "gpucluster_lab.memlock_kb" in node["containerd"]["source"]
    assert node["team_folder_mounts"] == {}


def test_systemd_memlock() -> None:
    assert tenancy.systemd_memlock("unlimited") == "infinity"
    assert tenancy.systemd_memlock("65536") == "65536K"


def test_a_team_named_like_a_nested_volume_is_refused() -> None:
    paths = {"scratch": "/raid", "checkpoint-staging": "/raid/checkpoint-staging"}
    with pytest.raises(PlanError) as err:
        tenancy.node_settings("unlimited", "x", paths, ["research", "checkpoint-staging"], [])
    assert err.value.field == "gpucluster_tenants[1].name"
    assert "checkpoint-staging" in str(err.value) and "/raid/checkpoint-staging" in str(err.value)
    # no clash: one folder per team and volume
    ok = tenancy.node_settings("unlimited", "x", paths, ["research"], [])
    assert [f["path"] for f in ok["team_folders"]] == ["/raid/checkpoint-staging/research", "/raid/research"]


def test_a_team_named_like_a_nested_volume_is_refused_by_the_plan(
    inventory: tuple[dict[str, Any], dict[str, list[str]]],
) -> None:
    site, groups = copy.deepcopy(inventory)
    site["gpucluster_tenants"][2]["name"] = "checkpoint-staging"
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    assert err.value.field == "gpucluster_tenants[2].name"
