"""The plan's pictures: fabric DOT, rack power/cooling SVG, report HTML (plugin_utils/report/diagram.py, html.py).

Well-formed and complete: the DOT names every compute host and switch and its edges carry
every cable of the plan; the SVG parses as XML with one bar per rack; the HTML is
balanced and escapes what it does not convert.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from conftest import ROOT, listed, load_inventory

from ansible_collections.gpucluster.tiers.plugins.filter.diagram import FilterModule
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report import diagram
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report import html as report_html

SVG = "{http://www.w3.org/2000/svg}"
EDGE = re.compile(r'^\s*"([^"]+)" -- "([^"]+)" \[(.*)\];$', re.M)


def _plan(tier: str) -> dict[str, Any]:
    return cluster_plan(*load_inventory(tier))


def _generated(nodes: int) -> dict[str, Any]:
    """tier4 grown to ``nodes`` compute nodes, as make bench-plan builds it."""
    spec = importlib.util.spec_from_file_location("bench_plan", ROOT / "tools" / "bench" / "bench_plan.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return cluster_plan(*bench.generated_site(nodes))


def _render(dot_text: str, tmp_path: Path) -> ET.Element:
    """dot's SVG of the text (skipped without Graphviz): proves the DOT is valid."""
    if not shutil.which("dot"):
        pytest.skip("graphviz dot is not installed")
    src = tmp_path / "fabric.dot"
    src.write_text(dot_text)
    run = subprocess.run(["dot", "-Tsvg", str(src)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "Warning" not in run.stderr and "Error" not in run.stderr, run.stderr
    return ET.fromstring(run.stdout)


@pytest.mark.parametrize("tier", ["tier1", "tier2", "tier3", "tier4"])
def test_fabric_dot_names_every_host_and_switch(tier: str, tmp_path: Path) -> None:
    plan = _plan(tier)
    dot = diagram.fabric_dot(plan)
    assert dot.startswith("// Fabric of ") and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    compute = [h for h, v in plan["hosts"].items() if "compute" in v["roles"]]
    for host in compute:
        assert f'"{host}" [' in dot, host
    for switch in plan["fabric"]["cabling"]["switches"]:
        assert f'"{switch["name"]}" [' in dot, switch["name"]
        if switch["kind"] == "leaf":
            assert f"rail {switch['rail']}" in dot
    svg = _render(dot, tmp_path)
    titles = {t.text for t in svg.iter(f"{SVG}title")}
    assert set(compute) <= titles


@pytest.mark.parametrize("tier", ["tier2", "tier3", "tier4"])
def test_fabric_dot_edges_carry_every_cable(tier: str) -> None:
    plan = _plan(tier)
    cab = plan["fabric"]["cabling"]
    edges = EDGE.findall(diagram.fabric_dot(plan))
    drawn = 0
    pairs = set()
    for a, b, attrs in edges:
        if "style=invis" in attrs:
            continue
        count = re.search(r'label="x(\d+)', attrs)
        drawn += int(count.group(1)) if count else 1
        pairs.add((a, b))
    assert drawn == fabric_links.link_count(cab)
    expected = {(x["b"]["node"], x["a"]["node"]) for x in fabric_links.links(cab) if x["kind"] == "host"}
    spines = {s["name"] for s in cab["switches"] if s["kind"] == "spine"}
    expected |= {
        (x["b"]["node"], x["a"]["node"]) if x["b"]["node"] in spines else (x["a"]["node"], x["b"]["node"])
        for x in fabric_links.links(cab)
        if x["kind"] != "host"
    }
    assert pairs == expected


def test_rail_optimized_host_links_are_coloured_by_rail() -> None:
    plan = _plan("tier3")
    dot = diagram.fabric_dot(plan)
    for link in fabric_links.links(plan["fabric"]["cabling"]):
        colour = diagram.RAIL_COLOURS[link["rail"] % len(diagram.RAIL_COLOURS)]
        assert f'"{link["b"]["node"]}" -- "{link["a"]["node"]}" [color="{colour}"' in dot


def test_no_fabric_shows_the_node_and_nvlink(tmp_path: Path) -> None:
    dot = diagram.fabric_dot(_plan("tier1"))
    assert '"dgx01" [' in dot and "NVLink inside the node" in dot
    assert " -- " not in dot.replace("[style=invis]", "")
    _render(dot, tmp_path)


def test_large_fabric_is_an_overview_that_dot_draws_quickly(tmp_path: Path) -> None:
    plan = _generated(256)
    dot = diagram.fabric_dot(plan)
    sus = plan["fabric"]["cabling"]["scalable_units"]
    for su in sus:
        assert f'"{su["name"]}" [' in dot
    assert '"compute001" [' not in dot  # hosts drawn per scalable unit
    assert len(dot.splitlines()) < 200
    edges = [e for e in EDGE.findall(dot) if "style=invis" not in e[2]]
    drawn = sum(int(m.group(1)) for *_, attrs in edges if (m := re.search(r'label="x(\d+)', attrs)))
    assert drawn == fabric_links.link_count(plan["fabric"]["cabling"])
    _render(dot, tmp_path)
    # the same plan drawn in full when asked
    full = diagram.fabric_dot(plan, max_hosts=1000, max_switches=10000)
    assert '"compute001" [' in full and '"compute256" [' in full


def test_dot_quotes_odd_names(tmp_path: Path) -> None:
    plan = _plan("tier2")
    odd = copy.deepcopy(plan)  # the engine never makes such names; the quoting must hold anyway
    odd["fabric"]["cabling"]["switches"][0]["name"] = 'ib "sw" \\01'
    for link in listed(odd["fabric"]["cabling"])["links"]:
        link["b"]["node"] = 'ib "sw" \\01'
    dot = diagram.fabric_dot(odd)
    assert '"ib \\"sw\\" \\\\01"' in dot
    _render(dot, tmp_path)


def _svg(plan: dict[str, Any]) -> ET.Element:
    text = diagram.power_svg(plan)
    root = ET.fromstring(text)
    assert root.tag == f"{SVG}svg"
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0
    return root


def _rects(root: ET.Element, cls: str) -> list[ET.Element]:
    return [r for r in root.iter(f"{SVG}rect") if r.get("class") == cls]


@pytest.mark.parametrize("tier", ["tier1", "tier2", "tier3", "tier4"])
def test_power_svg_has_one_bar_per_rack_under_the_budget_line(tier: str) -> None:
    plan = _plan(tier)
    root = _svg(plan)
    pw = plan["power"]
    racks = -(-plan["cluster"]["compute_nodes"] // pw["nodes_per_rack"])
    assert len(_rects(root, "gpu")) == len(_rects(root, "base")) == racks
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert f"budget {diagram._num(pw['rack_budget_kw'])} kW" in texts
    assert diagram._num(round(pw["rack_kw"], 1)) in texts
    budget = [line for line in root.iter(f"{SVG}line") if line.get("class") == "budget"]
    assert len(budget) == 1
    # bar heights are proportional to the rack's load: GPU part / whole = GPU share of a node
    gpu, base = _rects(root, "gpu")[0], _rects(root, "base")[0]
    share = float(gpu.get("height")) / (float(gpu.get("height")) + float(base.get("height")))
    assert share == pytest.approx(pw["gpu_load_kw_per_node"] / pw["node_kw"], abs=0.01)
    if plan["cooling"]["cooling"] == "dlc":
        assert _rects(root, "flow")
        assert f"{diagram._num(plan['cooling']['required_flow_lpm'])} required" in texts
    else:
        assert "air cooled" in texts


def test_power_svg_shows_the_cap_when_the_rack_does_not_fit() -> None:
    site, groups = load_inventory("tier4")
    site = copy.deepcopy(site)
    site["gpucluster_facility"].update(rack_power_budget_kw=25, pdu_rating_kw=25, racks=3)
    plan = cluster_plan(site, groups)
    assert not plan["power"]["fits"]
    root = _svg(plan)
    assert [r.get("class") for r in root.iter(f"{SVG}rect")].count("gpu") == 3  # 3 + 3 + 2 nodes
    assert len([x for x in root.iter(f"{SVG}line") if x.get("class") == "fitted"]) == 3
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert f"capped at {plan['power']['per_gpu_cap_w_to_fit']} W" in texts


def test_power_svg_groups_identical_racks_of_a_large_site() -> None:
    plan = _generated(1024)
    root = _svg(plan)
    assert len(_rects(root, "gpu")) == 1
    assert "racks 1-256" in " ".join(t.text or "" for t in root.iter(f"{SVG}text"))


class _Balanced(HTMLParser):
    VOID = frozenset({"meta", "img", "br", "hr", "link", "input"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (self.stack, tag)
        self.stack.pop()


def test_markdown_html_converts_the_report_subset() -> None:
    md = "\n".join(
        [
            "# Cluster plan: t (tier3)",
            "",
            "Some `code` and **bold** <script>x</script> & more",
            "continued line.",
            "",
            "![Fabric](fabric.svg)",
            "",
            "| setting | value | how |",
            "|---|---|---|",
            "| a | b \\| c | <= d |",
            "",
            "- `h1`: [link](report.html)",
            "",
            "- `h2`: two",
            "",
            "```",
            "x < y",
            "```",
        ]
    )
    page = report_html.markdown_html(md, "t <plan>")
    parser = _Balanced()
    parser.feed(page)
    assert parser.stack == []
    assert "<title>t &lt;plan&gt;</title>" in page
    assert "<h1>Cluster plan: t (tier3)</h1>" in page
    para = "Some <code>code</code> and <strong>bold</strong> &lt;script&gt;x&lt;/script&gt; &amp; more\ncontinued line."
    assert f"<p>{para}</p>" in page  # raw HTML is escaped (markdown-it-py with html off)
    assert '<img src="fabric.svg" alt="Fabric">' in page
    assert "<td>b | c</td>\n<td>&lt;= d</td>" in page  # the table extension is on
    assert page.count("<ul>") == 1 and page.count("<li>") == 2  # one list across the blank line
    assert '<a href="report.html">link</a>' in page
    assert "<pre><code>x &lt; y\n</code></pre>" in page
    assert "<script>" not in page


def test_filters_wrap_the_engine_and_refuse_other_input() -> None:
    filters = FilterModule().filters()
    plan = _plan("tier3")
    assert filters["fabric_dot"](plan) == diagram.fabric_dot(plan)
    assert filters["power_svg"](plan) == diagram.power_svg(plan)
    assert filters["markdown_html"]("# x", "t").count("<h1>x</h1>") == 1
    with pytest.raises(AnsibleFilterError, match="must be the cluster plan"):
        filters["fabric_dot"]({"cluster": {}})
    with pytest.raises(AnsibleFilterError, match="Markdown text"):
        filters["markdown_html"](["# x"])


def test_three_tier_fabric_draws_core_switches_above_the_spines() -> None:
    """A three-tier fat tree: core switches on their own rank (one box in the overview), spine-core edges."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.cabling import expected_cabling

    hosts = [f"gpu{i:02d}" for i in range(1, 21)]
    cab = expected_cabling(topology="fat_tree", compute_hosts=hosts, rail_hcas=["mlx5_0", "mlx5_1"], switch_radix=8)
    plan = {
        "fabric": {"cabling": cab, "type": "infiniband", "topology": "fat_tree", "rails": 2, "link_rate_gbps": 400},
        "cluster": {"name": "t", "tier": "custom", "gpus_per_node": 2, "gpu_model": "h100_sxm"},
        "hosts": {h: {"roles": ["compute"]} for h in hosts},
    }
    full = diagram.fabric_dot(plan)
    assert '"core01" [fillcolor="#d9d9d9", label="core01\\n8 ports"];' in full
    overview = diagram.fabric_dot(plan, max_switches=10)
    assert '"cores" -- "spines" [label="x40"' in overview  # every spine-core cable, one edge
