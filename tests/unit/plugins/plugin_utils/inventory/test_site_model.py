"""The site model (inventory/site.py ``load_site``) decides the default of every optional field the plan
reads, once: the node's GPU software, limits and intra-node floor, the cluster's scheduler, the storage
model (rated write, paths, scratch, server interfaces, the kinds' sections, the shared mount points), the
Lustre model's targets and layouts, the fabric's topology, link rate and settings, the GPU policy, the NTP
servers and the sections their modules check themselves (tenants, slurm, containers, rollout). The plan
(plan/assembly.py) reads these fields, never the raw inventory (tests/unit/plugins/plugin_utils/plan/
test_pipeline.py checks that)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import TIERS, cluster_plan, load_inventory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import (
    Fabric,
    GpuPolicy,
    Lustre,
    Storage,
    load_site,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import tier_profile


def _inventory(tier: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    raw, groups = load_inventory(tier)
    return copy.deepcopy(raw), groups


def _without(section: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in section.items() if k not in keys}


# --- the fabric -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
def test_an_unset_topology_is_the_tiers(tier: str) -> None:
    raw, groups = _inventory(tier)
    raw["gpucluster_fabric"] = _without(raw["gpucluster_fabric"], "topology")
    s = load_site(raw, groups)
    expected = "none" if s.fabric_model.type == "none" else tier_profile(tier).topology
    assert s.fabric_model.topology == expected
    assert cluster_plan(raw, groups)["fabric"]["topology"] == expected


def test_an_unset_link_rate_is_the_first_compute_nics_then_4x_ndr() -> None:
    raw, groups = _inventory("tier3")
    raw["gpucluster_fabric"] = _without(raw["gpucluster_fabric"], "link_rate_gbps")
    for nic in raw["gpucluster_node"]["nics"]:
        if nic["purpose"] == "compute":
            nic["rate_gbps"] = 200
    s = load_site(raw, groups)
    assert s.fabric_model.link_rate_gbps == 200
    assert cluster_plan(raw, groups)["fabric"]["link_rate_gbps"] == 200
    for nic in raw["gpucluster_node"]["nics"]:
        nic.pop("rate_gbps", None)
    assert load_site(raw, groups).fabric_model.link_rate_gbps == 400  # 4x NDR, docs/sources.md [IV6]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rate=st.sampled_from([100, 200, 400, 800]), topology=st.sampled_from(["rail_optimized", "fat_tree"]))
def test_the_fabric_fields_the_site_sets_win(rate: int, topology: str) -> None:
    raw, groups = _inventory("tier4")
    raw["gpucluster_fabric"] = {**raw["gpucluster_fabric"], "link_rate_gbps": rate, "topology": topology}
    for nic in raw["gpucluster_node"]["nics"]:  # a compute NIC is no slower than the fabric (inventory/rules.py)
        if nic.get("purpose") == "compute":
            nic["rate_gbps"] = max(rate, nic.get("rate_gbps") or 0)
    f = load_site(raw, groups).fabric_model
    assert (f.link_rate_gbps, f.topology, f.type) == (rate, topology, raw["gpucluster_fabric"]["type"])
    assert (f.infiniband, f.roce) == (raw["gpucluster_fabric"].get("infiniband"), None)


def test_no_fabric_has_topology_none_and_a_bad_tier_still_names_itself() -> None:
    raw, groups = _inventory("tier1")
    raw["gpucluster_fabric"] = {"type": "none"}
    assert load_site(raw, groups).fabric_model == Fabric(
        type="none", topology="none", link_rate_gbps=load_site(raw, groups).fabric_model.link_rate_gbps
    )
    raw["gpucluster_cluster"] = {**raw["gpucluster_cluster"], "tier": "tier9"}
    with pytest.raises(PlanError, match=r"gpucluster_cluster\.tier"):
        load_site(raw, groups)


# --- storage and Lustre ---------------------------------------------------------------------------


def test_the_storage_models_defaults() -> None:
    raw, groups = _inventory("tier2")
    raw["gpucluster_storage"] = _without(
        raw["gpucluster_storage"], "rated_write_gbps", "paths", "local_scratch", "server_interfaces"
    )
    m = load_site(raw, groups).storage_model
    assert (m.type, m.rated_write_gbps, m.paths, m.local_scratch) == ("nfs", None, {}, None)
    # no server interfaces anywhere: none; an error names the last field looked at, the Lustre section's
    assert (m.server_interfaces, m.server_interfaces_field) == ([], "gpucluster_storage.lustre.server_interfaces")
    assert (m.nvmeof, m.beegfs, m.local_nvme) == ({}, {}, {})
    assert m.nfs == raw["gpucluster_storage"]["nfs"]
    assert m.mount_points == ("/shared",)  # the NFS exports' mount points
    assert Storage().paths == {} and Storage().mount_points == ()


@pytest.mark.parametrize("tier", TIERS)
def test_the_plan_reads_the_storage_model(tier: str) -> None:
    raw, groups = _inventory(tier)
    s = load_site(raw, groups)
    plan = cluster_plan(raw, groups)
    m = s.storage_model
    assert (plan["storage"]["type"], plan["storage"]["paths"], plan["storage"]["local_scratch"]) == (
        m.type,
        m.paths,
        m.local_scratch,
    )
    assert m.paths == (raw["gpucluster_storage"].get("paths") or {})
    assert m.rated_write_gbps == raw["gpucluster_storage"].get("rated_write_gbps")


def test_lustre_server_interfaces_fall_back_both_ways() -> None:
    raw, groups = _inventory("tier3")
    servers = raw["gpucluster_storage"]["server_interfaces"]
    # only the Lustre section names them: the storage servers' are those, and an error names that field
    lustre = {**raw["gpucluster_storage"]["lustre"], "server_interfaces": servers}
    raw["gpucluster_storage"] = {**_without(raw["gpucluster_storage"], "server_interfaces"), "lustre": lustre}
    s = load_site(raw, groups)
    assert s.storage_model.server_interfaces == servers
    assert s.storage_model.server_interfaces_field == "gpucluster_storage.lustre.server_interfaces"
    assert s.lustre_model.server_interfaces == servers
    plan = cluster_plan(raw, groups)
    assert (
        plan["storage"]["lustre"]["server_lnet"]
        == cluster_plan(*load_inventory("tier3"))["storage"]["lustre"]["server_lnet"]
    )
    # only gpucluster_storage names them: Lustre's own is unset and its LNet uses the storage servers'
    raw, groups = _inventory("tier3")
    s = load_site(raw, groups)
    assert s.lustre_model.server_interfaces is None
    assert s.storage_model.server_interfaces_field == "gpucluster_storage.server_interfaces"


def test_a_bad_server_interface_list_still_names_its_field() -> None:
    raw, groups = _inventory("tier3")
    lustre = {**raw["gpucluster_storage"]["lustre"], "server_interfaces": ["ib0", "ib0"]}
    raw["gpucluster_storage"] = {**_without(raw["gpucluster_storage"], "server_interfaces"), "lustre": lustre}
    with pytest.raises(PlanError, match=r"gpucluster_storage\.lustre\.server_interfaces"):
        cluster_plan(raw, groups)


def test_the_lustre_models_fields_are_the_sections() -> None:
    raw, groups = _inventory("tier3")
    lu = raw["gpucluster_storage"]["lustre"]
    m = load_site(raw, groups).lustre_model
    assert (m.osts_per_oss, m.mdt_devices, m.ost_devices) == (lu["osts_per_oss"], lu["mdt_devices"], lu["ost_devices"])
    assert (m.allow_format_devices, m.layouts) == (lu.get("allow_format_devices"), lu.get("layouts"))
    # unset: None, which the plan's checks name (osts_per_oss is required for Lustre)
    assert (Lustre().osts_per_oss, Lustre().layouts, Lustre().server_interfaces) == (None, None, None)
    raw["gpucluster_storage"]["lustre"] = _without(lu, "osts_per_oss")
    assert load_site(raw, groups).lustre_model.osts_per_oss is None
    with pytest.raises(PlanError, match=r"gpucluster_storage\.lustre\.osts_per_oss"):
        cluster_plan(raw, groups)


# --- node, cluster, policy, network and the self-checked sections ---------------------------------


def test_the_node_cluster_policy_and_network_defaults() -> None:
    raw, groups = _inventory("tier3")
    for key in ("gpu_software", "gpu_limits", "allreduce_intra_node_busbw_gbs"):
        raw["gpucluster_node"].pop(key, None)
    raw["gpucluster_cluster"] = _without(raw["gpucluster_cluster"], "scheduler")
    raw["gpucluster_network"] = _without(raw["gpucluster_network"], "ntp_servers")
    raw["gpucluster_gpu_policy"] = {}
    for key in ("gpucluster_tenants", "gpucluster_slurm", "gpucluster_containers", "gpucluster_rollout"):
        raw.pop(key, None)
    s = load_site(raw, groups)
    assert (s.node.gpu_software, s.node.gpu_limits, s.node.allreduce_intra_node_busbw_gbs) == (None, None, None)
    assert (s.scheduler, s.ntp_servers, s.policy_model) == ("slurm", [], GpuPolicy())
    assert s.policy_model.clock_policy == "max_performance"
    assert (s.tenants, s.slurm, s.slurm_health, s.containers, s.rollout) == (None, None, None, None, None)
    assert s.facility_model.ups == raw["gpucluster_facility"].get("ups")
    plan = cluster_plan(raw, groups)
    assert (plan["cluster"]["scheduler"], plan["time"]["upstream"]) == ("slurm", [])


@pytest.mark.parametrize("tier", [*TIERS, "tier4-k8s"])
def test_the_site_models_fields_are_the_inventorys(tier: str) -> None:
    raw, groups = _inventory(tier)
    s = load_site(raw, groups)
    node, network = raw["gpucluster_node"], raw["gpucluster_network"]
    assert s.node.gpu_software == node.get("gpu_software")
    assert s.node.gpu_limits == node.get("gpu_limits")
    assert s.node.allreduce_intra_node_busbw_gbs == node.get("allreduce_intra_node_busbw_gbs")
    assert s.ntp_servers == list(network.get("ntp_servers") or [])
    assert s.scheduler == raw["gpucluster_cluster"].get("scheduler", "slurm")
    slurm = raw.get("gpucluster_slurm")
    assert (s.slurm, s.slurm_health) == (slurm, (slurm or {}).get("health"))
    assert (s.tenants, s.containers, s.rollout) == tuple(
        raw.get(k) for k in ("gpucluster_tenants", "gpucluster_containers", "gpucluster_rollout")
    )
    policy = raw.get("gpucluster_gpu_policy") or {}
    assert (s.policy_model.power_cap_w, s.policy_model.mig) == (policy.get("power_cap_w"), policy.get("mig"))
    plan = cluster_plan(raw, groups)
    assert (plan["cluster"]["scheduler"], plan["time"]["upstream"]) == (s.scheduler, s.ntp_servers)


def test_a_bad_scheduler_still_names_itself() -> None:
    raw, groups = _inventory("tier3")
    raw["gpucluster_cluster"] = {**raw["gpucluster_cluster"], "scheduler": "pbs"}
    with pytest.raises(PlanError, match=r"gpucluster_cluster\.scheduler"):
        load_site(raw, groups)


def test_slurm_health_is_read_from_the_slurm_section() -> None:
    raw, groups = _inventory("tier3")
    raw["gpucluster_slurm"] = {**(raw.get("gpucluster_slurm") or {}), "health": {"epilog": False}}
    s = load_site(raw, groups)
    assert s.slurm_health == {"epilog": False}


# --- the raw-to-typed boundary ----------------------------------------------------------------------


def test_no_field_of_the_site_model_is_any() -> None:
    """Every field of the Site and its sections has its type: free JSON a domain module checks itself is
    JsonValue, never Any (mypy then checks every reader)."""
    import dataclasses

    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import site_model

    classes = [c for c in vars(site_model).values() if dataclasses.is_dataclass(c) and isinstance(c, type)]
    assert {c.__name__ for c in classes} >= {"Site", "Node", "Facility", "Workload", "Lustre", "Storage", "Fabric"}
    loose = [
        f"{c.__name__}.{f.name}: {f.type}"
        for c in classes
        for f in dataclasses.fields(c)
        if "Any" in str(f.type).replace("JsonValue", "")
    ]
    assert loose == []


def test_the_site_keeps_no_raw_section_beside_its_model() -> None:
    raw, groups = _inventory("tier4")
    site = load_site(raw, groups)
    for name in ("fabric", "storage", "facility", "workload", "gpu_policy"):
        assert not hasattr(site, name), name
    # the switch tree as written, for the cabling (fabric/cabling.py checks it)
    assert site.fabric_model.tree == {
        k: v
        for k, v in raw["gpucluster_fabric"].items()
        if k in ("switch_radix", "switch_model", "spines", "spine_scope", "oversubscription", "min_spines")
    }
    assert site.subnet_manager == raw["gpucluster_fabric"].get("subnet_manager", "head")


def test_a_value_that_is_no_json_names_its_section() -> None:
    """A section kept as written is free JSON: anything else (a YAML date) is an error naming the section."""
    import datetime

    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.fields import json_value

    assert json_value({"a": [1, 2.5, "x", None, True]}, "gpucluster_rollout") == {"a": [1, 2.5, "x", None, True]}
    with pytest.raises(PlanError) as err:
        json_value({"window": datetime.date(2026, 1, 1)}, "gpucluster_rollout")
    assert err.value.field == "gpucluster_rollout"


def test_a_whole_number_written_with_a_fraction_is_an_integer() -> None:
    """JSON Schema's integer is a number without a fraction (2.0 too): the model holds it as an int."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.fields import opt_integer

    assert opt_integer({"racks": 2.0}, "gpucluster_facility", "racks") == 2
    assert isinstance(opt_integer({"racks": 2.0}, "gpucluster_facility", "racks"), int)
    assert opt_integer({}, "gpucluster_facility", "racks") is None
    with pytest.raises(PlanError) as err:
        opt_integer({"racks": 2.5}, "gpucluster_facility", "racks")
    assert err.value.field == "gpucluster_facility.racks"
