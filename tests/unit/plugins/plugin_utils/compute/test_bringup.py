"""GPU bring-up: Fabric Manager on NVSwitch boards, GPUDirect RDMA by DMA-BUF or nvidia_peermem (compute/bringup.py)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROLE_FILES, ROOT, cluster_plan, load_inventory, render_role_template
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import bringup
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

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
    plan = bringup.bringup_plan(H100, {"driver_branch": 570}, "infiniband", True)
    fm = plan["fabric_manager"]
    assert fm["required"] and fm["package"] == "nvidia-fabricmanager-570"  # the driver's branch [F2]
    assert {"gpucluster-gpu-clocks.service", "nvidia-dcgm.service", "slurmd.service", "kubelet.service"} <= set(
        fm["before"]
    )
    assert plan["nvlink_links"] == 18
    pcie = bringup.bringup_plan(catalog.GPUS["rtx_pro_6000"], None, "infiniband", True)
    assert not pcie["fabric_manager"]["required"] and pcie["fabric_manager"]["before"] == []
    assert pcie["nvlink_links"] is None


def test_gpudirect_auto_takes_dmabuf_only_when_all_requirements_are_shown() -> None:
    assert bringup.gpudirect_plan(bringup.software(DMABUF_OK), "infiniband", True)["method"] == "dmabuf"
    doca = {"rdma_stack": "doca_ofed"}
    for change in ({"kernel_modules": "proprietary"}, {"driver_branch": 510}, {"kernel_version": "5.10"}):
        sw = bringup.software({**DMABUF_OK, **change, **doca})
        gd = bringup.gpudirect_plan(sw, "roce", True)
        assert gd["method"] == "nvidia_peermem" and gd["module"] == "nvidia_peermem"
        assert gd["modules_load_file"] == bringup.MODULES_LOAD_FILE
        assert gd["doca_ofed"] and not gd["open_modules_check"]
    none = bringup.gpudirect_plan(bringup.software({}), "tcp", True)
    assert none["method"] == "none" and not none["needed"]  # TCP sockets: no GPUDirect RDMA to load


def test_auto_on_the_target_os_defaults_is_dmabuf_and_says_why() -> None:
    """An inventory that says nothing: Debian 12's kernel 6.1 and a current driver's open modules."""
    gd = bringup.gpudirect_plan(bringup.software({}), "infiniband", True)
    assert gd["method"] == "dmabuf" and gd["module"] is None and gd["modules_load_file"] is None
    assert gd["open_modules_check"] and gd["driver_version_file"] == "/proc/driver/nvidia/version"
    assert gd["inputs"]["kernel_version"] == "6.1" and gd["inputs"]["kernel_modules"] == "open"
    for word in ("kernel 6.1 (Debian 12's kernel)", "open kernel modules", "NCCL", "RDMA stack inbox"):
        assert word in gd["reason"]
    # an NCCL older than NCCL_DMABUF_ENABLE (2.13) cannot use DMA-BUF: with DOCA-OFED declared, peermem
    old = bringup.software({"nccl_version": "2.12.12", "rdma_stack": "doca_ofed"})
    assert bringup.gpudirect_plan(old, "infiniband", True)["method"] == "nvidia_peermem"
    # a branch before R560 installs the proprietary flavour unless the inventory says open
    assert bringup.effective(bringup.software({"driver_branch": 550}))["kernel_modules"] == "proprietary"
    assert bringup.effective(bringup.software({"driver_branch": 550, "kernel_modules": "open"}))["kernel_modules"] == (
        "open"
    )


def test_peermem_on_a_stock_kernel_is_refused_with_the_fix() -> None:
    """nvidia_peermem needs DOCA-OFED/MLNX_OFED's PeerDirect: asked for (or the only way left) without it, refused."""
    with pytest.raises(PlanError) as err:
        bringup.bringup_plan(H100, {"gpudirect_rdma": "nvidia_peermem"}, "infiniband", True)
    assert err.value.field == "gpucluster_node.gpu_software.gpudirect_rdma"
    assert "rdma_stack: doca_ofed" in str(err.value) and "PeerDirect" in str(err.value)
    with pytest.raises(PlanError) as err:
        bringup.bringup_plan(H100, {"kernel_modules": "proprietary"}, "infiniband", True)
    assert err.value.field == "gpucluster_node.gpu_software.kernel_modules"
    assert "rdma_stack: doca_ofed" in str(err.value)
    declared = bringup.bringup_plan(
        H100, {"gpudirect_rdma": "nvidia_peermem", "rdma_stack": "mlnx_ofed"}, "infiniband", True
    )
    assert declared["gpudirect"]["method"] == "nvidia_peermem" and not declared["gpudirect"]["doca_ofed"]


def test_blackwell_runs_only_the_open_modules() -> None:
    b200 = catalog.GPUS["b200"]
    assert bringup.bringup_plan(b200, None, "infiniband", True)["gpudirect"]["inputs"]["kernel_modules"] == "open"
    with pytest.raises(PlanError) as err:
        bringup.bringup_plan(b200, {"kernel_modules": "proprietary"}, "infiniband", True)
    assert err.value.field == "gpucluster_node.gpu_software.kernel_modules"


def test_pcie_acs_and_iommu_only_with_gpudirect_rdma() -> None:
    pcie = bringup.bringup_plan(H100, None, "infiniband", True)["gpudirect"]["pcie"]
    assert pcie["acs_disable"] and pcie["kernel_args"] == ["iommu=pt"]
    assert (pcie["bridge_class"], pcie["acs_register"], pcie["acs_value"]) == ("0x0604", "ECAP_ACS+0x6.w", "0000")
    assert set(pcie["reboot_paths"]) == {
        bringup.GRUB_DROPIN,
        f"/etc/systemd/system/{bringup.ACS_UNIT}",
        "/usr/local/sbin/gpucluster-pcie-acs",
    }
    kept = bringup.bringup_plan(H100, {"pcie_acs": "keep", "iommu": "keep"}, "roce", True)["gpudirect"]["pcie"]
    assert not kept["acs_disable"] and kept["kernel_args"] == [] and kept["reboot_paths"] == []
    tcp = bringup.bringup_plan(H100, None, "tcp", True)["gpudirect"]["pcie"]
    assert not tcp["acs_disable"] and tcp["kernel_args"] == []


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ({"gpudirect_rdma": "dmabuf", "driver_branch": 535, "kernel_version": "6.8"}, "kernel_modules", "proprietary"),
        ({**DMABUF_OK, "gpudirect_rdma": "dmabuf", "kernel_version": "5.4.0"}, "kernel_version", "5.4.0"),
        ({**DMABUF_OK, "gpudirect_rdma": "dmabuf", "driver_branch": 510}, "driver_branch", 510),
        ({"gpudirect_rdma": "none"}, "gpudirect_rdma", "none"),
        ({"gpudirect_rdma": "nvidia_peermem", "driver_branch": 460, "rdma_stack": "doca_ofed"}, "driver_branch", 460),
        ({"gpudirect_rdma": "nvidia_peermem"}, "gpudirect_rdma", "nvidia_peermem"),
        ({"rdma_stack": "ofed"}, "rdma_stack", "ofed"),
        ({"nccl_version": "two"}, "nccl_version", "two"),
        ({"pcie_acs": "off"}, "pcie_acs", "off"),
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
    stack=st.sampled_from(bringup.RDMA_STACKS),
)
def test_auto_never_plans_what_the_node_cannot_do(
    branch: int, modules: str, major: int, minor: int, fabric: str, stack: str
) -> None:
    sw = {"driver_branch": branch, "kernel_modules": modules, "kernel_version": f"{major}.{minor}", "rdma_stack": stack}
    dmabuf = branch >= 515 and modules == "open" and (major, minor) >= (5, 12)
    peermem = stack in bringup.PEERDIRECT_STACKS and branch >= bringup.PEERMEM_MIN_DRIVER
    if fabric in bringup.RDMA_FABRICS and not dmabuf and not peermem:
        with pytest.raises(PlanError):
            bringup.gpudirect_plan(bringup.software(sw), fabric, True)
        return
    gd = bringup.gpudirect_plan(bringup.software(sw), fabric, True)
    if gd["method"] == "dmabuf":
        assert dmabuf
    if gd["method"] == "nvidia_peermem":  # only where the declared stack has PeerDirect
        assert peermem and not dmabuf
    assert (gd["method"] != "none") == (fabric in bringup.RDMA_FABRICS)


@pytest.mark.parametrize("tier", ["tier2", "tier3", "tier4", "tier4-k8s", "examples/tier4-b200"])
def test_no_reference_plan_loads_a_module_debian_cannot_provide(tier: str) -> None:
    """Acceptance (issue 43): every reference and example plan with an RDMA fabric uses DMA-BUF on Debian 12."""
    plan = cluster_plan(*load_inventory(tier))
    gd = plan["gpu"]["bringup"]["gpudirect"]
    assert gd["method"] == "dmabuf" and gd["module"] is None
    files = {f["dest"]: f["src"] for f in files_by_host(plan)["compute01"]}
    assert bringup.MODULES_LOAD_FILE not in files
    assert files[bringup.GRUB_DROPIN] == "grub-gpucluster.cfg.j2"
    assert files[f"/etc/systemd/system/{bringup.ACS_UNIT}"] == "gpucluster-pcie-acs.service.j2"
    assert plan["health"]["gpudirect_open_modules"] is True and plan["health"]["gpudirect_module"] is None


def test_examples_plan_no_unloadable_module() -> None:
    for path in sorted((ROOT / "inventories" / "examples").iterdir()):
        plan = cluster_plan(*load_inventory(f"examples/{path.name}"))
        assert plan["gpu"]["bringup"]["gpudirect"]["method"] in ("dmabuf", "none"), path.name


@pytest.mark.parametrize("tier", ["tier2", "tier3", "tier4", "tier4-k8s"])
def test_compute_nodes_get_fabric_manager_and_the_pcie_files(tier: str) -> None:
    plan = cluster_plan(*load_inventory(tier))
    files = {f["dest"]: f["src"] for f in files_by_host(plan)["compute01"]}
    assert files["/etc/systemd/system/nvidia-fabricmanager.service.d/gpucluster.conf"] == "nvidia-fabricmanager.conf.j2"
    dropin = render_role_template("compute", "nvidia-fabricmanager.conf.j2", plan, "compute01")
    assert "\nBefore=gpucluster-gpu-clocks.service gpucluster-mig.service nvidia-dcgm.service" in dropin
    grub = render_role_template("compute", "grub-gpucluster.cfg.j2", plan, "compute01")
    assert grub.splitlines()[-1] == 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }iommu=pt"'
    unit = render_role_template("compute", "gpucluster-pcie-acs.service.j2", plan, "compute01")
    assert "\nExecStart=/usr/local/sbin/gpucluster-pcie-acs\n" in unit and "ConditionVirtualization=!container" in unit
    acs = render_role_template("compute", "gpucluster-pcie-acs.j2", plan, "compute01")
    assert acs.startswith("#!/bin/sh\n") and "0x0604*)" in acs
    assert 'setpci -s "$bdf" ECAP_ACS+0x6.w=0000' in acs
    assert all("nvidia-fabricmanager" not in f["dest"] for f in files_by_host(plan)["head01"])


def test_doca_declared_plans_peermem_and_its_file() -> None:
    site, groups = load_inventory("tier3")
    node = {**site["gpucluster_node"], "gpu_software": {"rdma_stack": "doca_ofed", "gpudirect_rdma": "nvidia_peermem"}}
    plan = cluster_plan({**site, "gpucluster_node": node}, groups)
    gd = plan["gpu"]["bringup"]["gpudirect"]
    assert gd["method"] == "nvidia_peermem" and gd["doca_ofed"]
    files = {f["dest"]: f["src"] for f in files_by_host(plan)["compute01"]}
    assert files[bringup.MODULES_LOAD_FILE] == "gpudirect-modules.conf.j2"
    assert render_role_template("compute", "gpudirect-modules.conf.j2", plan, "compute01").endswith(
        "\nnvidia_peermem\n"
    )
    assert plan["health"]["gpudirect_module"] == "nvidia_peermem" and not plan["health"]["gpudirect_open_modules"]


def test_role_reboot_paths_are_the_role_files() -> None:
    entries = {f["dest"]: f for f in ROLE_FILES["compute"]}
    pcie = bringup.pcie_plan(bringup.software({}), "dmabuf")
    for path in pcie["reboot_paths"]:
        assert path in entries
    assert entries[bringup.GRUB_DROPIN]["if"] == "iommu_pt" and "Update GRUB" in entries[bringup.GRUB_DROPIN]["notify"]
    assert entries[bringup.ACS_PROGRAM]["if"] == entries[f"/etc/systemd/system/{bringup.ACS_UNIT}"]["if"] == "pcie_acs"


def test_role_file_list_names_the_engines_modules_load_path() -> None:
    entry = next(f for f in ROLE_FILES["compute"] if f["src"] == "gpudirect-modules.conf.j2")
    assert entry["dest"] == bringup.MODULES_LOAD_FILE and entry["if"] == "peermem"


def test_tier1_without_a_fabric_loads_no_peermem() -> None:
    plan = cluster_plan(*load_inventory("tier1"))
    host = next(h for h, v in plan["hosts"].items() if "compute" in v["roles"])
    dests = [f["dest"] for f in files_by_host(plan)[host]]
    assert bringup.MODULES_LOAD_FILE not in dests
    assert "/etc/systemd/system/nvidia-fabricmanager.service.d/gpucluster.conf" in dests  # still an HGX board


def test_report_says_which_mechanism_and_from_what() -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections

    plan = cluster_plan(*load_inventory("tier3"))
    section = next(s for s in report_sections(plan) if s["title"] == "GPU bring-up")
    rows = {r[0]: r for r in section["rows"]}
    assert rows["GPUDirect RDMA"][1] == "dmabuf"
    assert "kernel 6.1 (Debian 12's kernel)" in rows["GPUDirect RDMA"][2]
    assert rows["PCIe ACS / IOMMU"][1] == "ACS off, iommu=pt"
