"""The plan as readable sections: each setting with its value and how it was reached.

report.md renders these rows as they are; keeping the wording here (pure data) keeps the
template free of arithmetic and lets tests read the report without Ansible. Two rules keep
the report readable for a newcomer:

- every pair of numbers carries its labels and unit ("min 1980 / max 1980 MHz"), never "1980, 1980";
- every formula row shows its inputs with their values ("64 GPUs x 24 h x $4.00/GPU-h x 0.20 I/O wait").

:func:`report_summary` is the report's opening: the warnings a reader must see first, then
the next steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import healing
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.bringup import bringup_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import INTRO as HEALTH_INTRO
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import health_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import intra_node_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.parallelism import ZERO_NAMES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.ups import ups_rows, ups_warnings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.tco import tco_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.ha import INTRO as HA_INTRO
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.ha import ha_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.mpi import INTRO as MPI_INTRO
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.mpi import mpi_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import raid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.checkpoint import drain_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.nvmeof import discovery_conf_text

Row = list[str]


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 100000 else str(value)
    if isinstance(value, (list, tuple)):
        # a bare "a, b" pair is unreadable: pairs go through _pair with labels; anything else is a list
        return " / ".join(_fmt(v) for v in value)
    return str(value).replace("|", "\\|")


def _kw(value: float) -> str:
    """kW in a formula's inputs: enough digits that the product matches the value shown."""
    return f"{value:,.3f}".rstrip("0").rstrip(".")


def _pair(labels: Sequence[str], values: Sequence[Any], unit: str = "") -> str:
    """'min 1980 / max 1980 MHz': each value after its label, the unit once at the end."""
    text = " / ".join(f"{label} {_fmt(v)}" for label, v in zip(labels, values, strict=True))
    return f"{text} {unit}".rstrip()


def _sentences(notes: Any) -> str:
    """Notes as one paragraph: each note ends with a full stop."""
    return " ".join(n if n.rstrip().endswith((".", "!", "?")) else f"{n.rstrip()}." for n in map(str, notes or []))


def _section(title: str, rows: list[Row], intro: str = "") -> dict[str, Any]:
    return {
        "title": title,
        "intro": intro,
        "rows": [[_fmt(c) if i == 1 else str(c) for i, c in enumerate(r)] for r in rows],
    }


def _tier_section(plan: dict[str, Any]) -> dict[str, Any]:
    c, tier = plan["cluster"], plan["tier"]
    return _section(
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
                _pair(("floor", "upper"), tier["storage_read_gbps"], "GB/s"),
                "tier profile: reference range",
            ],
            [
                "storage write (GB/s)",
                _pair(("floor", "upper"), tier["storage_write_gbps"], "GB/s"),
                "tier profile: reference range",
            ],
            _scheduler_row(c["scheduler"], tier["scheduler"]),
            _training_fit_row(plan),
        ],
    )


def largest_full_fine_tune_b(par: dict[str, Any]) -> float:
    """The largest model (billions of parameters) whose full fine-tuning state fits this cluster's GPUs.

    Its model state spread over every GPU (TP x PP x DP sharding, or ZeRO-3) at the planned bytes per
    parameter, within the per-GPU memory budget the Parallelism section uses (docs/tiers.md, "training
    fit": the ZeRO paper's memory formula). It is the ceiling the Parallelism section's "fits" is
    checked against, so the two never disagree."""
    return par["total_gpus"] * par["gpu_memory_budget_gb"] / par["bytes_per_param"]


def _training_fit_row(plan: dict[str, Any]) -> list[Any]:
    """The tier table's fit line, computed from this cluster's plan (not the reference articles' claim)."""
    par = plan["parallelism"]
    ceiling = largest_full_fine_tune_b(par)
    value = (
        f"full fine-tune up to ~{_fmt(round(ceiling))}B parameters ({par['total_gpus']} GPUs x "
        f"{_fmt(par['gpu_memory_budget_gb'])} GB / {_fmt(par['bytes_per_param'])} bytes)"
    )
    model = par.get("model_params_b")
    if model is not None:
        value += f"; this site's {_fmt(model)}B model " + ("fits" if par["fits"] else "does not fit")
        if not par["fits"] and model <= ceiling:
            value += " with the parallelism the inventory pins"
    how = (
        "the cluster's GPUs x the per-GPU memory budget / bytes of model state per parameter "
        "(Parallelism section); QLoRA and offloading are outside this plan"
    )
    return ["training fit", value, how]


#: what each scheduler path runs, as the report names it (gpucluster_cluster.scheduler)
SCHEDULER_NAMES = {"slurm": "Slurm + MPI", "kubernetes": "Kubernetes (Kueue, KubeRay)"}


def _scheduler_row(scheduler: str, profile: str) -> list[Any]:
    """The scheduler the plan uses, not the tier profile's when the site chose the other path."""
    name = SCHEDULER_NAMES.get(scheduler, scheduler)
    if name == profile:
        return ["scheduler", name, "tier profile"]
    return ["scheduler", name, f"gpucluster_cluster.scheduler: {scheduler} (the tier profile has {profile})"]


def _gpu_section(plan: dict[str, Any]) -> dict[str, Any]:
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
            f"within {_fmt(model['power_min_w'])}-{_fmt(model['power_max_w'])} W",
        )
        if t
    )
    return _section(
        "GPU clocks and power",
        [
            ["model", model["name"], f"catalog {model['key']}"],
            ["policy", clocks["policy"], "gpucluster_gpu_policy.clock_policy"],
            [
                "SM clock lock (MHz)",
                _pair(("min", "max"), sm, "MHz") if sm else "not locked",
                f"<= clocks.max.sm {_fmt(model['max_sm_mhz'])} MHz",
            ],
            [
                "memory clock lock (MHz)",
                _pair(("min", "max"), mem, "MHz") if mem else "not locked",
                f"<= clocks.max.mem {_fmt(model['max_mem_mhz'])} MHz",
            ],
            ["power limit (W)", clocks["power_limit_w"], limit_how],
            ["nvidia-smi at boot", "; ".join(clocks["apply_args"]), "oneshot unit after nvidia-persistenced"],
            ["GPU temperature warn (C)", temp["warn_c"], f"max operating {_fmt(temp['critical_c'])} C - 3"],
            ["GPU temperature critical / drain (C)", temp["critical_c"], f"max operating temp ({temp['source']})"],
        ],
        _sentences(clocks["notes"]),
    )


def _power_section(plan: dict[str, Any]) -> dict[str, Any]:
    c, pw, clocks = plan["cluster"], plan["power"], plan["gpu"]["clocks"]
    gpu_kw, node_kw, per_rack = pw["gpu_load_kw_per_node"], pw["node_kw"], pw["nodes_per_rack"]
    base_kw = round(node_kw - gpu_kw, 3)
    rack_how = f"{per_rack} nodes x {_kw(node_kw)} kW; budget {_fmt(pw['rack_budget_kw'])} kW"
    if pw.get("capped") and pw.get("rack_kw_uncapped") is not None:
        rack_how += f"; {_fmt(pw['rack_kw_uncapped'])} kW at the uncapped limit"
    per_circuit = pw["nodes_per_circuit"]
    return _section(
        "Power",
        [
            [
                "GPU load per node (kW)",
                gpu_kw,
                f"{c['gpus_per_node']} GPUs x {clocks['power_limit_w']} W",
            ],
            ["node (kW)", node_kw, f"{_kw(gpu_kw)} kW GPU load + {_kw(base_kw)} kW base load"],
            ["GPU load, all nodes (kW)", pw["gpu_load_kw_total"], f"{c['compute_nodes']} nodes x {_kw(gpu_kw)} kW"],
            ["nodes per rack", per_rack, f"ceil({c['compute_nodes']} nodes / gpucluster_facility.racks)"],
            ["rack (kW)", pw["rack_kw"], rack_how],
            ["per-GPU cap to fit (W)", pw["per_gpu_cap_w_to_fit"], "n/a when the rack fits"],
            ["usable per circuit (kW)", pw["circuit_kw"], "V x A (x sqrt 3 for three phases) x 0.8 continuous load"],
            ["nodes per circuit", per_circuit, f"floor({_kw(pw['circuit_kw'])} kW / {_kw(node_kw)} kW)"],
            [
                "circuits per rack",
                pw["circuits_per_rack"],
                f"ceil({per_rack} nodes / {per_circuit} per circuit)" if per_circuit else "",
            ],
        ],
        _sentences(pw["notes"]),
    )


def _cooling_section(plan: dict[str, Any]) -> dict[str, Any]:
    cool, pw = plan["cooling"], plan["power"]
    if cool["cooling"] != "dlc":
        return _section("Cooling", [["cooling", "air", "no coolant alarms"]])
    dt = cool.get("design_delta_t_k")
    return _section(
        "Direct liquid cooling (per rack)",
        [
            [
                "heat into the loop (kW)",
                cool["liquid_heat_kw"],
                f"{_fmt(pw['rack_kw'])} kW rack x {_fmt(cool['liquid_fraction'])} liquid fraction",
            ],
            [
                "required flow (L/min)",
                cool["required_flow_lpm"],
                f"{_fmt(cool['liquid_heat_kw'])} kW / (4.186 kJ/(kg K) x {_fmt(dt)} K) x 60",
            ],
            [
                "supply (C)",
                _pair(("warn", "max"), [cool["supply_warn_c"], cool["supply_max_c"]], "C"),
                f"ASHRAE {cool['ashrae_class']}",
            ],
            [
                "return (C)",
                _pair(("warn", "max"), [cool["return_warn_c"], cool["return_max_c"]], "C"),
                f"supply max + {_fmt(dt)} K (+2)",
            ],
            [
                "dT (K)",
                _pair(("low", "high"), [cool["delta_t_low_k"], cool["delta_t_high_k"]], "K"),
                f"0.5x / 1.5x design dT {_fmt(dt)} K",
            ],
            [
                "flow (L/min)",
                _pair(("low", "critical"), [cool["flow_low_lpm"], cool["flow_critical_lpm"]], "L/min"),
                f"90 % / 80 % of {_fmt(cool['required_flow_lpm'])} L/min",
            ],
        ],
        _sentences(cool.get("notes") or []),
    )


def _storage_section(plan: dict[str, Any]) -> dict[str, Any]:
    st = plan["storage"]
    sz = st["sizing"]
    inp = sz.get("inputs") or {}
    ckpt_gb = sz["checkpoint_bytes"] / 1e9
    rate = sz["rated_write_gbps"] or sz["write_floor_gbps"]
    rate_from = "rated" if sz["rated_write_gbps"] else "tier floor"

    def given(key: str, text: str, fallback: str) -> str:
        return text if key in inp else fallback

    params = inp.get("model_params_b")
    ckpt_how = given(
        "model_params_b",
        f"{_fmt(params)} B params x {_fmt(inp.get('bytes_per_param'))} bytes",
        "parameters x bytes per parameter",
    )
    write_how = given(
        "overlap_target",
        f"{_fmt(ckpt_gb)} GB / ({inp.get('overlap_target', 0):.2f} x {_fmt(inp.get('interval_min'))} min)",
        "checkpoint / (overlap target x interval)",
    )
    idle_how = given(
        "io_wait_fraction",
        f"{inp.get('gpus')} GPUs x 24 h x ${inp.get('gpu_hour_cost_usd', 0):.2f}/GPU-h x "
        f"{inp.get('io_wait_fraction', 0):.2f} I/O wait",
        "GPUs x 24 h x $/GPU-h x I/O wait",
    )
    check = st.get("check") or []
    keeps_up = sz["required_write_gbps"] <= rate
    return _section(
        "Storage sizing",
        [
            ["checkpoint (TB)", sz["checkpoint_tb"], ckpt_how],
            ["write needed (GB/s)", sz["required_write_gbps"], write_how],
            [
                "write (GB/s)",
                _pair(("floor", "rated"), [sz["write_floor_gbps"], sz["rated_write_gbps"]], "GB/s"),
                "tier floor / gpucluster_storage.rated_write_gbps",
            ],
            [
                "checkpoint write time (s)",
                sz["write_time_s"],
                f"{_fmt(ckpt_gb)} GB / {_fmt(rate)} GB/s ({rate_from})",
            ],
            [
                "storage keeps up",
                "yes" if keeps_up else ("no, planned anyway" if not check else "no"),
                f"{_fmt(sz['required_write_gbps'])} GB/s needed vs {_fmt(rate)} GB/s {rate_from}",
            ],
            [
                "daily write volume (TB)",
                sz["daily_write_tb"],
                f"{_fmt(sz['checkpoint_tb'])} TB x {_fmt(sz['checkpoints_per_day'])} checkpoints a day",
            ],
            ["GPU idle cost per day (USD)", sz["idle_cost_per_day_usd"], idle_how],
        ],
        _sentences(check),
    )


def _fabric_section(plan: dict[str, Any]) -> dict[str, Any] | None:
    fab, nccl = plan["fabric"], plan["nccl"]
    if fab["type"] == "none":
        return None
    rows: list[Row] = [
        ["type / topology", f"{fab['type']} / {fab['topology']}", "gpucluster_fabric"],
        ["rails", fab["rails"], "compute NICs per node"],
        [
            "switches",
            len(fab["cabling"]["switches"]),
            ", ".join(s["name"] for s in fab["cabling"]["switches"][:12]),
        ],
        ["links", fabric_links.link_count(fab["cabling"]), "host and uplink cables"],
    ]
    rows += _fabric_sizing_rows(fab["cabling"].get("sizing") or {})
    ib = fab.get("infiniband")
    if ib:  # who runs the subnet manager, and its ports (one per subnet) when the head does
        sm_ports = fab["cabling"].get("sm_links") or []
        where = ", ".join(
            f"{x['a']['node']} {x['a']['hca']} on {x['b']['node']} port {x['b']['port']}" for x in sm_ports
        )
        rows.append(["subnet manager", ib["subnet_manager"], f"{ib['sm_where']}{': ' + where if where else ''}"])
    if nccl.get("topology"):
        rows.append(["NCCL topology", nccl["topology"], nccl.get("topology_reason", "")])
    rows += [[k, v, "/etc/nccl.conf"] for k, v in nccl["conf"].items()]
    return _section("Fabric and NCCL", rows)


def _fabric_sizing_rows(sz: dict[str, Any]) -> list[Row]:
    """How the fat tree was sized (cabling.py, docs/fabric.md "Sizing"): tiers, oversubscription, spines."""
    if (sz.get("tiers") or 0) < 2:
        return []
    over = sz["oversubscription"]
    ratio = "1:1, non-blocking" if over == 1 else f"{over:g}:1 host ports to uplinks"
    rows: list[Row] = [
        [
            "fat tree",
            f"{sz['tiers']} tiers",
            f"{sz['switch_radix']}-port switches, {sz['hosts_per_leaf']} hosts per leaf",
        ],
        ["oversubscription", ratio, "gpucluster_fabric.oversubscription (default 1)"],
        [
            "spines",
            f"{sz['spine_groups']} x {sz['spines_per_group']}",
            "spine groups x spines (per pod)"
            if sz["tiers"] == 3
            else "spine groups x spines: the fewest that carry the uplinks, at least gpucluster_fabric.min_spines",
        ],
        [
            "cables",
            f"{sz['host_links']} / {sz['uplinks']} / {sz['core_links']}",
            "host / leaf-spine / spine-core",
        ],
    ]
    if sz["tiers"] == 3:
        rows.insert(
            3,
            [
                "pods, core switches",
                f"{sz['pods']} pods, {sz['cores']} core",
                f"{sz['sus_per_pod']} SUs per pod; {sz['cores_per_group']} core switches per spine index and group",
            ],
        )
    return rows


def _parallelism_section(plan: dict[str, Any]) -> dict[str, Any]:
    par = plan["parallelism"]
    stage = par.get("zero_stage", 0)
    mem, headroom = par.get("gpu_memory_gb"), par.get("memory_headroom")
    split = par.get("bytes_split") or {}
    bytes_how = f"{_fmt(par['bytes_per_param'])} bytes per parameter"
    if split:
        bytes_how += (
            f" ({_fmt(split['params'])} params + {_fmt(split['grads'])} grads + "
            f"{_fmt(split['optimizer'])} optimizer state; ZeRO paper)"
        )
    if par.get("model_params_b") is not None:
        bytes_how = f"{_fmt(par['model_params_b'])} B params x {bytes_how}"
    budget_how = f"budget {_fmt(par['gpu_memory_budget_gb'])} GB"
    if mem is not None and headroom is not None:
        budget_how += f" = {_fmt(mem)} GB x {_fmt(headroom)}"
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
            + (", ".join(f"stage {s} {_fmt(v)} GB" for s, v in by_stage.items()) or "n/a"),
        ],
    ]
    if par.get("activations_headroom_gb") is not None:
        rows.append(
            [
                "activations headroom per GPU (GB)",
                par["activations_headroom_gb"],
                f"{_fmt(mem)} GB - {_fmt(par['gpu_memory_budget_gb'])} GB budget: activations, buffers",
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
    return _section("Parallelism", rows, _sentences(par["notes"]))


def _storage_ceiling_section(plan: dict[str, Any]) -> dict[str, Any]:
    """The storage floors beside their ceiling, each with its source (storage/sizing.py storage_ceiling,
    validation/floors.py storage_floor_within): the ceiling is what the data servers' planned storage interfaces
    carry, each card at min(its ports' line rates, its PCIe slot), or the local drives' links."""
    st, val, tier = plan["storage"], plan["validation"], plan["tier"]
    rows: list[Row] = []
    for rw in ("read", "write"):
        ceiling = st["ceilings"][f"{rw}_gbps"]
        floor = val.get(f"storage_{rw}_gbps")
        rows.append(
            [
                f"{rw} (GB/s)",
                _pair(("floor", "ceiling"), [floor, ceiling["gbs"]], "GB/s"),
                f"floor: the {tier['name']} reference design (gpucluster_cluster.tier, docs/tiers.md); "
                + (
                    f"ceiling: {ceiling['link']}"
                    if rw == "read"
                    else "ceiling: the same links (read and write share them)"
                ),
            ]
        )
    ceiling = st["ceilings"]["read_gbps"]
    group = ceiling.get("server_group")
    for card in ceiling.get("cards") or []:
        rows.append(
            [
                f"card {card['card']} (each of groups.{group})",
                f"{_fmt(card['gbs'])} GB/s",
                f"ports {', '.join(card['ports'])}: {card['text']}",
            ]
        )
    if ceiling.get("not_planned"):
        rows.append(
            [
                "described, not planned",
                ", ".join(ceiling["not_planned"]),
                "in gpucluster_storage.server_nics, not a planned storage interface: no storage address, not counted",
            ]
        )
    intro = (
        "A storage floor above its ceiling stops the plan (the field, its value, the floor and the ceiling): the "
        "floor is never lowered to fit. Read and write share the links; NVMe-oF, RDMA and TCP carry no more than "
        "the line rate or the PCIe slot."
    )
    return _section("Storage floors and ceilings", rows, intro)


def _acceptance_section(plan: dict[str, Any]) -> dict[str, Any]:
    val = plan["validation"]
    how, ceilings = val.get("how") or {}, val.get("ceilings") or {}

    def reached(key: str, default: str) -> str:
        text = how.get(key, default)
        ceiling = ceilings.get(key)
        return text if not ceiling or key in how else f"{text}; within {ceiling['gbs']:g}: {ceiling['link']}"

    return _section(
        "Acceptance floors",
        [
            [
                "all_reduce busbw in a node (GB/s)",
                val["allreduce_intra_node_busbw_gbs"],
                reached("allreduce_intra_node_busbw_gbs", "large messages"),
            ],
            [
                "all_reduce busbw across nodes (GB/s)",
                val["allreduce_inter_node_busbw_gbs"],
                reached("allreduce_inter_node_busbw_gbs", "85 % of NIC line rate"),
            ],
            ["per-NIC write (Gb/s)", val["nic_write_bw_gbps"], reached("nic_write_bw_gbps", "ib_write_bw")],
            [
                "storage (GB/s)",
                _pair(("read", "write"), [val["storage_read_gbps"], val["storage_write_gbps"]], "GB/s"),
                "tier floors; their ceilings and the links that set them: section 'Storage floors and ceilings'"
                if plan["storage"].get("ceilings")
                else "; ".join(reached(f"storage_{rw}_gbps", f"{rw}: tier floor") for rw in ("read", "write")),
            ],
        ]
        + [[f"no floor: {k}", "", why] for k, why in val["reasons"].items()],
    )


def _mig_section(plan: dict[str, Any]) -> dict[str, Any] | None:
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
    return _section("MIG partitioning", rows, intro)


def report_sections(plan: dict[str, Any]) -> list[dict[str, Any]]:
    sections = [_tier_section(plan), _gpu_section(plan)]
    if "interconnect" in plan["gpu"]:  # NVSwitch, NVLink bridges or PCIe only, and what follows (interconnect.py)
        sections.append(_section("Inside the node", intra_node_rows(plan)))
    if plan["gpu"].get("bringup"):  # Fabric Manager, GPUDirect RDMA and its inputs, PCIe path (compute/bringup.py)
        sections.append(_section("GPU bring-up", bringup_rows(plan["gpu"]["bringup"])))
    mig = _mig_section(plan)  # MIG partitioning, only where planned (compute/mig.py)
    if mig:
        sections.append(mig)
    sections.append(_power_section(plan))
    if "ups" in plan:  # UPS runtime vs the graceful shutdown (compute/ups.py, playbooks/shutdown.yml)
        sections.append(_section("Power protection (UPS)", ups_rows(plan["ups"])))
    sections.append(_cooling_section(plan))
    sections.append(_storage_section(plan))
    if plan["storage"].get("ceilings"):
        sections.append(_storage_ceiling_section(plan))
    st = plan["storage"]
    if "lustre" in st:
        lu = st["lustre"]
        rows = [[f"layout {role}", f"{lay['path']}: lfs setstripe {lay['setstripe_args']}", f"{lu['ost_count']} OSTs"]
                for role, lay in lu["layouts"].items()]  # fmt: skip
        rows += [[k, v, "bounded by client RAM"] for k, v in lu["client_tunables"].items()]
        rows.append(["LNet", lu["lnet"]["modprobe"], "storage NICs"])
        sections.append(_section("Lustre", rows))
    if "protection" in st:  # storage/raid.py: what one NVMe failure costs (issue 38)
        sections.append(_section("Data protection", raid.protection_rows(st["protection"]), raid.PROTECTION_INTRO))
    if (st.get("nfs") or {}).get("links"):  # storage/nfs.py: the links the storage floors are checked against
        links = st["nfs"]["links"]
        rows = [
            [
                "protocol",
                f"{links['proto']} (port {links['port']})",
                links["rdma_note"] or "gpucluster_storage.nfs.proto",
            ],
        ]
        if links.get("ceilings"):  # the server's ports: "Storage floors and ceilings"
            ceiling = links["ceilings"]["read_gbps"]
            rows.append(["storage ceiling (GB/s)", ceiling["gbs"], ceiling["link"]])
        sections.append(_section("NFS links", rows))
    if "nvmeof" in st:  # storage/nvmeof.py: per-node remote namespaces
        nv = st["nvmeof"]
        rows = [[f"target {t}", f"{len(x['devices'])} devices at {x['address']}:{nv['trsvcid']}", f"{nv['transport']}"]
                for t, x in nv["targets"].items()]  # fmt: skip
        first_line = discovery_conf_text(nv).splitlines()[0]  # the targets' lines differ in the address only
        rows += [
            ["namespaces per node", str(nv["namespaces_per_client"]), "targets x devices / nodes"],
            ["unexported devices", str(nv["unexported"]), "left over when the devices do not divide evenly"],
            ["nvme connect-all", first_line, f"{nv['discovery_conf_path']}, a line a target"],
        ]
        intro = "Block devices, not a shared file system: each compute node gets its own namespaces (remote scratch)."
        sections.append(_section("NVMe-oF", rows, intro))
    if "beegfs" in st:  # storage/beegfs.py: patterns from the Lustre layouts' decision
        bg = st["beegfs"]
        rows = [[f"pattern {role}", p["command"], f"{bg['target_count']} targets (Lustre layout's last component)"]
                for role, p in bg["patterns"].items()]  # fmt: skip
        rows += [
            ["management", f"{bg['mgmtd']} ({bg['mgmtd_address']})", f"{bg['network']} network"],
            ["metadata / storage hosts", f"{', '.join(bg['meta'])} / {', '.join(bg['storage'])}", "inventory groups"],
            ["RDMA", "yes" if bg["rdma"] else "no", "gpucluster_storage.beegfs.rdma or the fabric type"],
        ]
        sections.append(_section("BeeGFS", rows))
    if "checkpoint_drain" in st:  # async checkpoints: local staging, drain to the shared path
        rows = drain_rows(st["checkpoint_drain"], st["sizing"]["checkpoint_bytes"], plan["cluster"]["compute_nodes"],
                          st["sizing"]["inputs"]["interval_min"])  # fmt: skip
        sections.append(_section("Checkpoint staging and drain", rows))
    fabric = _fabric_section(plan)
    if fabric:
        sections.append(fabric)
    if "fabric_tco" in plan:  # InfiniBand vs RoCEv2 side by side (fabric/tco.py)
        tco = plan["fabric_tco"]
        rows = [[r[0], f"InfiniBand {r[1]} / RoCEv2 {r[2]} (IB - RoCE {r[3]})", r[4]] for r in tco_rows(tco)]
        intro = f"{tco['reason']}. {tco['caveat']}" if tco["applies"] else f"{tco['reason']}."
        sections.append(_section("What the fabric costs", rows, intro))
    if "mpi" in plan.get("slurm", {}):  # MpiDefault and the UCX / Open MPI files (slurm/mpi.py)
        sections.append(_section("MPI", mpi_rows(plan["slurm"]["mpi"]), MPI_INTRO))
    if plan.get("slurm", {}).get("ha", {}).get("enabled"):  # backup controllers only (slurm/ha.py)
        sections.append(_section("Slurm controllers", ha_rows(plan["slurm"]["ha"]), HA_INTRO))
    if "modes" in plan.get("health", {}):  # the health check's Slurm hooks (compute/health.py)
        sections.append(_section("Node health check", health_rows(plan["health"]), HEALTH_INTRO))
    if (plan.get("containers") or {}).get("enabled"):  # training jobs in containers (compute/containers.py)
        sections.append(_section("Job containers", container_rows(plan["containers"]), CONTAINERS_INTRO))
    if "healing" in plan:  # the self-healing loop (compute/healing.py)
        sections.append(_healing_section(plan))
    sections.append(_parallelism_section(plan))
    sections.append(_acceptance_section(plan))
    return sections


def _healing_section(plan: dict[str, Any]) -> dict[str, Any]:
    """Self-healing: the schedule, the checks with their floors and budgets, the class -> action table and
    the limits (compute/healing.py)."""
    return _section("Self-healing", healing.healing_rows(plan["healing"]), healing.HEALING_INTRO)


CONTAINERS_INTRO = (
    "Every job container gets the same mounts, environment and devices, on Slurm (pyxis or oci) and in the "
    "Kubernetes path's Ray templates (docs/containers.md)."
)


def container_rows(c: dict[str, Any]) -> list[list[str]]:
    """The job containers' runtime, image cache, mounts, environment and devices (plan.containers)."""
    cache = c["cache"]
    how = "pyxis: plugstack.conf + enroot.conf" if c["runtime"] == "pyxis" else "oci: oci.conf + runc"
    rows = [
        ["runtime", c["runtime"], f"gpucluster_containers.runtime ({how})"],
        [
            "image cache",
            f"{cache['path']}, {cache['size_gb']} GB per node",
            f"gpucluster_storage.local_scratch, not the shared FS (staging takes {cache['staging_gb']:g} GB)",
        ],
    ]
    rows += [["mount", m["target"], m["why"]] for m in c["mounts"]]
    rows += [["env " + k, v, "/etc/nccl.conf"] for k, v in c["env"].items()]
    rows.append(["devices", ", ".join(c["devices"]), "the node's GPUs and the fabric's RDMA devices"])
    rows += [["registry " + r["host"], r["credential"] or "anonymous", "credential by name (site secret store)"]
             for r in c["registries"]]  # fmt: skip
    return rows


def _power_warnings(plan: dict[str, Any]) -> list[str]:
    pw, clocks = plan["power"], plan["gpu"]["clocks"]
    capped = bool(pw.get("capped", clocks.get("power_limit_source") == "rack_budget"))
    out = []
    if capped:
        reason = clocks.get("power_limit_reason") or pw.get("power_limit_reason")
        limit = pw.get("power_limit_w", clocks["power_limit_w"])
        by = "the node's surviving PSUs" if clocks.get("power_limit_source") == "node_psu" else "the rack budget"
        out.append(
            f"Power cap applied by {by}: every GPU is limited to {limit} W. "
            + (reason or f"{_fmt(pw.get('rack_kw_uncapped'))} kW per rack exceeds {_fmt(pw['rack_budget_kw'])} kW.")
        )
    elif pw.get("per_gpu_cap_w_to_fit") is not None:  # a plan that computes the cap but does not apply it
        out.append(
            f"Rack power: {_fmt(pw['rack_kw'])} kW per rack exceeds the {_fmt(pw['rack_budget_kw'])} kW budget; "
            f"a cap of {pw['per_gpu_cap_w_to_fit']} W per GPU would fit."
        )
    # the section's other notes (e.g. a node needing more than one circuit); the cap note is covered above
    out += [f"Power: {n}" for n in pw.get("notes") or [] if not (out and "cap" in n)]
    return out


def _storage_warnings(plan: dict[str, Any]) -> list[str]:
    st = plan["storage"]
    sz = st["sizing"]
    out = [f"Storage below need: {t}" for t in st.get("check") or []]
    rate = sz["rated_write_gbps"] or sz["write_floor_gbps"]
    if not out and sz["required_write_gbps"] > rate:
        out.append(
            f"Storage below need, planned anyway (gpucluster_workload.allow_storage_below_need): checkpoints "
            f"need {_fmt(sz['required_write_gbps'])} GB/s of write, the storage delivers {_fmt(rate)} GB/s."
        )
    rated = sz["rated_write_gbps"]
    if rated is not None and rated < sz["write_floor_gbps"]:
        out.append(
            f"Storage floor not met: gpucluster_storage.rated_write_gbps {_fmt(rated)} GB/s is below the "
            f"{plan['cluster']['tier']} floor of {_fmt(sz['write_floor_gbps'])} GB/s; the acceptance check "
            "gates on the floor."
        )
    ceiling = (st.get("ceilings") or {}).get("write_gbps")
    if rated is not None and ceiling and rated > ceiling["gbs"]:
        out.append(
            f"Storage rating above its links: gpucluster_storage.rated_write_gbps {_fmt(rated)} GB/s is above the "
            f"{_fmt(ceiling['gbs'])} GB/s its links carry (section 'Storage floors and ceilings'); the checkpoint "
            "sizing uses the rating: measure it (fio) or describe the servers' ports (gpucluster_storage.server_nics)."
        )
    return out


def report_summary(plan: dict[str, Any]) -> dict[str, list[str]]:
    """What a reader must see first: ``warnings`` (empty for a clean plan), then ``next_steps``."""
    c, tier, par = plan["cluster"], plan["tier"], plan["parallelism"]
    warnings = _power_warnings(plan) + ups_warnings(plan.get("ups")) + _storage_warnings(plan)
    warnings += list((plan["storage"].get("protection") or {}).get("warnings") or [])  # storage/raid.py
    if not par["fits"]:
        warnings.append(f"Model does not fit: {par['strategy'].removeprefix('does not fit: ')}.")
    if c["compute_nodes"] != tier["nodes"]:
        warnings.append(
            f"{c['compute_nodes']} compute nodes where the {c['tier']} reference has {tier['nodes']}: "
            f"the tier's defaults and floors were sized for {tier['nodes']}; check the sections below."
        )
    reference = c["name"] == c["tier"] and c["compute_nodes"] == tier["nodes"]
    inventory = f"inventories/{c['tier']}" if reference else "<your inventory>"
    steps = []
    if warnings:
        steps.append("Resolve or accept the warnings above, then `make plan` again.")
    if reference:
        steps.append(f"`make lab TIER={c['tier']}`: bring this tier up in local containers and converge site.yml.")
    else:
        steps.append(
            f"`make lab TIER={c['tier']}`: rehearse in local containers with the reference tier this site starts "
            f"from (the lab runs inventories/{c['tier']}, not this inventory)."
        )
    steps += [
        f"`ansible-playbook site.yml -i {inventory}`: apply the plan to the real hosts.",
        f"`make validate TIER={c['tier']}`: acceptance checks (nccl-tests, ib_write_bw, fio, dcgmi) "
        "against the floors in this report.",
    ]
    return {"warnings": warnings, "next_steps": steps}
