"""Parallelism: tensor parallel inside a node, pipeline and data parallel across nodes.

tiers.md: tensor parallelism stays inside the NVLink domain of one node (crossing nodes
costs 100-1000x in latency); pipeline and data parallelism cross nodes. Training state
per parameter (dossier 9.2): 16 bytes (ZeRO paper, bf16 weights and grads + fp32 master
and Adam moments) to 18 (fp32 grads), before activations.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError, check_range


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def parallelism(
    *,
    model_params_b: float,
    gpus_per_node: int,
    nodes: int,
    gpu_memory_gb: float,
    tensor_parallel: int | None = None,
    pipeline_parallel: int | None = None,
    bytes_per_param: float = 16.0,
    memory_headroom: float = 0.8,
    field: str = "gpucluster_workload",
) -> dict[str, Any]:
    params = check_range(model_params_b, f"{field}.model_params_b", 0.001, 100000)
    total = gpus_per_node * nodes
    if tensor_parallel is not None:
        tp = check_range(tensor_parallel, f"{field}.tensor_parallel", 1, None, integer=True)
        if tp > gpus_per_node or gpus_per_node % tp:
            raise PlanError(
                f"{field}.tensor_parallel",
                tensor_parallel,
                f"a divisor of the {gpus_per_node} GPUs of one node: tensor parallelism stays inside a "
                "node's NVLink domain (across nodes it costs 100-1000x in latency)",
            )
        tps = [tp]
    else:
        tps = [d for d in _divisors(gpus_per_node) if d & (d - 1) == 0] or [1]
    if pipeline_parallel is not None:
        pp = check_range(pipeline_parallel, f"{field}.pipeline_parallel", 1, None, integer=True)
        if nodes % pp:
            raise PlanError(f"{field}.pipeline_parallel", pipeline_parallel, f"a divisor of {nodes} nodes")
        pps = [pp]
    else:
        pps = _divisors(nodes)
    state_gb = params * bytes_per_param  # billions of params x bytes = GB
    budget = gpu_memory_gb * memory_headroom
    choice = None
    # grow TP inside the node first (NVLink), then PP across nodes
    for pp in pps:
        for tp in tps:
            if state_gb / (tp * pp) <= budget:
                choice = (tp, pp)
                break
        if choice:
            break
    fits = choice is not None
    tp, pp = choice or (tps[-1], pps[-1])
    dp = total // (tp * pp)
    sharded = state_gb / total
    notes = []
    if fits:
        strategy = f"TP={tp} inside each node, PP={pp} across nodes, DP={dp}"
    else:
        strategy = f"TP={tp}, PP={pp}, DP={dp} with ZeRO-3/FSDP sharding of the training state"
        notes.append(
            f"{state_gb:.0f} GB of training state does not fit {tp * pp} GPUs of {gpu_memory_gb:g} GB "
            f"without sharding; ZeRO-3/FSDP over all {total} GPUs needs {sharded:.1f} GB each"
        )
    return {
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "total_gpus": total,
        "bytes_per_param": bytes_per_param,
        "state_gb_total": round(state_gb, 1),
        "state_gb_per_gpu": round(state_gb / (tp * pp), 2),
        "state_gb_per_gpu_sharded": round(sharded, 2),
        "gpu_memory_budget_gb": round(budget, 1),
        "fits": fits,
        "fits_sharded": sharded <= budget,
        "strategy": strategy,
        "notes": notes,
    }
