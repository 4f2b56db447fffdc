"""Parallelism: tensor parallel inside a node, pipeline and data parallel across nodes.

The recommendation always passes its own fit check: the model state per GPU of the
recommended (TP, PP, DP, ZeRO stage) is at most the budget, GPU memory x headroom.

Model state (ZeRO paper: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models", arXiv:1910.02054, sections 3.1 and 5.1, Figure 1):
mixed-precision Adam keeps 2 bytes of fp16 parameters + 2 bytes of fp16 gradients + K = 12
bytes of optimizer state (fp32 parameters, momentum, variance) = 16 bytes per parameter
(docs/sources.md §9.2). With Nd data-parallel ranks, per GPU:

    stage 0 (plain DP)        (2 + 2 + K) x psi
    stage 1 (P_os)            2 psi + 2 psi + K psi / Nd
    stage 2 (P_os+g)          2 psi + (2 + K) psi / Nd
    stage 3 (P_os+g+p)        (2 + 2 + K) psi / Nd

where psi is the parameters held by one model-parallel rank (parameters / (TP x PP):
Megatron-LM splits every layer over TP and the layers over PP).

Search order (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", arXiv:2104.04473, section 3 takeaways 1 and 2; tiers.md): TP
inside a node only (a power-of-two divisor of the GPUs per node; across nodes its all-reduces
cost 100-1000x in latency), then PP across nodes, DP = the rest; use as much model parallelism
as the model needs and no more. Only when TP x PP alone does not fit are ZeRO stages 1, 2, 3
tried, lowest first (stages 1 and 2 move no more data than plain DP, stage 3 moves 1.5x: ZeRO
paper section 7), and only where DP > 1: with one DP rank there is nothing to shard across.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import GpuSection, ParallelismSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import TIERS

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site

# ZeRO paper section 3.1: mixed-precision Adam, 2 + 2 + K bytes per parameter with K = 12.
PARAM_BYTES = 2.0
GRAD_BYTES = 2.0
OPTIMIZER_BYTES = 12.0
# The share of GPU memory the model state may take; the rest is the explicit headroom for
# activations, temporary buffers and fragmentation. docs/sources.md §9.1: activation/runtime overhead
# "commonly 10-20 %"; docs/sources.md §9.2: 16 (lower bound) to 20 (with buffers) bytes per parameter
# before activations. Activation memory depends on micro-batch, sequence length and activation
# recomputation (Narayanan et al. 2021 section 3.5), none of which the inventory describes, so the
# plan keeps a fixed share: 0.8 leaves 20 % of HBM for activations and buffers.
DEFAULT_MEMORY_HEADROOM = 0.8
ZERO_STAGES = (0, 1, 2, 3)
ZERO_NAMES = {
    0: "plain data parallel (no sharding)",
    # Megatron-Core's distributed optimizer shards the optimizer state like ZeRO-1
    1: "ZeRO-1 (optimizer state sharded)",
    # PyTorch FSDP ShardingStrategy.SHARD_GRAD_OP is the ZeRO-2 equivalent, FULL_SHARD the ZeRO-3 one
    2: "ZeRO-2 / FSDP SHARD_GRAD_OP (optimizer state and gradients sharded)",
    3: "ZeRO-3 / FSDP FULL_SHARD (parameters, gradients and optimizer state sharded)",
}
_EPS = 1e-9


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True)
class StateBytes:
    """Bytes of model state per parameter: fp16 parameters, fp16 gradients, optimizer state (ZeRO paper 3.1)."""

    params: float = PARAM_BYTES
    grads: float = GRAD_BYTES
    optimizer: float = OPTIMIZER_BYTES

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer

    def per_gpu_gb(self, params_b: float, zero_stage: int, model_parallel: int = 1, dp: int = 1) -> float:
        """GB (1e9 bytes) per GPU: ZeRO paper Figure 1 with psi = params / model_parallel, Nd = dp."""
        psi = params_b / model_parallel  # billions of parameters x bytes = GB
        if zero_stage == 0:
            return self.total * psi
        if zero_stage == 1:
            return (self.params + self.grads) * psi + self.optimizer * psi / dp
        if zero_stage == 2:
            return self.params * psi + (self.grads + self.optimizer) * psi / dp
        if zero_stage == 3:
            return self.total * psi / dp
        raise PlanError("zero_stage", zero_stage, "0, 1, 2 or 3")


@dataclass(frozen=True)
class Layout:
    """One (TP, PP, DP, ZeRO stage) and its model state per GPU."""

    tp: int
    pp: int
    dp: int
    zero_stage: int
    gb_per_gpu: float


def _layout(params_b: float, state: StateBytes, tp: int, pp: int, total: int, zero_stage: int) -> Layout:
    dp = total // (tp * pp)
    return Layout(tp, pp, dp, zero_stage, state.per_gpu_gb(params_b, zero_stage, tp * pp, dp))


def _search(
    params_b: float, state: StateBytes, tps: list[int], pps: list[int], total: int, budget_gb: float
) -> Layout | None:
    """The first layout that fits: lowest ZeRO stage, then fewest pipeline stages, then smallest TP.

    TP grows inside the node before PP crosses nodes; ZeRO stages only where DP > 1.
    """
    for stage in ZERO_STAGES:
        for pp in pps:
            for tp in tps:
                layout = _layout(params_b, state, tp, pp, total, stage)
                if stage and layout.dp == 1:
                    continue  # nothing to shard across
                if layout.gb_per_gpu <= budget_gb + _EPS:
                    return layout
    return None


def headroom_text(memory_gb: float, budget_gb: float) -> str:
    """How the GPU memory is split between model state and the activations headroom."""
    return f"{budget_gb:g} GB for model state and {memory_gb - budget_gb:g} GB kept for activations and buffers"


def _power_of_two_divisors(n: int) -> list[int]:
    return [d for d in _divisors(n) if d & (d - 1) == 0] or [1]


def _tp_candidates(gpus_per_node: int, nvlink_domain_gpus: int | None) -> list[int]:
    """TP sizes the search tries: power-of-two divisors of the node's GPUs, within its NVLink domain
    (compute/interconnect.py: 1 on a PCIe-only node, 2 for bridged pairs, the node on NVSwitch)."""
    domain = gpus_per_node if nvlink_domain_gpus is None else min(nvlink_domain_gpus, gpus_per_node)
    return [d for d in _power_of_two_divisors(gpus_per_node) if d <= domain] or [1]


def smallest_fitting_tier(
    params_b: float,
    gpu_memory_gb: float,
    memory_headroom: float = DEFAULT_MEMORY_HEADROOM,
    state: StateBytes | None = None,
    nvlink_domain_gpus: int | None = None,
) -> str | None:
    """The smallest reference tier (tiers.py) whose GPUs, with this GPU memory, hold the model state
    (TP within ``nvlink_domain_gpus``, default the whole node)."""
    state = state or StateBytes()
    for profile in TIERS.values():
        gpn = profile.gpus // profile.nodes
        tps, pps = _tp_candidates(gpn, nvlink_domain_gpus), _divisors(profile.nodes)
        if _search(params_b, state, tps, pps, profile.gpus, gpu_memory_gb * memory_headroom):
            return profile.name
    return None


def parallelism(
    *,
    model_params_b: float | None,
    gpus_per_node: int,
    nodes: int,
    gpu_memory_gb: float,
    tensor_parallel: int | None = None,
    pipeline_parallel: int | None = None,
    bytes_per_param: float | None = None,
    memory_headroom: float = DEFAULT_MEMORY_HEADROOM,
    nvlink_domain_gpus: int | None = None,
    field: str = "gpucluster_workload",
) -> ParallelismSection:
    """TP/PP/DP and ZeRO stage whose model state per GPU fits GPU memory x ``memory_headroom``.

    ``nvlink_domain_gpus`` (compute/interconnect.py; default: every GPU of the node) bounds the TP the
    search picks: TP only pays inside an NVLink domain (docs/sources.md [S18]). A site's explicit
    ``tensor_parallel`` may go beyond it, up to the node, and the plan says what that costs.

    ``bytes_per_param`` (default 16, the ZeRO paper's figure) keeps 2 + 2 bytes of fp16
    parameters and gradients; the rest is optimizer state (e.g. 18 = 14 bytes of it).

    Longer than 80 lines on purpose: the inputs' checks, the search and the section whose ``strategy`` and
    ``notes`` explain the choice with the same dozen figures; the search itself is :func:`_search`.
    """
    params = check_range(model_params_b, f"{field}.model_params_b", 0.001, 100000)
    gpn = int(check_range(gpus_per_node, "gpucluster_node.gpus_per_node", 1, None, integer=True))
    nodes = int(check_range(nodes, "groups.compute", 1, None, integer=True))
    memory = check_range(gpu_memory_gb, "gpu_memory_gb", 1, None)
    headroom = check_range(memory_headroom, "memory_headroom", 0.1, 1.0)
    total = gpn * nodes
    state = StateBytes()
    if bytes_per_param is not None:
        bpp = check_range(bytes_per_param, "bytes_per_param", PARAM_BYTES + GRAD_BYTES, 64)
        state = StateBytes(optimizer=bpp - PARAM_BYTES - GRAD_BYTES)
    if tensor_parallel is not None:
        tp = int(check_range(tensor_parallel, f"{field}.tensor_parallel", 1, None, integer=True))
        if tp > gpn or gpn % tp:
            raise PlanError(
                f"{field}.tensor_parallel",
                tensor_parallel,
                f"a divisor of the {gpn} GPUs of one node: tensor parallelism stays inside a "
                "node's NVLink domain (across nodes it costs 100-1000x in latency)",
            )
        tps = [tp]
    else:
        tps = _tp_candidates(gpn, nvlink_domain_gpus)
    if pipeline_parallel is not None:
        pp = int(check_range(pipeline_parallel, f"{field}.pipeline_parallel", 1, None, integer=True))
        if nodes % pp:
            raise PlanError(f"{field}.pipeline_parallel", pipeline_parallel, f"a divisor of {nodes} nodes")
        pps = [pp]
    else:
        pps = _divisors(nodes)
    state_gb = params * state.total
    budget = memory * headroom
    found = _search(params, state, tps, pps, total, budget)
    fits = found is not None
    # nothing fits: show the layout with the least memory per GPU, the most model parallelism
    # allowed and ZeRO-3 over the rest (when there is a rest)
    choice = found or _layout(params, state, tps[-1], pps[-1], total, 3 if total > tps[-1] * pps[-1] else 0)
    tp, pp, dp, stage = choice.tp, choice.pp, choice.dp, choice.zero_stage
    by_stage = {str(s): round(state.per_gpu_gb(params, s, tp * pp, dp), 2) for s in ZERO_STAGES if s == 0 or dp > 1}
    smallest = smallest_fitting_tier(params, memory, headroom, state, nvlink_domain_gpus)
    layout = f"TP={tp} inside each node, PP={pp} across nodes, DP={dp}"
    budget_text = f"{budget:g} GB budget ({memory:g} GB x {headroom:g})"
    gb_text = f"{round(choice.gb_per_gpu, 2):g} GB"
    notes: list[str] = []
    domain = gpn if nvlink_domain_gpus is None else min(nvlink_domain_gpus, gpn)
    if tp > domain:
        notes.append(
            f"TP={tp} from {field}.tensor_parallel spans more than the {domain} GPU(s) of one NVLink domain: its "
            "all-reduces cross PCIe, an order of magnitude below NVLink (docs/sources.md [S18])"
        )
    elif domain < gpn and tensor_parallel is None:
        notes.append(
            f"TP kept within the NVLink domain of {domain} GPU(s) (of {gpn} per node): tensor parallelism is only "
            f"efficient at NVLink speed; {field}.tensor_parallel can set a larger one"
        )
    if fits:
        sharding = f" with {ZERO_NAMES[stage]} across the {dp} data-parallel ranks" if stage else ""
        strategy = f"{layout}{sharding}: {gb_text} of model state per GPU, within the {budget_text}"
        if stage:
            notes.append(
                f"TP x PP alone leaves {by_stage['0']:g} GB per GPU, above the {budget:g} GB budget; "
                f"{ZERO_NAMES[stage]} over DP={dp} brings it to {gb_text}"
            )
    else:
        where = smallest or "none of the reference tiers"
        sharded = f" and {ZERO_NAMES[3]}" if stage else ""
        strategy = (
            f"does not fit: {state_gb:.0f} GB of model state needs {gb_text} per GPU even "
            f"with {layout}{sharded}, above the {budget_text}; smallest reference tier that fits "
            f"(same GPU model): {where}"
        )
        notes.append(
            f"{params:g}B parameters x {state.total:g} bytes = {state_gb:.0f} GB of model state does not fit "
            f"{total} GPUs of {memory:g} GB with {headroom_text(memory, budget)}. Smallest reference tier that "
            f"fits with this GPU model: {where}. Offloading the optimizer state to host memory (ZeRO-Offload) "
            "or a smaller optimizer state is outside this plan"
        )
    return {
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "zero_stage": stage,
        "model_params_b": params,
        "total_gpus": total,
        "bytes_per_param": state.total,
        "bytes_split": {"params": state.params, "grads": state.grads, "optimizer": state.optimizer},
        "state_gb_total": round(state_gb, 1),
        "state_gb_per_gpu": round(state_gb / (tp * pp), 2),
        "state_gb_per_gpu_sharded": round(state_gb / total, 2),
        "gb_per_gpu": round(choice.gb_per_gpu, 2),
        "gb_per_gpu_by_zero_stage": by_stage,
        "gpu_memory_gb": memory,
        "memory_headroom": headroom,
        "gpu_memory_budget_gb": round(budget, 1),
        "activations_headroom_gb": round(memory - budget, 1),
        "fits": fits,
        "tp_domain_gpus": domain,
        "smallest_fitting_tier": smallest,
        "strategy": strategy,
        "notes": notes,
    }


def site_parallelism(site: Site, gpu: GpuSection) -> ParallelismSection:
    """plan.parallelism: the site's workload on its GPUs (``gpu``: plan.gpu, its memory and NVLink domain)."""
    wl = site.workload_model
    return parallelism(
        model_params_b=wl.model_params_b,
        gpus_per_node=site.node.gpus_per_node,
        nodes=len(site.compute_hosts),
        gpu_memory_gb=gpu["model"]["memory_gb"],
        tensor_parallel=wl.tensor_parallel,
        pipeline_parallel=wl.pipeline_parallel,
        nvlink_domain_gpus=gpu["interconnect"]["domain_gpus"],
    )
