"""The report's sections on the compute nodes: the tier and its training fit, GPU clocks and power, inside the
node, GPU bring-up, MIG, power, UPS, cooling and parallelism (each a function of the plan; report/sections.py
lists them in report order)."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.bringup import bringup_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import intra_node_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import ParallelismSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.parallelism import ZERO_NAMES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.ups import ups_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.model import Row, Section
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.text import fmt, kw, pair, sentences


def tier_section(plan: Plan) -> Section:
    c, tier = plan["cluster"], plan["tier"]
    return Section(
        "Tier",
        [
            [
                "reference tier",
                c["tier"],
                f"{tier['nodes']} nodes / {tier['gpus']} GPUs reference"
                if c["compute_nodes"] == tier["nodes"]
                else f"{c['compute_nodes']} nodes / {c['gpus_total']} GPUs, "
                f"tier reference {tier['nodes']} / {tier['gpus']}",
            ],
            ["compute nodes", c["compute_nodes"], f"inventory; the {c['tier']} reference has {tier['nodes']}"],
            [
                "storage read (GB/s)",
                pair(("floor", "upper"), tier["storage_read_gbps"], "GB/s"),
                "tier profile: reference range",
            ],
            [
                "storage write (GB/s)",
                pair(("floor", "upper"), tier["storage_write_gbps"], "GB/s"),
                "tier profile: reference range",
            ],
            _scheduler_row(c["scheduler"], tier["scheduler"]),
            training_fit_row(plan),
        ],
    )


def largest_full_fine_tune_b(par: ParallelismSection) -> float:
    """The largest model (billions of parameters) whose full fine-tuning state fits this cluster's GPUs.

    Its model state spread over every GPU (TP x PP x DP sharding, or ZeRO-3) at the planned bytes per
    parameter, within the per-GPU memory budget the Parallelism section uses (docs/tiers.md, "training
    fit": the ZeRO paper's memory formula). It is the ceiling the Parallelism section's "fits" is
    checked against, so the two never disagree."""
    return par["total_gpus"] * par["gpu_memory_budget_gb"] / par["bytes_per_param"]


def training_fit_row(plan: Plan) -> Row:
    """The tier table's fit line, computed from this cluster's plan (not the reference articles' claim)."""
    par = plan["parallelism"]
    ceiling = largest_full_fine_tune_b(par)
    value = (
        f"full fine-tune up to ~{fmt(round(ceiling))}B parameters ({par['total_gpus']} GPUs x "
        f"{fmt(par['gpu_memory_budget_gb'])} GB / {fmt(par['bytes_per_param'])} bytes)"
    )
    model = par.get("model_params_b")
    if model is not None:
        value += f"; this site's {fmt(model)}B model " + ("fits" if par["fits"] else "does not fit")
        if not par["fits"] and model <= ceiling:
            value += " with the parallelism the inventory pins"
    how = (
        "the cluster's GPUs x the per-GPU memory budget / bytes of model state per parameter "
        "(Parallelism section); QLoRA and offloading are outside this plan"
    )
    return ["training fit", value, how]


#: what each scheduler path runs, as the report names it (gpucluster_cluster.scheduler)
SCHEDULER_NAMES = {"slurm": "Slurm + MPI", "kubernetes": "Kubernetes (Kueue, KubeRay)"}


def _scheduler_row(scheduler: str, profile: str) -> Row:
    """The scheduler the plan uses, not the tier profile's when the site chose the other path."""
    name = SCHEDULER_NAMES.get(scheduler, scheduler)
    if name == profile:
        return ["scheduler", name, "tier profile"]
    return ["scheduler", name, f"gpucluster_cluster.scheduler: {scheduler} (the tier profile has {profile})"]


def gpu_section(plan: Plan) -> Section:
    gpu = plan["gpu"]
    model, clocks, temp = gpu["model"], gpu["clocks"], gpu["temperature"]
    sm, mem = clocks.get("lock_gpu_clocks"), clocks.get("lock_memory_clocks")
    source = clocks.get("power_limit_source")
    limit_how = clocks.get("power_limit_reason") or ""
    limit_how = "; ".join(
        t
        for t in (
            limit_how,
            f"source {source}" if source else "",
            f"within {fmt(model['power_min_w'])}-{fmt(model['power_max_w'])} W",
        )
        if t
    )
    return Section(
        "GPU clocks and power",
        [
            ["model", model["name"], f"catalog {model['key']}"],
            ["policy", clocks["policy"], "gpucluster_gpu_policy.clock_policy"],
            [
                "SM clock lock (MHz)",
                pair(("min", "max"), sm, "MHz") if sm else "not locked",
                f"<= clocks.max.sm {fmt(model['max_sm_mhz'])} MHz",
            ],
            [
                "memory clock lock (MHz)",
                pair(("min", "max"), mem, "MHz") if mem else "not locked",
                f"<= clocks.max.mem {fmt(model['max_mem_mhz'])} MHz",
            ],
            ["power limit (W)", clocks["power_limit_w"], limit_how],
            ["nvidia-smi at boot", "; ".join(clocks["apply_args"]), "oneshot unit after nvidia-persistenced"],
            ["GPU temperature warn (C)", temp["warn_c"], f"max operating {fmt(temp['critical_c'])} C - 3"],
            ["GPU temperature critical / drain (C)", temp["critical_c"], f"max operating temp ({temp['source']})"],
        ],
        sentences(clocks["notes"]),
    )


def inside_node_section(plan: Plan) -> Section | None:
    """NVSwitch, NVLink bridges or PCIe only, and what follows (compute/interconnect.py)."""
    if "interconnect" not in plan["gpu"]:
        return None
    return Section("Inside the node", intra_node_rows(plan))


def bringup_section(plan: Plan) -> Section | None:
    """Fabric Manager, GPUDirect RDMA and its inputs, PCIe path (compute/bringup.py)."""
    if not plan["gpu"].get("bringup"):
        return None
    return Section("GPU bring-up", bringup_rows(plan["gpu"]["bringup"]))


def mig_section(plan: Plan) -> Section | None:
    """MIG partitioning (compute/mig.py), only where the site plans it."""
    mig = plan["gpu"].get("mig")
    if not mig:
        return None
    rows = [
        [
            f"mig[{i}] {e['nodes']} GPUs {e['gpus'] if e['gpus'] == 'all' else ','.join(map(str, e['gpus']))}",
            ", ".join(e["profiles"]),
            "placed at memory slices " + ", ".join(f"{p} {s}" for p, s in e["placement"]),
        ]
        for i, e in enumerate(mig["entries"])
    ]
    rows += [
        [
            f"Slurm {name}",
            c["gres"],
            f"{c['hosts']}: MultipleFiles= lines written by the node from its driver (gres.conf Include)",
        ]
        for name, c in mig["configs"].items()
    ]
    rows.append(["mig-parted config", mig["config_file"], "gpucluster-mig.service applies the node's config at boot"])
    acct = (plan.get("slurm") or {}).get("accounting") or {}
    billing = acct.get("billing") or {}
    if billing.get("unit") == "mig_slice":  # Slurm bills MIG slices (compute/mig.py billing_weights)
        weights = ", ".join(f"{k} {v:g}" for k, v in billing["weights"].items())
        rows.append(
            [
                "Slurm billing (MIG slices)",
                acct["billing_weights"],
                f"slices per device: {weights}; untyped GRES/gpu bills {billing['untyped']:g} (the smallest), "
                "GRES/gpu:<type> the rest, so a job that names its type bills its slices",
            ]
        )
        limits = [f"{q['name']} {q['grp_gpus']}" for q in acct.get("qos", []) if q.get("grp_gpus")]
        rows.append(
            [
                "Slurm GPU limits unit",
                f"billing, {billing['per_gpu']} slices per GPU",
                "QOS and account limits (GrpTRES, MaxTRESPerUser) are billing limits in slices"
                + (f": {', '.join(limits)}" if limits else ""),
            ]
        )
    intro = (
        f"{mig['mig_gpus']} GPUs in MIG mode ({mig['model']}: {mig['compute_slices']} compute and "
        f"{mig['memory_slices']} memory slices per GPU; profiles and starts from NVIDIA's MIG user guide). "
        "MIG instances have no NVLink or P2P between them: the all_reduce floors apply to whole GPUs only."
    )
    return Section("MIG partitioning", rows, intro)


def power_section(plan: Plan) -> Section:
    c, pw, clocks = plan["cluster"], plan["power"], plan["gpu"]["clocks"]
    gpu_kw, node_kw, per_rack = pw["gpu_load_kw_per_node"], pw["node_kw"], pw["nodes_per_rack"]
    base_kw = round(node_kw - gpu_kw, 3)
    rack_how = f"{per_rack} nodes x {kw(node_kw)} kW; budget {fmt(pw['rack_budget_kw'])} kW"
    if pw.get("capped") and pw.get("rack_kw_uncapped") is not None:
        rack_how += f"; {fmt(pw['rack_kw_uncapped'])} kW at the uncapped limit"
    per_circuit = pw["nodes_per_circuit"]
    return Section(
        "Power",
        [
            [
                "GPU load per node (kW)",
                gpu_kw,
                f"{c['gpus_per_node']} GPUs x {clocks['power_limit_w']} W",
            ],
            ["node (kW)", node_kw, f"{kw(gpu_kw)} kW GPU load + {kw(base_kw)} kW base load"],
            ["GPU load, all nodes (kW)", pw["gpu_load_kw_total"], f"{c['compute_nodes']} nodes x {kw(gpu_kw)} kW"],
            ["nodes per rack", per_rack, f"ceil({c['compute_nodes']} nodes / gpucluster_facility.racks)"],
            ["rack (kW)", pw["rack_kw"], rack_how],
            ["per-GPU cap to fit (W)", pw["per_gpu_cap_w_to_fit"], "n/a when the rack fits"],
            ["usable per circuit (kW)", pw["circuit_kw"], "V x A (x sqrt 3 for three phases) x 0.8 continuous load"],
            ["nodes per circuit", per_circuit, f"floor({kw(pw['circuit_kw'])} kW / {kw(node_kw)} kW)"],
            [
                "circuits per rack",
                pw["circuits_per_rack"],
                f"ceil({per_rack} nodes / {per_circuit} per circuit)" if per_circuit else "",
            ],
        ],
        sentences(pw["notes"]),
    )


def ups_section(plan: Plan) -> Section | None:
    """UPS runtime vs the graceful shutdown (compute/ups.py, playbooks/shutdown.yml)."""
    if "ups" not in plan:
        return None
    return Section("Power protection (UPS)", ups_rows(plan["ups"]))


def cooling_section(plan: Plan) -> Section:
    cool, pw = plan["cooling"], plan["power"]
    if cool["cooling"] != "dlc":
        return Section("Cooling", [["cooling", "air", "no coolant alarms"]])
    dt = cool.get("design_delta_t_k")
    return Section(
        "Direct liquid cooling (per rack)",
        [
            [
                "heat into the loop (kW)",
                cool["liquid_heat_kw"],
                f"{fmt(pw['rack_kw'])} kW rack x {fmt(cool['liquid_fraction'])} liquid fraction",
            ],
            [
                "required flow (L/min)",
                cool["required_flow_lpm"],
                f"{fmt(cool['liquid_heat_kw'])} kW / (4.186 kJ/(kg K) x {fmt(dt)} K) x 60",
            ],
            [
                "supply (C)",
                pair(("warn", "max"), [cool["supply_warn_c"], cool["supply_max_c"]], "C"),
                f"ASHRAE {cool['ashrae_class']}",
            ],
            [
                "return (C)",
                pair(("warn", "max"), [cool["return_warn_c"], cool["return_max_c"]], "C"),
                f"supply max + {fmt(dt)} K (+2)",
            ],
            [
                "dT (K)",
                pair(("low", "high"), [cool["delta_t_low_k"], cool["delta_t_high_k"]], "K"),
                f"0.5x / 1.5x design dT {fmt(dt)} K",
            ],
            [
                "flow (L/min)",
                pair(("low", "critical"), [cool["flow_low_lpm"], cool["flow_critical_lpm"]], "L/min"),
                f"90 % / 80 % of {fmt(cool['required_flow_lpm'])} L/min",
            ],
        ],
        sentences(cool.get("notes") or []),
    )


def parallelism_section(plan: Plan) -> Section:
    par = plan["parallelism"]
    stage = par.get("zero_stage", 0)
    mem, headroom = par.get("gpu_memory_gb"), par.get("memory_headroom")
    split = par.get("bytes_split") or {}
    bytes_how = f"{fmt(par['bytes_per_param'])} bytes per parameter"
    if split:
        bytes_how += (
            f" ({fmt(split['params'])} params + {fmt(split['grads'])} grads + "
            f"{fmt(split['optimizer'])} optimizer state; ZeRO paper)"
        )
    if par.get("model_params_b") is not None:
        bytes_how = f"{fmt(par['model_params_b'])} B params x {bytes_how}"
    budget_how = f"budget {fmt(par['gpu_memory_budget_gb'])} GB"
    if mem is not None and headroom is not None:
        budget_how += f" = {fmt(mem)} GB x {fmt(headroom)}"
    by_stage = par.get("gb_per_gpu_by_zero_stage") or {}
    rows: list[Row] = [
        ["TP x PP x DP", f"{par['tp']} x {par['pp']} x {par['dp']}", par["strategy"]],
        [
            "ZeRO stage",
            stage,
            "none: DP=1, nothing to shard across" if par["dp"] == 1 else ZERO_NAMES.get(stage, ""),
        ],
        ["model state (GB)", par["state_gb_total"], bytes_how],
        [
            "model state per GPU (GB)",
            par.get("gb_per_gpu", par["state_gb_per_gpu"]),
            f"{budget_how}; by ZeRO stage: "
            + (", ".join(f"stage {s} {fmt(v)} GB" for s, v in by_stage.items()) or "n/a"),
        ],
    ]
    if par.get("activations_headroom_gb") is not None:
        rows.append(
            [
                "activations headroom per GPU (GB)",
                par["activations_headroom_gb"],
                f"{fmt(mem)} GB - {fmt(par['gpu_memory_budget_gb'])} GB budget: activations, buffers",
            ]
        )
    rows.append(
        [
            "fits this cluster",
            "yes" if par["fits"] else "no",
            "smallest reference tier that fits (same GPU model): "
            + (par.get("smallest_fitting_tier") or "none of the reference tiers"),
        ]
    )
    return Section("Parallelism", rows, sentences(par["notes"]))
