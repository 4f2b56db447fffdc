"""GPU bring-up: Fabric Manager on NVSwitch boards, GPUDirect RDMA by DMA-BUF or nvidia_peermem (compute/bringup.py)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROLE_FILES, cluster_plan, load_inventory, render_role_template
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import bringup
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError

H100 = catalog.GPUS["h100_sxm"]
DMABUF_OK = {"driver_branch": 570, "kernel_modules": "open", "kernel_version": "6.8.0-45-generic"}


def test_catalog_says_which_models_sit_on_nvswitch_with_sources() -> None:
    boards = {k for k, g in catalog.GPUS.items() if g.nvswitch}
    assert boards == {"h100_sxm", "h200_sxm", "b200", "a100_sxm4"}
    for key, gpu in catalog.GPUS.items():
        assert catalog.SOURCE[key]["nvswitch"] and catalog.SOURCE[key]["nvlink_links"]
        # HGX/DGX SXM boards; PCIe cards have none; a GB200 compute tray's NVSwitches are in the switch trays
        assert gpu.nvswitch == (gpu.form_factor == "sxm" and key != "gb200")
        assert (gpu.nvlink_links is not None) == gpu.nvswitch
    assert (catalog.GPUS["h100_sxm"].nvlink_links, catalog.GPUS["a100_sxm4"].nvlink_links) == (18, 12)


def test_nvswitch_model_needs_fabric_manager_ordered_before_gpu_users() -> None:
    plan = bringup.bringup_plan(H100, {"driver_branch": 550}, "infiniband", True)
    fm = plan["fabric_manager"]
    assert fm["required"] and fm["package"] == "nvidia-fabricmanager-550"  # the driver's branch [F2]
    assert {"gpucluster-gpu-clocks.service", "nvidia-dcgm.service", "slurmd.service", "kubelet.service"} <= set(
        fm["before"]
    )
    assert plan["nvlink_links"] == 18
    pcie = bringup.bringup_plan(catalog.GPUS["rtx_pro_6000"], None, "infiniband", True)
    assert not pcie["fabric_manager"]["required"] and pcie["fabric_manager"]["before"] == []
    assert pcie["nvlink_links"] is None


def test_gpudirect_auto_takes_dmabuf_only_when_all_requirements_are_shown() -> None:
    assert bringup.gpudirect_plan(bringup.software(DMABUF_OK), "infiniband", True)["method"] == "dmabuf"
    for change in ({"kernel_modules": "proprietary"}, {"driver_branch": 510}, {"kernel_version": "5.10"}, {}):
        sw = {**DMABUF_OK, **change} if change else {}
        gd = bringup.gpudirect_plan(bringup.software(sw), "roce", True)
        assert gd["method"] == "nvidia_peermem" and gd["module"] == "nvidia_peermem"
        assert gd["modules_load_file"] == bringup.MODULES_LOAD_FILE
    none = bringup.gpudirect_plan(bringup.software({}), "tcp", True)
    assert none["method"] == "none" and not none["needed"]  # TCP sockets: no GPUDirect RDMA to load


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ({"gpudirect_rdma": "dmabuf", "driver_branch": 535, "kernel_version": "6.8"}, "kernel_modules", None),
        ({**DMABUF_OK, "gpudirect_rdma": "dmabuf", "kernel_version": "5.4.0"}, "kernel_version", "5.4.0"),
        ({**DMABUF_OK, "gpudirect_rdma": "dmabuf", "driver_branch": 510}, "driver_branch", 510),
        ({"gpudirect_rdma": "none"}, "gpudirect_rdma", "none"),
        ({"gpudirect_rdma": "nvidia_peermem", "driver_branch": 460}, "driver_branch", 460),
        ({"gpudirect_rdma": "peermem"}, "gpudirect_rdma", "peermem"),
        ({"kernel_version": "six"}, "kernel_version", "six"),
        ({"driver_branch": 99}, "driver_branch", 99),
        ({"kernel_modules": "nouveau"}, "kernel_modules", "nouveau"),
        ({"driver": 550}, "driver", 550),
    ],
)
def test_a_site_that_cannot_satisfy_gpudirect_gets_a_field_named_error(
    section: dict[str, Any], field: str, value: Any
) -> None:
    with pytest.raises(PlanError) as err:
        bringup.bringup_plan(H100, section, "infiniband", True)
    assert err.value.field == f"gpucluster_node.gpu_software.{field}"
    assert err.value.value == value


def test_none_is_allowed_where_nccl_uses_no_rdma() -> None:
    gd = bringup.bringup_plan(H100, {"gpudirect_rdma": "none"}, "tcp", True)["gpudirect"]
    assert gd["method"] == "none"


def test_plan_error_reaches_the_whole_plan_before_any_host() -> None:
    site, groups = load_inventory("tier3")
    node = {**site["gpucluster_node"], "gpu_software": {"gpudirect_rdma": "none"}}
    with pytest.raises(PlanError) as err:
        cluster_plan({**site, "gpucluster_node": node}, groups)
    assert err.value.field == "gpucluster_node.gpu_software.gpudirect_rdma"


@given(
    branch=st.integers(450, 999),
    modules=st.sampled_from(bringup.KERNEL_MODULES),
    major=st.integers(3, 7),
    minor=st.integers(0, 30),
    fabric=st.sampled_from(("infiniband", "roce", "tcp", "none")),
)
def test_auto_never_plans_what_the_node_cannot_do(
    branch: int, modules: str, major: int, minor: int, fabric: str
) -> None:
    sw = {"driver_branch": branch, "kernel_modules": modules, "kernel_version": f"{major}.{minor}"}
    if fabric in bringup.RDMA_FABRICS and branch < bringup.PEERMEM_MIN_DRIVER:  # no nvidia_peermem before R470
        with pytest.raises(PlanError):
            bringup.gpudirect_plan(bringup.software(sw), fabric, True)
        return
    gd = bringup.gpudirect_plan(bringup.software(sw), fabric, True)
    if gd["method"] == "dmabuf":
        assert branch >= 515 and modules == "open" and (major, minor) >= (5, 12)
    assert (gd["method"] != "none") == (fabric in bringup.RDMA_FABRICS)


@pytest.mark.parametrize("tier", ["tier2", "tier3", "tier4", "tier4-k8s"])
def test_compute_nodes_get_fabric_manager_and_peermem_files(tier: str) -> None:
    plan = cluster_plan(*load_inventory(tier))
    files = {f["dest"]: f["src"] for f in plan["files"]["compute01"]}
    assert files["/etc/systemd/system/nvidia-fabricmanager.service.d/gpucluster.conf"] == "nvidia-fabricmanager.conf.j2"
    assert files[bringup.MODULES_LOAD_FILE] == "gpudirect-modules.conf.j2"
    dropin = render_role_template("compute", "nvidia-fabricmanager.conf.j2", plan, "compute01")
    assert "\nBefore=gpucluster-gpu-clocks.service gpucluster-mig.service nvidia-dcgm.service" in dropin
    assert render_role_template("compute", "gpudirect-modules.conf.j2", plan, "compute01").endswith(
        "\nnvidia_peermem\n"
    )
    assert all("nvidia-fabricmanager" not in f["dest"] for f in plan["files"]["head01"])


def test_role_file_list_names_the_engines_modules_load_path() -> None:
    entry = next(f for f in ROLE_FILES["compute"] if f["src"] == "gpudirect-modules.conf.j2")
    assert entry["dest"] == bringup.MODULES_LOAD_FILE and entry["if"] == "peermem"


def test_tier1_without_a_fabric_loads_no_peermem() -> None:
    plan = cluster_plan(*load_inventory("tier1"))
    host = next(h for h, v in plan["hosts"].items() if "compute" in v["roles"])
    dests = [f["dest"] for f in plan["files"][host]]
    assert bringup.MODULES_LOAD_FILE not in dests
    assert "/etc/systemd/system/nvidia-fabricmanager.service.d/gpucluster.conf" in dests  # still an HGX board
