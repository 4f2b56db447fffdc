"""The plan as readable sections: each setting with its value and how it was reached.

report.md renders these rows as they are; keeping the wording here (pure data) keeps the
template free of arithmetic and lets tests read the report without Ansible.
"""

from __future__ import annotations

from typing import Any

Row = list[str]


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 100000 else str(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return str(value).replace("|", "\\|")


def _section(title: str, rows: list[Row], intro: str = "") -> dict[str, Any]:
    return {
        "title": title,
        "intro": intro,
        "rows": [[_fmt(c) if i == 1 else str(c) for i, c in enumerate(r)] for r in rows],
    }


def report_sections(plan: dict[str, Any]) -> list[dict[str, Any]]:
    c, gpu, pw, st = plan["cluster"], plan["gpu"], plan["power"], plan["storage"]
    model, clocks, temp = gpu["model"], gpu["clocks"], gpu["temperature"]
    sz, tier = st["sizing"], plan["tier"]
    sections = [
        _section(
            "Tier",
            [
                ["reference tier", c["tier"], f"{tier['nodes']} nodes / {tier['gpus']} GPUs reference"],
                ["storage read floor (GB/s)", tier["storage_read_gbps"], "tier profile (reference design)"],
                ["storage write floor (GB/s)", tier["storage_write_gbps"], "tier profile (reference design)"],
                ["scheduler", tier["scheduler"], "tier profile"],
                ["training fit", tier["training_fit"], "tier profile"],
            ],
        ),
        _section(
            "GPU clocks and power",
            [
                ["model", model["name"], f"catalog {model['key']}"],
                ["policy", clocks["policy"], "gpucluster_gpu_policy.clock_policy"],
                ["SM clock lock (MHz)", clocks["lock_gpu_clocks"], f"<= clocks.max.sm {_fmt(model['max_sm_mhz'])} MHz"],
                [
                    "memory clock lock (MHz)",
                    clocks["lock_memory_clocks"],
                    f"<= clocks.max.mem {_fmt(model['max_mem_mhz'])}",
                ],
                [
                    "power limit (W)",
                    clocks["power_limit_w"],
                    f"within {_fmt(model['power_min_w'])}-{_fmt(model['power_max_w'])} W",
                ],
                ["nvidia-smi at boot", "; ".join(clocks["apply_args"]), "oneshot unit after nvidia-persistenced"],
                ["GPU temperature warn (C)", temp["warn_c"], "max operating - 3"],
                ["GPU temperature critical / drain (C)", temp["critical_c"], f"max operating temp ({temp['source']})"],
            ],
            " ".join(clocks["notes"]),
        ),
        _section(
            "Power",
            [
                [
                    "GPU load per node (kW)",
                    pw["gpu_load_kw_per_node"],
                    f"{c['gpus_per_node']} x {clocks['power_limit_w']} W",
                ],
                ["node (kW)", pw["node_kw"], "GPU load + base load"],
                ["GPU load, all nodes (kW)", pw["gpu_load_kw_total"], f"{c['compute_nodes']} nodes"],
                ["nodes per rack", pw["nodes_per_rack"], "ceil(nodes / racks)"],
                ["rack (kW)", pw["rack_kw"], f"budget {_fmt(pw['rack_budget_kw'])} kW"],
                ["per-GPU cap to fit (W)", pw["per_gpu_cap_w_to_fit"], "n/a when the rack fits"],
                ["usable per circuit (kW)", pw["circuit_kw"], "V x A (x sqrt 3) x 0.8 continuous load"],
                ["nodes per circuit", pw["nodes_per_circuit"], "floor(circuit / node)"],
                ["circuits per rack", pw["circuits_per_rack"], ""],
            ],
            " ".join(pw["notes"]),
        ),
    ]
    cool = plan["cooling"]
    if cool["cooling"] == "dlc":
        sections.append(
            _section(
                "Direct liquid cooling (per rack)",
                [
                    ["heat into the loop (kW)", cool["liquid_heat_kw"], f"rack kW x {cool['liquid_fraction']}"],
                    ["required flow (L/min)", cool["required_flow_lpm"], "P / (4.186 kJ/(kg K) x dT) x 60"],
                    [
                        "supply warn / max (C)",
                        [cool["supply_warn_c"], cool["supply_max_c"]],
                        f"ASHRAE {cool['ashrae_class']}",
                    ],
                    ["return warn / max (C)", [cool["return_warn_c"], cool["return_max_c"]], "supply max + dT (+2)"],
                    ["dT low / high (K)", [cool["delta_t_low_k"], cool["delta_t_high_k"]], "0.5x / 1.5x design dT"],
                    ["flow low / critical (L/min)", [cool["flow_low_lpm"], cool["flow_critical_lpm"]], "90 % / 80 %"],
                ],
            )
        )
    else:
        sections.append(_section("Cooling", [["cooling", "air", "no coolant alarms"]]))
    sections.append(
        _section(
            "Storage sizing",
            [
                ["checkpoint (TB)", sz["checkpoint_tb"], "parameters x bytes per parameter"],
                ["write needed (GB/s)", sz["required_write_gbps"], "checkpoint / (overlap target x interval)"],
                ["write floor / rated (GB/s)", [sz["write_floor_gbps"], sz["rated_write_gbps"]], "tier / inventory"],
                ["checkpoint write time (s)", sz["write_time_s"], "at the rated (else floor) rate"],
                ["daily write volume (TB)", sz["daily_write_tb"], f"{sz['checkpoints_per_day']} checkpoints a day"],
                ["GPU idle cost per day (USD)", sz["idle_cost_per_day_usd"], "GPUs x 24 h x $/GPU-h x I/O wait"],
            ],
        )
    )
    if "lustre" in st:
        lu = st["lustre"]
        rows = [[f"layout {role}", f"{lay['path']}: lfs setstripe {lay['setstripe_args']}", f"{lu['ost_count']} OSTs"]
                for role, lay in lu["layouts"].items()]  # fmt: skip
        rows += [[k, v, "bounded by client RAM"] for k, v in lu["client_tunables"].items()]
        rows.append(["LNet", lu["lnet"]["modprobe"], "storage NICs"])
        sections.append(_section("Lustre", rows))
    fab = plan["fabric"]
    if fab["type"] != "none":
        rows = [
            ["type / topology", f"{fab['type']} / {fab['topology']}", "gpucluster_fabric"],
            ["rails", fab["rails"], "compute NICs per node"],
            [
                "switches",
                len(fab["cabling"]["switches"]),
                ", ".join(s["name"] for s in fab["cabling"]["switches"][:12]),
            ],
            ["links", len(fab["cabling"]["links"]), "host and uplink cables"],
        ]
        rows += [[k, v, "/etc/nccl.conf"] for k, v in plan["nccl"]["conf"].items()]
        sections.append(_section("Fabric and NCCL", rows))
    par = plan["parallelism"]
    sections.append(
        _section(
            "Parallelism",
            [
                ["TP x PP x DP", f"{par['tp']} x {par['pp']} x {par['dp']}", par["strategy"]],
                ["training state (GB)", par["state_gb_total"], f"{par['bytes_per_param']} bytes per parameter"],
                ["per GPU (GB)", par["state_gb_per_gpu"], f"budget {par['gpu_memory_budget_gb']} GB"],
            ],
            " ".join(par["notes"]),
        )
    )
    val = plan["validation"]
    sections.append(
        _section(
            "Acceptance floors",
            [
                ["all_reduce busbw in a node (GB/s)", val["allreduce_intra_node_busbw_gbs"], "large messages"],
                [
                    "all_reduce busbw across nodes (GB/s)",
                    val["allreduce_inter_node_busbw_gbs"],
                    "85 % of NIC line rate",
                ],
                ["per-NIC write (Gb/s)", val["nic_write_bw_gbps"], "ib_write_bw"],
                ["storage read / write (GB/s)", [val["storage_read_gbps"], val["storage_write_gbps"]], "tier floor"],
            ]
            + [[f"no floor: {k}", "", why] for k, why in val["reasons"].items()],
        )
    )
    return sections
