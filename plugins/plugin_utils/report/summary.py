"""The report's opening (:func:`report_summary`): the warnings a reader must see first (power cap, UPS, storage
below need or above its links, data protection, a model that does not fit, a node count off the tier's), then
the next steps."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.ups import ups_warnings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.model import Summary
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.text import fmt


def _power_warnings(plan: Plan) -> list[str]:
    pw, clocks = plan["power"], plan["gpu"]["clocks"]
    capped = bool(pw.get("capped", clocks.get("power_limit_source") == "rack_budget"))
    out = []
    if capped:
        reason = clocks.get("power_limit_reason") or pw.get("power_limit_reason")
        limit = pw.get("power_limit_w", clocks["power_limit_w"])
        by = "the node's surviving PSUs" if clocks.get("power_limit_source") == "node_psu" else "the rack budget"
        out.append(
            f"Power cap applied by {by}: every GPU is limited to {limit} W. "
            + (reason or f"{fmt(pw.get('rack_kw_uncapped'))} kW per rack exceeds {fmt(pw['rack_budget_kw'])} kW.")
        )
    elif pw.get("per_gpu_cap_w_to_fit") is not None:  # a plan that computes the cap but does not apply it
        out.append(
            f"Rack power: {fmt(pw['rack_kw'])} kW per rack exceeds the {fmt(pw['rack_budget_kw'])} kW budget; "
            f"a cap of {pw['per_gpu_cap_w_to_fit']} W per GPU would fit."
        )
    # the section's other notes (e.g. a node needing more than one circuit); the cap note is covered above
    out += [f"Power: {n}" for n in pw.get("notes") or [] if not (out and "cap" in n)]
    return out


def _storage_warnings(plan: Plan) -> list[str]:
    st = plan["storage"]
    sz = st["sizing"]
    out = [f"Storage below need: {t}" for t in st.get("check") or []]
    rate = sz["rated_write_gbps"] or sz["write_floor_gbps"]
    if not out and sz["required_write_gbps"] > rate:
        out.append(
            f"Storage below need, planned anyway (gpucluster_workload.allow_storage_below_need): checkpoints "
            f"need {fmt(sz['required_write_gbps'])} GB/s of write, the storage delivers {fmt(rate)} GB/s."
        )
    rated = sz["rated_write_gbps"]
    if rated is not None and rated < sz["write_floor_gbps"]:
        out.append(
            f"Storage floor not met: gpucluster_storage.rated_write_gbps {fmt(rated)} GB/s is below the "
            f"{plan['cluster']['tier']} floor of {fmt(sz['write_floor_gbps'])} GB/s; the acceptance check "
            "gates on the floor."
        )
    ceiling = (st.get("ceilings") or {}).get("write_gbps")
    if rated is not None and ceiling and rated > ceiling["gbs"]:
        out.append(
            f"Storage rating above its links: gpucluster_storage.rated_write_gbps {fmt(rated)} GB/s is above the "
            f"{fmt(ceiling['gbs'])} GB/s its links carry (section 'Storage floors and ceilings'); the checkpoint "
            "sizing uses the rating: measure it (fio) or describe the servers' ports (gpucluster_storage.server_nics)."
        )
    return out


def report_summary(plan: Plan) -> Summary:
    """What a reader must see first: ``warnings`` (empty for a clean plan), then ``next_steps``."""
    c, tier, par = plan["cluster"], plan["tier"], plan["parallelism"]
    warnings = _power_warnings(plan) + ups_warnings(plan.get("ups")) + _storage_warnings(plan)
    protection = plan["storage"].get("protection")  # storage/raid.py
    warnings += protection["warnings"] if protection else []
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
