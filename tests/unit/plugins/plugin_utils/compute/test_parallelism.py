"""Parallelism: TP inside a node only (tiers.md), model state per the ZeRO paper, a plan that passes its own check.

Sources:
- ZeRO: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
  Models" (arXiv:1910.02054): mixed-precision Adam is 2 + 2 + K = 16 bytes per parameter (K = 12);
  Figure 1, 7.5B parameters over Nd = 64 GPUs: baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB,
  P_os+g+p 1.9 GB per GPU.
- Megatron-LM: Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM" (arXiv:2104.04473), Table 1 (DGX A100 80 GB, 8 GPUs per node):
  parameters (billions), TP, PP, GPUs per row. The table ends with 529.6B at TP=8, PP=35 on
  2520 GPUs and 1008B at TP=8, PP=64 on 3072 GPUs; GPT-3 175B is not a Table 1 row (it is
  the model of Table 2 and section 5.2). The rows are taken from the paper as published; the
  search tool here only held summaries of it, not the table text.
"""

from __future__ import annotations

import pytest
from conftest import load_inventory
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.parallelism import (
    StateBytes,
    parallelism,
    smallest_fitting_tier,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import TIERS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan

# (parameters in billions, TP, PP, GPUs): Narayanan et al. 2021, Table 1
MEGATRON_TABLE_1 = [
    (1.7, 1, 1, 32),
    (3.6, 2, 1, 64),
    (7.5, 4, 1, 128),
    (18.4, 8, 1, 256),
    (39.1, 8, 2, 512),
    (76.1, 8, 4, 1024),
    (145.6, 8, 8, 1536),
    (310.1, 8, 16, 1920),
    (529.6, 8, 35, 2520),
    (1008.0, 8, 64, 3072),
]


@pytest.mark.parametrize(
    ("stage", "expected_gb"),
    [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)],
)
def test_zero_paper_figure_1_per_gpu_model_state(stage: int, expected_gb: float) -> None:
    """ZeRO Figure 1: psi = 7.5B, Nd = 64, K = 12."""
    assert round(StateBytes().per_gpu_gb(7.5, zero_stage=stage, dp=64), 1) == expected_gb


def test_sixteen_bytes_per_parameter() -> None:
    p = parallelism(model_params_b=7.5, gpus_per_node=8, nodes=8, gpu_memory_gb=80)
    assert p["bytes_per_param"] == 16.0
    assert p["bytes_split"] == {"params": 2.0, "grads": 2.0, "optimizer": 12.0}
    assert p["state_gb_total"] == 120.0


def test_13b_fits_one_node() -> None:
    """13B x 16 B = 208 GB; TP=4 gives 52 GB per 80 GB GPU (64 GB budget)."""
    p = parallelism(model_params_b=13, gpus_per_node=8, nodes=1, gpu_memory_gb=80)
    assert (p["tp"], p["pp"], p["dp"], p["zero_stage"]) == (4, 1, 2, 0)
    assert p["fits"] and p["gb_per_gpu"] == 52.0
    assert p["gpu_memory_budget_gb"] == 64.0 and p["activations_headroom_gb"] == 16.0
    assert "ZeRO" not in p["strategy"] and "does not fit" not in p["strategy"]


def test_tier2_reference_plan_is_consistent_with_its_fit_check() -> None:
    """tier2: 70B x 16 B = 1120 GB over 16 x 80 GB is 70 GB each even fully split, above 64 GB.

    The old plan said "TP=8 x PP=2 x DP=1 with ZeRO-3" while fits_sharded was false; ZeRO with
    DP=1 shards nothing. Now: a plain "does not fit", no ZeRO named, and the tier that fits.
    """
    plan = cluster_plan(*load_inventory("tier2"))
    p = plan["parallelism"]
    assert (p["tp"], p["pp"], p["dp"]) == (8, 2, 1)
    assert not p["fits"]
    assert p["zero_stage"] == 0 and "ZeRO-3" not in p["strategy"]
    assert p["strategy"].startswith("does not fit")
    assert p["gb_per_gpu"] == 70.0 > p["gpu_memory_budget_gb"]
    assert p["smallest_fitting_tier"] == "tier3" and "tier3" in p["strategy"]


def test_the_smallest_fitting_tier_holds_the_model() -> None:
    """70B fits tier3 (32 GPUs: 35 GB each at TP=8, PP=4); 405B at 16 B/param fits no reference tier."""
    assert smallest_fitting_tier(70, 80) == "tier3"
    assert smallest_fitting_tier(13, 80) == "tier1"
    assert smallest_fitting_tier(405, 80) is None
    p = parallelism(model_params_b=405, gpus_per_node=8, nodes=8, gpu_memory_gb=80)
    assert not p["fits"] and "none of the reference tiers" in p["strategy"]
    t3 = TIERS["tier3"]
    p3 = parallelism(model_params_b=70, gpus_per_node=t3.gpus // t3.nodes, nodes=t3.nodes, gpu_memory_gb=80)
    assert p3["fits"] and (p3["tp"], p3["pp"], p3["dp"]) == (8, 4, 1)


def test_zero_is_used_only_across_data_parallel_ranks() -> None:
    """70B on 4 nodes with PP pinned to 1: TP=8, DP=4; plain DP needs 140 GB per GPU.

    ZeRO-1 (Figure 1 formula with psi = 70B / 8): 4 x 8.75 + 12 x 8.75 / 4 = 61.25 GB <= 64 GB.
    """
    p = parallelism(model_params_b=70, gpus_per_node=8, nodes=4, gpu_memory_gb=80, pipeline_parallel=1)
    assert (p["tp"], p["pp"], p["dp"], p["zero_stage"]) == (8, 1, 4, 1)
    assert p["fits"] and p["gb_per_gpu"] == 61.25
    assert p["gb_per_gpu_by_zero_stage"] == {"0": 140.0, "1": 61.25, "2": 48.12, "3": 35.0}
    assert "ZeRO-1" in p["strategy"] and "4 data-parallel ranks" in p["strategy"]


def test_zero_3_when_stages_1_and_2_do_not_fit() -> None:
    """100B, TP=8 and PP=1 pinned, 8 nodes: DP=8; stage 2 is 2 x 12.5 + 14 x 12.5 / 8 = 46.9 GB on a 40 GB GPU."""
    p = parallelism(
        model_params_b=100, gpus_per_node=8, nodes=8, gpu_memory_gb=40, tensor_parallel=8, pipeline_parallel=1
    )
    assert p["zero_stage"] == 3 and p["fits"]
    assert p["gb_per_gpu"] == 25.0 <= p["gpu_memory_budget_gb"]
    assert "ZeRO-3" in p["strategy"]


def test_no_zero_when_dp_is_one() -> None:
    """One DP rank: nothing to shard across; the plan says it does not fit instead of naming ZeRO."""
    p = parallelism(model_params_b=70, gpus_per_node=8, nodes=2, gpu_memory_gb=80, tensor_parallel=8)
    assert p["dp"] == 1 and p["zero_stage"] == 0 and not p["fits"]
    assert "ZeRO" not in p["strategy"]
    assert set(p["gb_per_gpu_by_zero_stage"]) == {"0"}


def test_small_model_on_tier3_is_pure_data_parallel() -> None:
    p = parallelism(model_params_b=13, gpus_per_node=8, nodes=4, gpu_memory_gb=80)
    assert p["fits"] and (p["tp"], p["pp"], p["dp"], p["zero_stage"]) == (4, 1, 8, 0)


@pytest.mark.parametrize(("params_b", "tp", "pp", "gpus"), MEGATRON_TABLE_1)
def test_megatron_table_1_layouts_are_consistent(params_b: float, tp: int, pp: int, gpus: int) -> None:
    """The paper's layouts trained in 80 GB with activations, so: TP never above the 8 GPUs of a node,
    the plan fits, it needs no more model parallelism than the paper used, and the paper's own
    layout passes this fit check."""
    nodes = gpus // 8
    p = parallelism(model_params_b=params_b, gpus_per_node=8, nodes=nodes, gpu_memory_gb=80)
    assert p["fits"] and p["gb_per_gpu"] <= p["gpu_memory_budget_gb"]
    assert p["tp"] <= 8 and 8 % p["tp"] == 0
    assert p["tp"] * p["pp"] <= tp * pp
    if pp > 1:
        assert p["tp"] == 8  # TP fills the node before PP crosses nodes (takeaway 1)
    theirs = parallelism(
        model_params_b=params_b,
        gpus_per_node=8,
        nodes=nodes,
        gpu_memory_gb=80,
        tensor_parallel=tp,
        pipeline_parallel=pp,
    )
    assert theirs["fits"] and (theirs["tp"], theirs["pp"]) == (tp, pp)


def test_tensor_parallel_across_nodes_is_refused() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_workload\.tensor_parallel.*NVLink"):
        parallelism(model_params_b=70, gpus_per_node=8, nodes=2, gpu_memory_gb=80, tensor_parallel=16)


def test_pipeline_must_divide_nodes() -> None:
    with pytest.raises(PlanError, match=r"pipeline_parallel"):
        parallelism(model_params_b=70, gpus_per_node=8, nodes=4, gpu_memory_gb=80, pipeline_parallel=3)


def test_bytes_per_param_keeps_fp16_params_and_grads() -> None:
    """18 B/param (ml-engineering, fp32 grads; dossier 9.2) leaves 14 bytes sharded by ZeRO-1."""
    p = parallelism(model_params_b=1, gpus_per_node=8, nodes=1, gpu_memory_gb=80, bytes_per_param=18)
    assert p["bytes_per_param"] == 18.0 and p["bytes_split"]["optimizer"] == 14.0
    with pytest.raises(PlanError, match="bytes_per_param"):
        parallelism(model_params_b=1, gpus_per_node=8, nodes=1, gpu_memory_gb=80, bytes_per_param=3)


@given(
    params=st.floats(0.1, 3000),
    gpn=st.sampled_from([1, 2, 4, 6, 8, 16]),
    nodes=st.integers(1, 64),
    mem=st.sampled_from([24, 48, 80, 141, 180]),
)
def test_the_recommendation_passes_its_own_fit_check(params: float, gpn: int, nodes: int, mem: int) -> None:
    p = parallelism(model_params_b=params, gpus_per_node=gpn, nodes=nodes, gpu_memory_gb=mem)
    assert p["tp"] * p["pp"] * p["dp"] == gpn * nodes
    assert p["tp"] <= gpn and gpn % p["tp"] == 0
    assert p["zero_stage"] in (0, 1, 2, 3)
    assert p["zero_stage"] == 0 or p["dp"] > 1
    assert ("ZeRO" in p["strategy"]) == (p["zero_stage"] > 0)
    assert p["gb_per_gpu"] == p["gb_per_gpu_by_zero_stage"][str(p["zero_stage"])]
    if p["fits"]:
        assert p["gb_per_gpu"] <= p["gpu_memory_budget_gb"] + 0.01
        assert "does not fit" not in p["strategy"]
    else:
        assert p["gb_per_gpu"] > p["gpu_memory_budget_gb"]
        assert p["strategy"].startswith("does not fit")
        # nothing fits: the shown layout already spreads the state over every GPU
        assert p["gb_per_gpu"] == pytest.approx(p["state_gb_total"] / (gpn * nodes), rel=1e-2)
        assert p["smallest_fitting_tier"] is None or p["smallest_fitting_tier"] in p["strategy"]
