"""MPI under Slurm: MpiDefault=pmix and the UCX / Open MPI defaults per fabric (docs/sources.md [SL5], [MP1]-[MP6])."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import mpi

HCAS = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
ROCE = {"traffic_class": 106, "dscp": 26}


def _settings(fabric_type: str, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"compute_hcas": HCAS, "compute_netdevs": ["ens1f0", "ens2f0"]}
    args.update(kw)
    return mpi.mpi_settings(fabric_type=fabric_type, **args).as_dict()


def _plan(tier: str, lab: bool = False, **overrides: Any) -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    site.update(overrides)
    if lab:
        site["gpucluster_lab"] = {"enabled": True}
    return cluster_plan(site, groups)


def test_infiniband_uses_ucx_on_the_compute_hcas_only() -> None:
    # [MP1]: UCX_NET_DEVICES=<dev>:<port>, only the listed devices; UCX_TLS left to UCX (RC small, DC/UD large scale)
    s = _settings("infiniband")
    assert s["mpi_default"] == "pmix" and s["transport"] == "rdma" and s["files"]
    assert s["ucx"] == {"UCX_NET_DEVICES": "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"}
    assert "UCX_TLS" not in s["ucx"]
    # Debian's file turns UCX off (pml = ^ucx, [MP3]); on an RDMA fabric the UCX PML and OSC are on ([MP4])
    assert s["openmpi"]["pml"] == "ucx" and s["openmpi"]["osc"] == "ucx"
    assert s["openmpi"]["btl"] == "^uct,openib,ofi" and s["openmpi"]["mtl"] == "^ofi"


def test_infiniband_service_level_reaches_ucx() -> None:
    assert _settings("infiniband", ib_service_level=3)["ucx"]["UCX_IB_SL"] == "3"


def test_roce_traffic_class_is_the_plans_tos_and_gid_only_when_pinned() -> None:
    s = _settings("roce", roce=ROCE)
    assert s["ucx"]["UCX_IB_TRAFFIC_CLASS"] == "106"  # DSCP 26 x 4 + ECT(0), as NCCL_IB_TC
    assert "UCX_IB_GID_INDEX" not in s["ucx"]  # UCX's default is auto ([MP2])
    pinned = _settings("roce", roce={**ROCE, "gid_index": 3})
    assert pinned["ucx"]["UCX_IB_GID_INDEX"] == "3"
    assert "UCX_IB_SL" not in pinned["ucx"]


def test_tcp_keeps_ob1_on_the_fabric_netdevs() -> None:
    s = _settings("tcp")
    assert s["transport"] == "tcp"
    assert s["ucx"] == {"UCX_NET_DEVICES": "ens1f0,ens2f0"}
    assert s["openmpi"]["pml"] == "^ucx" and s["openmpi"]["btl_tcp_if_include"] == "ens1f0,ens2f0"


def test_no_fabric_writes_no_files() -> None:
    s = _settings("none", compute_hcas=[], compute_netdevs=[])
    assert (s["mpi_default"], s["transport"], s["files"], s["ucx"], s["openmpi"]) == ("pmix", "shm", False, {}, {})


def test_lab_replaces_the_hcas_with_tcp() -> None:
    s = _settings("infiniband", lab=True)
    assert s["lab"] and s["transport"] == "tcp"
    # no UCX_NET_DEVICES: podman does not keep the order of a container's networks (eth0 may be storage)
    assert s["ucx"] == {"UCX_TLS": "tcp,sm,self"}
    assert "mlx5" not in str(s)
    # [MP6]: Open MPI 4.1's UCX PML only selects itself for mlx* devices unless told otherwise
    assert (s["openmpi"]["pml_ucx_tls"], s["openmpi"]["pml_ucx_devices"], s["openmpi"]["pml"]) == ("any", "any", "ucx")


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"fabric_type": "myrinet"}, "gpucluster_fabric.type"),
        ({"fabric_type": "infiniband", "compute_hcas": []}, "gpucluster_node.nics"),
        ({"fabric_type": "infiniband", "compute_hcas": ["mlx5_0", "mlx5_0"]}, "gpucluster_node.nics"),
        ({"fabric_type": "infiniband", "ib_service_level": 16}, "gpucluster_fabric.infiniband.service_level"),
        ({"fabric_type": "roce", "roce": {**ROCE, "gid_index": 256}}, "gpucluster_fabric.roce.gid_index"),
        ({"fabric_type": "roce", "roce": {**ROCE, "gid_index": "x"}}, "gpucluster_fabric.roce.gid_index"),
        ({"fabric_type": "tcp", "compute_netdevs": []}, "gpucluster_node.nics"),
        ({"fabric_type": "roce", "roce": {"dscp": 26}}, "gpucluster_fabric.roce"),
    ],
)
def test_bad_input_names_the_field(kw: dict[str, Any], field: str) -> None:
    args: dict[str, Any] = {"compute_hcas": HCAS, "compute_netdevs": ["ens1f0"], "roce": ROCE}
    args.update(kw)
    with pytest.raises(PlanError) as err:
        mpi.mpi_settings(**args)
    assert err.value.field == field


@pytest.mark.parametrize("tier", ["tier2", "tier3", "tier4"])
def test_reference_tiers_use_their_rails(tier: str) -> None:
    plan = _plan(tier)
    m = plan["slurm"]["mpi"]
    hcas = [link for link in plan["nccl"]["conf"]["NCCL_IB_HCA"].lstrip("=").split(",")]
    assert m["ucx"]["UCX_NET_DEVICES"].split(",") == hcas  # the same rails, in the same order, as NCCL
    assert m["openmpi"]["pml"] == "ucx" and not m["lab"]


def test_roce_site_gets_the_same_tos_as_nccl() -> None:
    site, _ = load_inventory("tier3")
    fabric = {**site["gpucluster_fabric"], "type": "roce", "roce": {"dscp": 24}}
    fabric.pop("infiniband")  # an InfiniBand section on RoCE is refused (inventory/rules.py)
    plan = _plan("tier3", gpucluster_fabric=fabric)
    assert plan["slurm"]["mpi"]["ucx"]["UCX_IB_TRAFFIC_CLASS"] == plan["nccl"]["conf"]["NCCL_IB_TC"] == "98"


def test_single_node_tier_writes_no_mpi_files_but_still_uses_pmix() -> None:
    plan = _plan("tier1")
    assert plan["slurm"]["mpi"]["mpi_default"] == "pmix" and not plan["slurm"]["mpi"]["files"]
    dests = {f["dest"] for files in files_by_host(plan).values() for f in files}
    assert mpi.UCX_CONF not in dests and mpi.OPENMPI_MCA_PARAMS not in dests


def test_templates_render_the_plan() -> None:
    plan = _plan("tier2")
    host = next(h for h, v in plan["hosts"].items() if "compute" in v["roles"])
    conf = render_role_template("slurm", "slurm.conf.j2", plan, host)
    assert "\nMpiDefault=pmix\n" in conf
    ucx = render_role_template("compute", "ucx.conf.j2", plan, host)
    assert "\nUCX_NET_DEVICES=" + plan["slurm"]["mpi"]["ucx"]["UCX_NET_DEVICES"] + "\n" in ucx
    ompi = render_role_template("compute", "openmpi-mca-params.conf.j2", plan, host)
    lines = [line for line in ompi.splitlines() if line and not line.startswith("#")]
    # sorted by name: a plan loaded from plan.json (sorted keys) renders the same bytes
    assert lines == [f"{k} = {v}" for k, v in sorted(plan["slurm"]["mpi"]["openmpi"].items())]
    dests = {f["dest"] for f in files_by_host(plan)[host]}
    assert {mpi.UCX_CONF, mpi.OPENMPI_MCA_PARAMS} <= dests


def test_lab_plan_names_no_hca() -> None:
    plan = _plan("tier2", lab=True)
    m = plan["slurm"]["mpi"]
    assert m["lab"] and m["files"] and "mlx5" not in str(m)
    assert "UCX_NET_DEVICES" not in m["ucx"]


def test_single_node_lab_writes_no_mpi_files() -> None:
    m = _plan("tier1", lab=True)["slurm"]["mpi"]
    assert m["lab"] and not m["files"] and m["transport"] == "shm"
