"""BeeGFS: the services' configuration [B1], the mounts file [B3] and the stripe patterns [B2], which
come from the same decision as the Lustre layouts (storage/lustre.py) for the same target count."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import cluster_plan, load_inventory
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import beegfs
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.lustre import lustre_layouts

EXAMPLE = "examples/tier3-beegfs"
PATHS = {"checkpoints": "/b/ckpt", "datasets": "/b/data", "home": "/b/home"}


def _plan(site_change: dict[str, Any] | None = None, **change: Any) -> dict[str, Any]:
    site, groups = load_inventory(EXAMPLE)
    site["gpucluster_storage"]["beegfs"].update(change)
    for key, value in (site_change or {}).items():
        site[key].update(value)
    return cluster_plan(site, groups)


def _conf(bg: dict[str, Any], service: str) -> str:
    """A service's configuration file, rendered from the plan's settings as the roles render it."""
    return beegfs.service_conf_text(bg["settings"][service], service)


def _keys(text: str) -> dict[str, str]:
    """A BeeGFS config file as {key: value} (every non-comment line is 'key = value')."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, sep, value = line.partition(" = ")
            assert sep, line
            out[key] = value
    return out


@given(targets=st.integers(1, 512))
def test_patterns_are_the_lustre_layouts_last_component(targets: int) -> None:
    """One decision: the chunk size and target count of the Lustre layout's large-file component."""
    layouts = lustre_layouts(ost_count=targets, paths=PATHS)
    for role, pattern in beegfs.stripe_patterns(PATHS, targets).items():
        last = layouts[role]["components"][-1]
        assert pattern["chunksize"] == last["stripe_size"]
        assert pattern["numtargets"] == (targets if last["stripe_count"] == -1 else last["stripe_count"])
        size = pattern["chunksize"]
        assert size >= 64 * 1024 and size & (size - 1) == 0  # [B2]
        assert 1 <= pattern["numtargets"] <= targets


def test_the_example_patterns_for_8_targets() -> None:
    bg = _plan()["storage"]["beegfs"]
    assert bg["target_count"] == 8  # 2 storage hosts x 4 directories
    assert [p["command"] for p in bg["patterns"].values()] == [
        "beegfs-ctl --setpattern --chunksize=16m --numtargets=8 /mnt/beegfs/checkpoints",
        "beegfs-ctl --setpattern --chunksize=4m --numtargets=8 /mnt/beegfs/datasets",
        "beegfs-ctl --setpattern --chunksize=1m --numtargets=1 /mnt/beegfs/home",
    ]


def test_a_chunk_size_that_is_no_power_of_two_is_refused() -> None:
    comps = [{"start": 0, "end": -1, "stripe_count": 2, "stripe_size": 3 * 64 * 1024, "layout": "raid0"}]
    with pytest.raises(PlanError) as caught:
        beegfs.stripe_pattern(comps, 8, "gpucluster_storage.paths.checkpoints")
    assert caught.value.field == "gpucluster_storage.paths.checkpoints.stripe_size"
    assert beegfs.stripe_pattern([{**comps[0], "stripe_size": 128 * 1024, "stripe_count": -1}], 8, "f") == {
        "chunksize": 128 * 1024,
        "numtargets": 8,
    }


def test_service_configs_name_the_management_host_directories_and_secret() -> None:
    bg = _plan()["storage"]["beegfs"]
    mgmtd, meta, storage, client = (_keys(_conf(bg, k)) for k in ("mgmtd", "meta", "storage", "client"))
    assert mgmtd["storeMgmtdDirectory"] == "/data/beegfs/mgmtd" and mgmtd["tuneNumWorkers"] == "4"
    for conf in (meta, storage, client):
        assert conf["sysMgmtdHost"] == "10.30.2.10"  # meta01 on the storage network
        assert conf["connAuthFile"] == "/etc/beegfs/conn.auth" and conf["connUseRDMA"] == "true"
    assert meta["storeMetaDirectory"] == "/data/beegfs/meta" and meta["tuneNumWorkers"] == "0"
    assert storage["storeStorageDirectory"].split(",") == [f"/data/beegfs/target{i}" for i in range(1, 5)]
    assert storage["tuneNumWorkers"] == "12"
    assert client["connRDMAInterfacesFile"] == "/etc/beegfs/client-rdma-interfaces"
    assert (bg["mount_point"], bg["files"]["client"]) == ("/mnt/beegfs", "/etc/beegfs/beegfs-client.conf")
    assert bg["client_interfaces"] == ["ibp41s0f0", "ibp170s0f0"]  # the storage NICs


def test_tcp_fabric_means_no_rdma_and_workers_follow_the_inventory() -> None:
    bg = _plan(rdma=False, tune_num_workers={"storage": 24})["storage"]["beegfs"]
    client = _keys(_conf(bg, "client"))
    assert client["connUseRDMA"] == "false" and client["connRDMAInterfacesFile"] == ""
    assert _keys(_conf(bg, "storage"))["tuneNumWorkers"] == "24"
    assert not bg["rdma"]  # no connRDMAInterfacesFile: the compute role's list skips client-rdma-interfaces


def test_the_files_go_to_each_service_and_the_clients() -> None:
    plan = _plan()
    dests = {h: {f["dest"] for f in fs} for h, fs in files_by_host(plan).items()}
    assert {"/etc/beegfs/beegfs-mgmtd.conf", "/etc/beegfs/beegfs-meta.conf"} <= dests["meta01"]
    assert "/etc/beegfs/beegfs-storage.conf" not in dests["meta01"]
    assert (
        "/etc/beegfs/beegfs-storage.conf" in dests["stor01"] and "/etc/beegfs/beegfs-meta.conf" not in dests["stor01"]
    )
    client = {
        "/etc/beegfs/beegfs-client.conf",
        "/etc/beegfs/beegfs-mounts.conf",
        "/etc/gpucluster/beegfs/patterns.list",
    }
    assert client <= dests["compute01"] and not client & dests["head01"]
    tier3 = cluster_plan(*load_inventory("tier3"))
    assert not any(f["dest"].startswith("/etc/beegfs") for fs in files_by_host(tier3).values() for f in fs)


@pytest.mark.parametrize("service", ["mgmtd", "meta", "storage", "client"])
def test_a_conf_file_is_rendered_from_the_settings_in_its_own_key_order(service: str) -> None:
    """The plan stores the settings, not the file; plan.json's sorted keys render the same bytes."""
    bg = _plan()["storage"]["beegfs"]
    assert "conf" not in bg  # the interface files and beegfs-mounts.conf: the roles' templates, from lists
    settings = bg["settings"][service]
    text = beegfs.service_conf_text(settings, service)
    assert text == beegfs.conf_text(settings, beegfs.SERVICE_CONF[service][0])  # the engine's order
    assert beegfs.service_conf_text(dict(sorted(settings.items())), service) == text
    assert list(settings) == [k for k in beegfs.SERVICE_CONF[service][1] if k in settings]


def test_a_conf_file_of_an_unknown_service_is_refused() -> None:
    with pytest.raises(PlanError) as err:
        beegfs.service_conf_text({}, "helperd")
    assert err.value.field == "service" and "mgmtd" in str(err.value)
