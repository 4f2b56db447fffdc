"""NVMe-oF: the nvmetcli JSON of the targets, the initiators' NQNs and connect lines, remote scratch.

Sources (docs/sources.md): nvmetcli's restore [V1], Debian's nvme-cli [V2], NQN forms [V3], by-id paths [V4].
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import host_view
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import nvmeof

EXAMPLE = "examples/tier2-nvmeof"
UUID_NQN = re.compile(
    r"^nqn\.2014-08\.org\.nvmexpress:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)


def _plan(**change: Any) -> dict[str, Any]:
    site, groups = load_inventory(EXAMPLE)
    site["gpucluster_storage"]["nvmeof"].update(change)
    return cluster_plan(site, groups)


def check_restorable(config: dict[str, Any]) -> None:
    """What nvmetcli's Root.restore needs to rebuild this configuration without an error [V1].

    Hosts first (a subsystem's allowed_hosts are symlinks to hosts/<nqn>), every subsystem with an
    nqn, namespaces with nsid 1..8192 and a device path, ports with portid 1..8192 whose subsystems
    exist, attributes as the strings configfs files take."""
    assert set(config) == {"hosts", "subsystems", "ports"}
    hosts = [h["nqn"] for h in config["hosts"]]
    assert len(hosts) == len(set(hosts))
    names = []
    for sub in config["subsystems"]:
        names.append(sub["nqn"])
        assert set(sub["allowed_hosts"]) <= set(hosts), sub
        assert all(isinstance(v, str) for v in sub["attr"].values())
        nsids = [ns["nsid"] for ns in sub["namespaces"]]
        assert len(nsids) == len(set(nsids)) and all(1 <= n <= nvmeof.MAX_NSID for n in nsids)
        for ns in sub["namespaces"]:
            assert ns["device"]["path"].startswith("/dev/") and ns["enable"] == 1
            assert all(isinstance(v, str) for v in ns["device"].values())
    assert len(names) == len(set(names))
    for port in config["ports"]:
        assert 1 <= port["portid"] <= 8192
        assert set(port["addr"]) == {"trtype", "adrfam", "traddr", "trsvcid", "treq"}
        assert all(isinstance(v, str) for v in port["addr"].values())
        assert set(port["subsystems"]) <= set(names)


def test_the_example_target_is_what_nvmetcli_restores() -> None:
    nv = _plan()["storage"]["nvmeof"]
    target = nv["targets"]["nvme01"]
    check_restorable(target["config"])
    assert "config_json" not in target  # the plan is data: the file is rendered on the way to the target
    assert json.loads(nvmeof.target_config_json(target["config"])) == target["config"]
    port = target["config"]["ports"][0]
    # the target's storage-network address, RDMA, the IANA port [V3]
    assert port["addr"] == {
        "trtype": "rdma",
        "adrfam": "ipv4",
        "traddr": "10.20.2.10",
        "trsvcid": "4420",
        "treq": "not specified",
    }
    assert nv["target_modules"] == ["nvmet", "nvmet-rdma"]  # modules-load.d: a module a line (the template)


def test_each_node_sees_only_its_own_namespaces() -> None:
    nv = _plan()["storage"]["nvmeof"]
    config = nv["targets"]["nvme01"]["config"]
    assert len(config["subsystems"]) == 2  # one per compute node
    for sub in config["subsystems"]:
        assert sub["attr"]["allow_any_host"] == "0" and len(sub["allowed_hosts"]) == 1
    mine = {c: {ns["device"] for ns in x["namespaces"]} for c, x in nv["clients"].items()}
    assert mine == {"compute01": {"/dev/nvme1n1", "/dev/nvme2n1"}, "compute02": {"/dev/nvme3n1", "/dev/nvme4n1"}}
    assert nv["namespaces_per_client"] == 2 and nv["unexported"] == 0
    for client, x in nv["clients"].items():
        sub = next(s for s in config["subsystems"] if s["nqn"] == x["namespaces"][0]["subsystem"])
        assert sub["allowed_hosts"] == [x["host_nqn"]], client


def test_nqns_are_the_uuid_form_stable_and_paired_with_the_host_id() -> None:
    a, b = _plan()["storage"]["nvmeof"], _plan()["storage"]["nvmeof"]
    assert a["clients"] == b["clients"]  # no state: the same inventory, the same names
    for x in a["clients"].values():
        assert UUID_NQN.match(x["host_nqn"]) and x["host_nqn"].endswith(x["host_id"])
        for ns in x["namespaces"]:
            assert UUID_NQN.match(ns["subsystem"])
            assert ns["by_id"].startswith("/dev/disk/by-id/nvme-uuid.")  # [V4]
    named = _plan(nqn_prefix="nqn.2024-01.org.example")["storage"]["nvmeof"]["clients"]["compute01"]
    assert named["host_nqn"] == "nqn.2024-01.org.example:host:compute01.cluster.internal"


def test_discovery_conf_has_one_connect_line_per_target() -> None:
    nv = _plan(nr_io_queues=32, ctrl_loss_tmo=-1, transport="tcp")["storage"]["nvmeof"]
    assert "discovery_conf" not in nv and nv["discovery_addresses"] == ["10.20.2.10"]
    assert nvmeof.discovery_conf_text(nv) == (
        "--transport=tcp --traddr=10.20.2.10 --trsvcid=4420 --nr-io-queues=32 --ctrl-loss-tmo=-1\n"
    )
    default = _plan()["storage"]["nvmeof"]
    assert default["ctrl_loss_tmo"] == 600  # NVMF_DEF_CTRL_LOSS_TMO [V2]
    assert default["nr_io_queues"] == 2 * 56 * 2  # nvme-cli's default: the CPU count [V2]


def test_discovery_conf_of_a_hand_built_case_and_of_a_compute_nodes_slice() -> None:
    """A line a target address, in the data's order; a compute node's slice (targets narrowed away) renders
    the same file as the whole plan."""
    nv = {"transport": "tcp", "trsvcid": 4420, "nr_io_queues": 8, "ctrl_loss_tmo": 600}
    text = nvmeof.discovery_conf_text({**nv, "discovery_addresses": ["10.0.0.2", "10.0.0.1"]})
    assert text.splitlines() == [
        "--transport=tcp --traddr=10.0.0.2 --trsvcid=4420 --nr-io-queues=8 --ctrl-loss-tmo=600",
        "--transport=tcp --traddr=10.0.0.1 --trsvcid=4420 --nr-io-queues=8 --ctrl-loss-tmo=600",
    ]
    assert nvmeof.discovery_conf_text({**nv, "discovery_addresses": []}) == ""
    with pytest.raises(PlanError, match=r"'storage\.nvmeof'.*discovery_addresses"):
        nvmeof.discovery_conf_text(nv)
    with pytest.raises(PlanError, match=r"'storage\.nvmeof\.discovery_addresses': value \[None\]"):
        nvmeof.discovery_conf_text({**nv, "discovery_addresses": [None]})
    plan = cluster_plan(*load_inventory(EXAMPLE))
    view = host_view(plan, "compute01")["storage"]["nvmeof"]
    assert view["targets"] == {} and nvmeof.discovery_conf_text(view) == nvmeof.discovery_conf_text(
        plan["storage"]["nvmeof"]
    )


def test_slots_spread_a_nodes_namespaces_over_the_targets() -> None:
    slots = nvmeof.assign_slots(["t1", "t2"], ["/dev/a", "/dev/b"], ["c1", "c2"], "f")
    assert [(s.client, s.target, s.device, s.nsid) for s in slots] == [
        ("c1", "t1", "/dev/a", 1),
        ("c1", "t2", "/dev/a", 1),
        ("c2", "t1", "/dev/b", 1),
        ("c2", "t2", "/dev/b", 1),
    ]
    three = nvmeof.assign_slots(["t1"], ["/dev/a", "/dev/b", "/dev/c", "/dev/d"], ["c1", "c2", "c3"], "f")
    assert len(three) == 3  # one each, one device left over
    with pytest.raises(PlanError) as caught:
        nvmeof.assign_slots(["t1"], ["/dev/a"], ["c1", "c2"], "gpucluster_storage.nvmeof")
    assert caught.value.field == "gpucluster_storage.nvmeof.devices"


def test_remote_scratch_is_local_nvme_on_the_namespaces() -> None:
    nv = _plan()["storage"]["nvmeof"]
    scratch = nv["clients"]["compute01"]["scratch"]
    by_id = [ns["by_id"] for ns in nv["clients"]["compute01"]["namespaces"]]
    assert scratch["devices"] == by_id and scratch["raid_level"] == "raid0"
    assert scratch["mdadm_create_argv"][-2:] == by_id
    assert scratch["mount_point"] == "/scratch" and scratch["mkfs_argv"] == ["mkfs.xfs", "/dev/md/nvmeof"]
    assert [d["path"] for d in scratch["directories"]] == ["/scratch/checkpoints", "/scratch/datasets"]
    allowed = _plan(allow_format=True, allow_format_devices=[f"compute01:{by_id[0]}"])["storage"]["nvmeof"]
    assert allowed["clients"]["compute01"]["scratch"]["allow_format_devices"] == {"compute01": [by_id[0]]}
    assert allowed["clients"]["compute02"]["scratch"]["allow_format_devices"] == {"compute02": []}


def test_a_host_receives_only_its_own_part() -> None:
    plan = _plan()
    view = host_view(plan, "compute01")
    assert list(view["storage"]["nvmeof"]["clients"]) == ["compute01"]
    assert view["storage"]["nvmeof"]["targets"] == {}
    assert list(host_view(plan, "nvme01")["storage"]["nvmeof"]["targets"]) == ["nvme01"]


def test_the_files_go_to_targets_and_initiators() -> None:
    files = files_by_host(_plan())
    dests = {h: {f["dest"] for f in fs} for h, fs in files.items()}
    assert {"/etc/nvmet/config.json", "/etc/modules-load.d/gpucluster-nvmet.conf"} <= dests["nvme01"]
    assert {"/etc/nvme/discovery.conf", "/etc/nvme/hostnqn", "/etc/nvme/hostid"} <= dests["compute01"]
    assert "/etc/nvme/discovery.conf" not in dests["head01"]
    tier2 = cluster_plan(*load_inventory("tier2"))
    assert not any(f["dest"].startswith("/etc/nvme") for fs in files_by_host(tier2).values() for f in fs)
