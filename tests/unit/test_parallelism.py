"""Parallelism: TP inside a node only (tiers.md), training state 16 B/param (dossier 9.2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.module_utils.parallelism import parallelism


def test_13b_fits_one_node() -> None:
    """13B x 16 B = 208 GB; TP=4 gives 52 GB per 80 GB GPU (64 GB budget)."""
    p = parallelism(model_params_b=13, gpus_per_node=8, nodes=1, gpu_memory_gb=80)
    assert (p["tp"], p["pp"], p["dp"]) == (4, 1, 2)
    assert p["fits"]


def test_70b_on_two_nodes_is_tight() -> None:
    """70B x 16 B = 1120 GB over 16 GPUs is 70 GB each: above the 64 GB budget (80 % of 80 GB)."""
    p = parallelism(model_params_b=70, gpus_per_node=8, nodes=2, gpu_memory_gb=80)
    assert (p["tp"], p["pp"], p["dp"]) == (8, 2, 1)
    assert p["state_gb_per_gpu_sharded"] == 70.0
    assert not p["fits"] and not p["fits_sharded"]
    assert "ZeRO-3" in p["strategy"] and "70.0 GB each" in p["notes"][0]


def test_small_model_on_tier3_is_pure_data_parallel() -> None:
    p = parallelism(model_params_b=13, gpus_per_node=8, nodes=4, gpu_memory_gb=80)
    assert p["fits"] and (p["tp"], p["pp"], p["dp"]) == (4, 1, 8)


def test_tensor_parallel_across_nodes_is_refused() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_workload\.tensor_parallel.*NVLink"):
        parallelism(model_params_b=70, gpus_per_node=8, nodes=2, gpu_memory_gb=80, tensor_parallel=16)


def test_pipeline_must_divide_nodes() -> None:
    with pytest.raises(PlanError, match=r"pipeline_parallel"):
        parallelism(model_params_b=70, gpus_per_node=8, nodes=4, gpu_memory_gb=80, pipeline_parallel=3)


@given(
    params=st.floats(0.1, 3000),
    gpn=st.sampled_from([1, 2, 4, 8, 16]),
    nodes=st.integers(1, 64),
    mem=st.sampled_from([24, 48, 80, 141, 180]),
)
def test_sizes_multiply_and_tp_stays_in_node(params: float, gpn: int, nodes: int, mem: int) -> None:
    p = parallelism(model_params_b=params, gpus_per_node=gpn, nodes=nodes, gpu_memory_gb=mem)
    assert p["tp"] * p["pp"] * p["dp"] == gpn * nodes
    assert p["tp"] <= gpn and gpn % p["tp"] == 0
