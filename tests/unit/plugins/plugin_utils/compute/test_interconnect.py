"""Inside a node: NVSwitch, NVLink bridge pairs or PCIe only, and the TP domain that follows
(compute/interconnect.py; docs/sources.md [S18] for the link speeds and the TP rule)."""

from __future__ import annotations

import pytest

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import (
    PCIE_GTS,
    PCIE_X16_GBS,
    intra_node,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import (
    INTRA_NODE_UNSET,
    intra_node_transport,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.parallelism import parallelism
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import gpu_model
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError


@pytest.mark.parametrize(
    ("model", "kind", "domain", "gbs"),
    [
        ("h100_sxm", "nvswitch", 8, 450),  # NVLink4 900 GB/s bidirectional [S18]
        ("b200", "nvswitch", 8, 900),  # NVLink5 1.8 TB/s bidirectional [S18]
        ("a100_sxm4", "nvswitch", 8, 300),  # NVLink3 600 GB/s [S18]
        ("h100_pcie", "nvlink_bridge", 2, 300),  # 2-way NVLink bridge, 600 GB/s (dossier 1.1 [S12])
        ("rtx_pro_6000", "pcie", 1, 63),  # no NVLink: PCIe Gen5 x16, 63 GB/s per direction [S18]
        ("l40s", "pcie", 1, 63),
    ],
)
def test_link_kind_domain_and_bandwidth(model: str, kind: str, domain: int, gbs: float) -> None:
    link = intra_node(gpu_model(model), 8, 5)
    assert (link.kind, link.domain_gpus, link.link_gbs_per_direction) == (kind, domain, gbs)
    assert link.pcie_gbs_per_direction == 63


def test_pcie_generation_sets_the_pcie_figure() -> None:
    """docs/sources.md [S18]: Gen4 31.5, Gen5 63, Gen6 121 GB/s per direction; Gen3-5 from GT/s x 16 x 128/130 / 8."""
    assert PCIE_X16_GBS == {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
    for gen in (3, 4, 5):
        assert PCIE_X16_GBS[gen] == pytest.approx(PCIE_GTS[gen] * 16 * 128 / 130 / 8, abs=0.05)
    assert intra_node(gpu_model("l40s"), 8, 4).link_gbs_per_direction == 31.5
    with pytest.raises(PlanError, match="pcie_gen"):
        intra_node(gpu_model("l40s"), 8, 7)


def test_tp_stays_in_the_nvlink_domain_unless_set() -> None:
    """13B on 8 GPUs of 96 GB: on PCIe TP stays 1 and ZeRO-1 finds the memory; on NVSwitch TP=4 suffices."""
    pcie = parallelism(model_params_b=13, gpus_per_node=8, nodes=1, gpu_memory_gb=96, nvlink_domain_gpus=1)
    assert (pcie["tp"], pcie["zero_stage"], pcie["fits"], pcie["tp_domain_gpus"]) == (1, 1, True, 1)
    assert any("NVLink domain of 1 GPU" in n for n in pcie["notes"])
    nvswitch = parallelism(model_params_b=13, gpus_per_node=8, nodes=1, gpu_memory_gb=80)
    assert (nvswitch["tp"], nvswitch["zero_stage"], nvswitch["tp_domain_gpus"]) == (4, 0, 8)
    assert not any("NVLink" in n for n in nvswitch["notes"])


def test_explicit_tp_over_pcie_is_allowed_and_costed() -> None:
    par = parallelism(
        model_params_b=13, gpus_per_node=8, nodes=1, gpu_memory_gb=96, tensor_parallel=4, nvlink_domain_gpus=1
    )
    assert par["tp"] == 4
    assert any("cross PCIe" in n for n in par["notes"])
    with pytest.raises(PlanError, match="tensor_parallel"):  # still never across nodes
        parallelism(
            model_params_b=13, gpus_per_node=8, nodes=2, gpu_memory_gb=96, tensor_parallel=16, nvlink_domain_gpus=1
        )


def test_pcie_node_that_does_not_fit_says_so_with_tp_1() -> None:
    par = parallelism(model_params_b=405, gpus_per_node=8, nodes=1, gpu_memory_gb=96, nvlink_domain_gpus=1)
    assert not par["fits"] and par["tp"] == 1 and par["zero_stage"] == 3


def test_nccl_inside_the_node_sets_nothing_and_says_what_it_uses() -> None:
    pcie = intra_node_transport("pcie", "rtx_pro_6000")
    assert "P2P over PCIe" in pcie["transport"] and "SHM" in pcie["transport"]
    assert pcie["nvls"].startswith("no")
    assert pcie["unset"] == list(INTRA_NODE_UNSET) and "NCCL_P2P_LEVEL" in INTRA_NODE_UNSET
    assert any("ACSCtl" in c for c in pcie["checks"])  # docs/sources.md [N4]
    nvs = intra_node_transport("nvswitch", "h100_sxm")
    assert nvs["checks"] == [] and "NVLink" in nvs["transport"]
    with pytest.raises(PlanError):
        intra_node_transport("infinity_fabric", "x")
