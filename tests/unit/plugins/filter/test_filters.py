"""Filters are thin: they call the engine and turn its errors into AnsibleFilterError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from conftest import ROOT, all_filters

from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat

FILTERS = all_filters()


def test_cluster_plan_filter_ignores_other_vars(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    site, groups = tier3
    plan = FILTERS["cluster_plan"]({**site, "ansible_host": "x", "gpucluster_plan": {"stale": True}}, groups)
    assert plan["cluster"]["name"] == "tier3"


@pytest.mark.parametrize(
    "name",
    [
        "gpucluster_plan",
        "gpucluster_host_plan",
        "gpucluster_plan_file",
        "gpucluster_lock_state",
        "gpucluster_shutdown_confirm",
    ],
)
def test_cluster_plan_filter_ignores_a_runs_variables(
    tier3: tuple[dict[str, Any], dict[str, list[str]]], name: str
) -> None:
    """Localhost's whole plan, a host's slice (gpucluster_host_plan) and the run's switches are not site
    data (site.RUN_PREFIXES): a value of them does not reach the engine, which would refuse an unknown key."""
    site, groups = tier3
    plan = FILTERS["cluster_plan"]({**site, name: {"stale": True}}, groups)
    assert plan == FILTERS["cluster_plan"](site, groups)


def test_engine_error_becomes_filter_error_naming_the_field(
    tier3: tuple[dict[str, Any], dict[str, list[str]]],
) -> None:
    site, groups = tier3
    site["gpucluster_node"] = {**site["gpucluster_node"], "gpu_model": "h900"}
    with pytest.raises(AnsibleFilterError, match=r"cluster_plan: inventory field 'gpucluster_node\.gpu_model'"):
        FILTERS["cluster_plan"](site, groups)


def test_question_filters() -> None:
    assert FILTERS["roce_traffic_class"](26) == 106
    assert FILTERS["gpu_model"]("h100_sxm")["max_sm_mhz"] == 1980
    with pytest.raises(AnsibleFilterError, match="sm_mhz"):
        FILTERS["gpu_clocks"]("h100_sxm", "fixed", sm_mhz=2505)
    with pytest.raises(AnsibleFilterError, match="input must be a mapping"):
        FILTERS["power_budget"]("not a mapping")


def test_every_filter_has_docs() -> None:
    """ansible-doc -t filter gpucluster.tiers.NAME works for every filter."""
    names = [f"gpucluster.tiers.{n}" for n in sorted(FILTERS)]
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-t", "filter", "--json", *names],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    docs = json.loads(out.stdout)
    assert sorted(docs) == names
    for name, doc in docs.items():
        assert doc["doc"]["short_description"], name
        assert doc["examples"], name


def test_a_misspelt_choice_gets_a_did_you_mean_and_the_file_it_was_set_in(
    tier3: tuple[dict[str, Any], dict[str, list[str]]],
) -> None:
    """The error a user reads names the inventory file and line (ansible-core's Origin tag on the
    value, as a group_vars file gives it) and the closest allowed value."""
    site, groups = tier3

    def where(value: Any) -> Any:
        return ansible_compat.tag_origin(value, "/site/group_vars/all/node.yml", 5)

    node = where({**site["gpucluster_node"], "gpu_model": where("h100_sxn")})
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS["cluster_plan"]({**site, "gpucluster_node": node}, groups)
    message = str(caught.value)
    assert "inventory field 'gpucluster_node.gpu_model': value 'h100_sxn' is not allowed" in message
    assert "did you mean 'h100_sxm'?" in message
    assert "(set in /site/group_vars/all/node.yml:5)" in message


def test_an_untagged_value_adds_no_file() -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.origin import origin

    assert origin("gpucluster_node.gpu_model", [{"gpucluster_node": {"gpu_model": "x"}}]) == ""
    assert origin("gpucluster_tenants.teams[3].share", [{}]) == ""


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("nccl_conf_text", ("not a mapping",)),
        ("nfs_mount_unit", ({"what": "a:/b"}, "nfs01")),
        ("slurm_state_mount_unit", (["what", "where"],)),
        ("lustre_client_unit", ({"what": "a@o2ib0:/b", "where": "/b"},)),
        ("beegfs_conf", ("not a mapping", "meta")),
        ("nvmet_config_json", ("{}",)),
        ("grafana_provisioning", (None, "datasource")),
        ("lnet_conf", ({"net": "o2ib0"},)),
        ("slurm_topology_conf", ("SwitchName=su01 Nodes=compute01",)),
        ("slurm_topology_conf", ({"name": "su01"},)),
        ("nvme_discovery_conf", (["10.0.0.1"],)),
        ("mig_parted_config", ("version: v1",)),
        # the mapping of configs the plan held before: its order was lost in plan.json
        ("mig_parted_config", ({"version": "v1", "mig-configs": {"all-disabled": []}},)),
    ],
)
def test_a_document_filter_refuses_what_is_not_the_plans_data(name: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(AnsibleFilterError, match=f"gpucluster.tiers.{name}: input must be"):
        FILTERS[name](*args)


def test_slurm_topology_conf_renders_tier3s_switches_and_a_hand_built_tree() -> None:
    from conftest import cluster_plan, load_inventory

    tier3 = cluster_plan(*load_inventory("tier3"))
    assert FILTERS["slurm_topology_conf"](tier3["fabric"]["slurm_topology"]) == (
        "# Managed by gpucluster.tiers: Slurm topology/tree from the fabric plan.\n"
        "# Each scalable unit (its hosts and all their rail leaves) is one logical switch.\n"
        "SwitchName=su01 Nodes=compute[01-04]\n"
    )
    two = [
        {"name": "su01", "kind": "su", "nodes": "gpu[01-32]"},
        {"name": "su02", "kind": "su", "nodes": "gpu[33-64]"},
        {"name": "spines", "kind": "spines", "switches": "su[01-02]"},
    ]
    assert FILTERS["slurm_topology_conf"](two).splitlines()[2:] == [
        "SwitchName=su01 Nodes=gpu[01-32]",
        "SwitchName=su02 Nodes=gpu[33-64]",
        "SwitchName=spines Switches=su[01-02]",
    ]
    assert FILTERS["slurm_topology_conf"]([]) == ""
    with pytest.raises(AnsibleFilterError, match=r"slurm_topology_conf: inventory field 'fabric\.slurm_topology\[0\]'"):
        FILTERS["slurm_topology_conf"]([{"name": "su01", "kind": "su"}])  # no nodes


def test_nvme_discovery_conf_renders_the_examples_targets_and_a_hand_built_case() -> None:
    from conftest import cluster_plan, load_inventory

    nvme = cluster_plan(*load_inventory("examples/tier2-nvmeof"))["storage"]["nvmeof"]
    assert FILTERS["nvme_discovery_conf"](nvme) == (
        "--transport=rdma --traddr=10.20.2.10 --trsvcid=4420 --nr-io-queues=224 --ctrl-loss-tmo=600\n"
    )
    hand = {"transport": "tcp", "trsvcid": 4421, "nr_io_queues": 4, "ctrl_loss_tmo": -1}
    assert FILTERS["nvme_discovery_conf"]({**hand, "discovery_addresses": ["192.0.2.1", "192.0.2.2"]}) == (
        "--transport=tcp --traddr=192.0.2.1 --trsvcid=4421 --nr-io-queues=4 --ctrl-loss-tmo=-1\n"
        "--transport=tcp --traddr=192.0.2.2 --trsvcid=4421 --nr-io-queues=4 --ctrl-loss-tmo=-1\n"
    )
    with pytest.raises(AnsibleFilterError, match=r"nvme_discovery_conf: inventory field 'storage\.nvmeof'"):
        FILTERS["nvme_discovery_conf"](hand)  # no discovery_addresses


def test_beegfs_conf_names_the_services_it_knows() -> None:
    with pytest.raises(AnsibleFilterError, match=r"beegfs_conf: inventory field 'service': value 'helperd'.*mgmtd"):
        FILTERS["beegfs_conf"]({}, "helperd")


def test_the_document_filters_render_a_plan_read_back_from_json_byte_for_byte() -> None:
    """plan.json sorts every mapping's keys: the filters give the files the plan's own order gives."""
    from conftest import cluster_plan, load_inventory

    for tier in ("tier2", "tier4"):
        plan = cluster_plan(*load_inventory(tier))
        sorted_plan = json.loads(json.dumps(plan, sort_keys=True))
        assert FILTERS["nccl_conf_text"](sorted_plan["nccl"]["conf"]) == FILTERS["nccl_conf_text"](plan["nccl"]["conf"])
        assert list(plan["nccl"]["conf"]) != sorted(plan["nccl"]["conf"])  # the order is the filter's, not the data's
        text = FILTERS["nccl_conf_text"](plan["nccl"]["conf"])
        assert text.splitlines()[2:] == [f"{k}={v}" for k, v in plan["nccl"]["conf"].items()]
    tier2 = cluster_plan(*load_inventory("tier2"))
    (mount,) = tier2["storage"]["nfs"]["client_mounts"]
    unit = FILTERS["nfs_mount_unit"](mount, tier2["storage"]["nfs"]["server"])
    assert "[Mount]\nWhat=10.20.2.10:/export/shared\nWhere=/shared\nType=nfs\n" in unit
    tier4 = cluster_plan(*load_inventory("tier4"))
    lustre = tier4["storage"]["lustre"]["client_mount"]
    unit = FILTERS["lustre_client_unit"](lustre)
    assert f"[Mount]\nWhat={lustre['what']}\nWhere={lustre['where']}\nType=lustre\n" in unit
    assert f"WantedBy={lustre['unit_name']}\n" in FILTERS["lustre_client_unit"](lustre, "tunables")
    with pytest.raises(AnsibleFilterError, match="kind must be mount or tunables"):
        FILTERS["lustre_client_unit"](lustre, "fstab")
    tier4 = cluster_plan(*load_inventory("tier4"))
    unit = FILTERS["slurm_state_mount_unit"](tier4["slurm"]["ha"]["state_save_mount"])
    assert "Before=slurmctld.service\n" in unit and unit.endswith("WantedBy=remote-fs.target\n")
    parted = cluster_plan(*load_inventory("examples/tier2-mig"))["gpu"]["mig"]["parted"]
    text = FILTERS["mig_parted_config"](parted)
    assert text.startswith("version: v1\nmig-configs:\n  all-disabled:\n")
    assert FILTERS["mig_parted_config"](json.loads(json.dumps(parted, sort_keys=True))) == text


def test_mig_parted_config_writes_values_ansible_tagged() -> None:
    """A playbook's own YAML gives ints and strings tagged with their origin (subclasses that yaml.safe_dump
    refuses): the filter writes them as plain values."""

    def tag(value: Any) -> Any:
        return ansible_compat.tag_origin(value, "/site/play.yml", 3)

    entry = {"devices": [tag(0), tag(1)], "mig-enabled": True, "mig-devices": {"3g.40gb": tag(2)}}
    parted = {"version": tag("v1"), "mig-configs": [{"name": tag("gpucluster-mig-0"), "devices": [entry]}]}
    assert FILTERS["mig_parted_config"](parted) == (
        "version: v1\nmig-configs:\n  gpucluster-mig-0:\n  - devices:\n    - 0\n    - 1\n"
        "    mig-enabled: true\n    mig-devices:\n      3g.40gb: 2\n"
    )


def test_every_filter_has_its_documentation() -> None:
    """ansible-doc -t filter gpucluster.tiers.<name> reads plugins/filter/<name>.yml."""
    assert sorted(n for n in FILTERS if not (ROOT / "plugins" / "filter" / f"{n}.yml").is_file()) == []
