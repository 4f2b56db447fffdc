"""report.md for a newcomer: labelled pairs, formulas with their inputs, and a summary that opens it.

The report is rendered from the plan (report/sections.py report_sections, report_summary; filter plan_report), so these
tests read it without Ansible; the template is rendered with plain Jinja2 for the order checks.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import jinja2
import pytest
from conftest import ROOT, TIERS, load_inventory
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.parallelism import parallelism
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report import compute as report_compute
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import (
    plan_report,
    report_sections,
    report_summary,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.text import fmt

UNLABELED_PAIR = re.compile(r"^\d[\d.,]*, \d")


def _plan(tier: str, **facility: Any) -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    site["gpucluster_facility"].update(facility)
    return cluster_plan(site, groups)


def _capped() -> dict[str, Any]:
    """tier3 (4 nodes of 10.2 kW) in one rack of 30 kW: the rack budget caps every GPU."""
    return _plan("tier3", rack_power_budget_kw=30, racks=1)


def _row(plan: dict[str, Any], section: str, setting: str) -> list[str]:
    for s in report_sections(plan):
        if s["title"] == section:
            for row in s["rows"]:
                if row[0] == setting:
                    return row
    raise AssertionError(f"no row {setting!r} in section {section!r}")


def _render(plan: dict[str, Any]) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROOT / "playbooks" / "templates")),
        trim_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("report.md.j2").render(gpucluster_plan=plan, gpucluster_plan_report=plan_report(plan))


@pytest.mark.parametrize("variant", [*TIERS, "tier3-capped"])
def test_no_row_shows_an_unlabelled_pair(variant: str) -> None:
    plan = _capped() if variant == "tier3-capped" else _plan(variant)
    for section in report_sections(plan):
        for row in section["rows"]:
            assert len(row) == 3, row
            assert not UNLABELED_PAIR.match(row[1]), (section["title"], row)


def test_pairs_carry_labels_and_units() -> None:
    plan = _plan("tier3")
    assert _row(plan, "GPU clocks and power", "SM clock lock (MHz)")[1] == "min 1980 / max 1980 MHz"
    assert _row(plan, "Storage sizing", "write (GB/s)")[1] == "floor 40 / rated 60 GB/s"
    assert _row(plan, "Acceptance floors", "storage (GB/s)")[1] == "read 80 / write 40 GB/s"
    assert _row(plan, "Tier", "storage read (GB/s)")[1] == "floor 80 / upper 160 GB/s"


def test_dlc_thresholds_are_labelled() -> None:
    plan = _plan("tier4")
    assert plan["cooling"]["cooling"] == "dlc"
    supply = _row(plan, "Direct liquid cooling (per rack)", "supply (C)")[1]
    assert supply == f"warn {plan['cooling']['supply_warn_c']} / max {plan['cooling']['supply_max_c']} C"


def test_idle_cost_row_shows_its_inputs() -> None:
    """tiers.md correction: 64 GPUs x 24 h x $4 x 0.2 I/O wait = $1,229 a day (not $3,942)."""
    row = _row(_plan("tier4"), "Storage sizing", "GPU idle cost per day (USD)")
    assert row[1] == "1,228.8"
    assert row[2] == "64 GPUs x 24 h x $4.00/GPU-h x 0.20 I/O wait"


def test_formula_rows_show_their_inputs() -> None:
    plan = _plan("tier3")
    assert _row(plan, "Storage sizing", "checkpoint (TB)")[2] == "180 B params x 14 bytes"
    assert _row(plan, "Storage sizing", "write needed (GB/s)")[2] == "2,520 GB / (0.10 x 30 min)"
    assert _row(plan, "Power", "rack (kW)")[2].startswith("4 nodes x 10.2 kW; budget 60 kW")
    assert _row(plan, "Power", "GPU load per node (kW)")[2] == "8 GPUs x 700 W"
    assert _row(plan, "Parallelism", "model state (GB)")[2].startswith("180 B params x 16 bytes per parameter")


def test_capped_site_opens_with_the_cap_warning() -> None:
    plan = _capped()
    summary = report_summary(plan)
    cap = [w for w in summary["warnings"] if w.startswith("Power cap applied by the rack budget")]
    assert len(cap) == 1
    assert f"{plan['gpu']['clocks']['power_limit_w']} W" in cap[0] and "rack_power_budget_kw" in cap[0]
    assert summary["next_steps"][0].startswith("Resolve or accept the warnings")
    # the rack row shows the applied kW and what the uncapped limit would draw
    assert "at the uncapped limit" in _row(plan, "Power", "rack (kW)")[2]


@pytest.mark.parametrize("tier", TIERS)
def test_reference_tiers_carry_no_power_or_storage_warning(tier: str) -> None:
    """The reference plans are clean: no cap, no storage shortfall, the reference node count.

    The only warning they may carry is the model-fit one, exactly when the parallelism check fails
    (16 bytes/param of model state for the workload's model; see test_parallelism.py).
    """
    plan = _plan(tier)
    warnings = report_summary(plan)["warnings"]
    assert not any(w.startswith(("Power", "Storage")) or "compute nodes where" in w for w in warnings)
    fit = [w for w in warnings if w.startswith("Model does not fit")]
    assert len(fit) == (0 if plan["parallelism"]["fits"] else 1)
    assert len(warnings) == len(fit)
    steps = report_summary(plan)["next_steps"]
    assert any(f"`make lab TIER={tier}`" in s for s in steps)
    assert any(f"`ansible-playbook site.yml -i inventories/{tier}`" in s for s in steps)
    assert any("`make validate" in s for s in steps)


def test_tier1_summary_has_no_warnings() -> None:
    assert report_summary(_plan("tier1"))["warnings"] == []


def test_model_that_does_not_fit_is_a_warning_naming_the_tier_that_fits() -> None:
    plan = _plan("tier2")
    fit = [w for w in report_summary(plan)["warnings"] if w.startswith("Model does not fit")]
    assert len(fit) == 1 and "tier3" in fit[0] and "ZeRO" not in fit[0]


def test_node_count_other_than_the_reference_is_a_warning() -> None:
    site, groups = load_inventory("tier3")
    groups = {name: [h for h in hosts if h != "compute04"] for name, hosts in groups.items()}
    site = copy.deepcopy(site)
    site["gpucluster_cluster"]["name"] = "mysite"
    plan = cluster_plan(site, groups)
    summary = report_summary(plan)
    assert any("3 compute nodes where the tier3 reference has 4" in w for w in summary["warnings"])
    steps = " ".join(summary["next_steps"])
    assert "-i <your inventory>" in steps and "not this inventory" in steps


def test_storage_floor_not_met_is_a_warning() -> None:
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    site["gpucluster_storage"]["rated_write_gbps"] = 30  # below the tier3 floor of 40 GB/s
    warnings = report_summary(cluster_plan(site, groups))["warnings"]
    assert any(w.startswith("Storage floor not met") and "40 GB/s" in w for w in warnings)


def test_report_md_opens_with_the_summary() -> None:
    text = _render(_capped())
    summary, tier = text.index("## Summary"), text.index("## Tier")
    assert summary < tier
    head = text[summary:tier]
    assert head.index("**Warnings**") < head.index("**Next steps**")
    assert "Power cap applied by the rack budget" in head
    assert "1. Resolve or accept the warnings" in head
    for title in ("## GPU clocks and power", "## Power", "## Storage sizing", "## Acceptance floors"):
        assert title in text


def test_storage_below_need_planned_anyway_is_a_warning() -> None:
    """The override lets the plan through; the summary still says the checkpoints outrun the storage."""
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    site["gpucluster_workload"].update(model_params_b=671, allow_storage_below_need=True)
    site["gpucluster_storage"]["rated_write_gbps"] = 40
    plan = cluster_plan(site, groups)
    assert plan["storage"]["check"] == []
    warnings = report_summary(plan)["warnings"]
    assert any(w.startswith("Storage below need, planned anyway") and "40 GB/s" in w for w in warnings)
    assert _row(plan, "Storage sizing", "storage keeps up")[1] == "no, planned anyway"


def test_fat_tree_sizing_is_in_the_fabric_section() -> None:
    """tier4: the report names the oversubscription and shows the spines and cables the plan sized."""
    plan = _plan("tier4")
    assert _row(plan, "Fabric and NCCL", "fat tree")[1] == "2 tiers"
    assert _row(plan, "Fabric and NCCL", "oversubscription")[1:] == [
        "1:1, non-blocking",
        "gpucluster_fabric.oversubscription (default 1)",
    ]
    assert _row(plan, "Fabric and NCCL", "spines")[1] == "1 x 2"
    assert _row(plan, "Fabric and NCCL", "cables")[1] == "64 / 64 / 0"
    site, groups = load_inventory("tier4")
    site = copy.deepcopy(site)
    site["gpucluster_fabric"]["oversubscription"] = 2
    plan = cluster_plan(site, groups)
    assert _row(plan, "Fabric and NCCL", "oversubscription")[1] == "2:1 host ports to uplinks"
    assert _row(plan, "Fabric and NCCL", "cables")[1] == "64 / 32 / 0"


# --- the tier table's training fit: computed, and never against the Parallelism section -----------


@pytest.mark.parametrize("tier", TIERS)
def test_the_fit_line_is_computed_and_agrees_with_the_summary(tier: str) -> None:
    """Issue 27: tier3's table said '~180B full fine-tune' while the summary warned the 180B model does
    not fit. The line is now the plan's ceiling, and it says what the Parallelism section says."""
    plan = cluster_plan(*load_inventory(tier))
    par = plan["parallelism"]
    _, value, how = report_compute.training_fit_row(plan)
    ceiling = report_compute.largest_full_fine_tune_b(par)
    assert value.startswith(f"full fine-tune up to ~{round(ceiling)}B parameters")
    assert plan["tier"]["training_fit"] not in value  # not the articles' claim
    verdict = "fits" if par["fits"] else "does not fit"
    assert f"this site's {fmt(par['model_params_b'])}B model {verdict}" in value
    warned = any("Model does not fit" in w for w in report_summary(plan)["warnings"])
    assert warned == (not par["fits"])
    assert f"({par['total_gpus']} GPUs x " in value and "Parallelism section" in how


def test_tier3_no_longer_claims_180b() -> None:
    plan = cluster_plan(*load_inventory("tier3"))
    _, value, _ = report_compute.training_fit_row(plan)
    assert "~180B full fine-tune" not in value and "180B model does not fit" in value


@settings(max_examples=60, deadline=None)
@given(
    model=st.floats(min_value=0.5, max_value=2000, allow_nan=False),
    gpus_per_node=st.sampled_from([1, 2, 4, 8]),
    nodes=st.integers(min_value=1, max_value=32),
    memory=st.sampled_from([24.0, 40.0, 48.0, 80.0, 141.0, 192.0]),
)
def test_a_model_fits_exactly_when_it_is_within_the_ceiling(
    model: float, gpus_per_node: int, nodes: int, memory: float
) -> None:
    """Without a pinned layout, the Parallelism section's "fits" is the ceiling of the fit line."""
    par = parallelism(model_params_b=model, gpus_per_node=gpus_per_node, nodes=nodes, gpu_memory_gb=memory)
    ceiling = report_compute.largest_full_fine_tune_b(par)
    if abs(model - ceiling) > 1e-6 * ceiling:  # at the boundary itself float rounding decides
        assert par["fits"] == (model < ceiling), (model, ceiling, par["strategy"])


def test_report_md_of_tier4_shows_the_bring_up_rows() -> None:
    """report.md carries the GPU bring-up section (compute/bringup.py bringup_rows): tier4's H100 SXM sits
    on an NVSwitch board, so Fabric Manager is required, and GPUDirect RDMA names its method."""
    plan = cluster_plan(*load_inventory("tier4"))
    text = _render(plan)
    section = text[text.index("## GPU bring-up") :]
    section = section[: section.index("\n## ", 1)]
    bringup = plan["gpu"]["bringup"]
    assert "| Fabric Manager | required |" in section
    assert f"| GPUDirect RDMA | {bringup['gpudirect']['method']} |" in section
    assert bringup["fabric_manager"]["reason"] in section
