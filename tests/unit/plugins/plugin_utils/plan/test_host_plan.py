"""Each host's slice of the plan (plugin_utils/plan/host_plan.py) and the plan's sha256."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import sys
from typing import Any

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from conftest import ROOT, TIERS, cluster_plan, load_inventory, render_role_template
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.filter.gpucluster import FilterModule
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import (
    KEEP_ON,
    SHARED,
    canonical_json,
    host_view,
    plan_sha256,
    view_sizes,
)

sys.path.insert(0, str(ROOT / "tools" / "bench"))
from bench_plan import generated_site

PLANS: dict[str, dict[str, Any]] = {}


def _plan(tier: str) -> dict[str, Any]:
    if tier not in PLANS:
        PLANS[tier] = cluster_plan(*load_inventory(tier))
    return PLANS[tier]


def _at(tree: Any, path: str) -> Any:
    for part in path.split("."):
        tree = tree[part]
    return tree


def _render(role: str, src: str, plan: dict[str, Any], host: str, item: dict[str, Any]) -> str:
    """A role template as the role renders it; variables other than the plan render empty, so a
    difference between the view and the whole plan shows in the output."""
    return render_role_template(
        role, src, plan, host, core_filters=True, undefined=jinja2.ChainableUndefined, item=item
    )


@pytest.mark.parametrize("tier", TIERS)
def test_every_file_renders_the_same_from_the_view(tier: str) -> None:
    plan = _plan(tier)
    for host, files in files_by_host(plan).items():
        view = host_view(plan, host)
        assert view["files"][host] == files
        for f in files:
            if f.get("static"):  # a program of files/, installed as is: nothing rendered from the plan
                continue
            whole = _render(f["role"], f["src"], plan, host, f)
            assert _render(f["role"], f["src"], view, host, f) == whole, (host, f["src"])


@pytest.mark.parametrize("tier", TIERS)
def test_host_indexed_parts_are_narrowed_to_the_host(tier: str) -> None:
    plan = _plan(tier)
    for host, entry in plan["hosts"].items():
        view = host_view(plan, host)
        assert set(view) == set(plan)  # the same top-level keys
        assert view["hosts"] == {host: entry}
        assert list(view["files"]) == [host]
        fh = view["fabric_host"]
        assert fh["infiniband_hosts"] == ([host] if host in plan["fabric_host"]["infiniband_hosts"] else [])
        assert fh["roce_hosts"] == ([host] if host in plan["fabric_host"]["roce_hosts"] else [])
        assert set(fh["node_descriptions"]) <= {host}
        if plan["storage"]["type"] == "lustre":
            targets = view["storage"]["lustre"]["targets"]
            assert targets == ({host: plan["storage"]["lustre"]["targets"][host]} if targets else {})


@pytest.mark.parametrize("tier", TIERS)
def test_shared_tables_are_the_plans_own_objects(tier: str) -> None:
    """Referenced, never copied; only the hosts whose files contain them keep them."""
    plan = _plan(tier)
    for host, entry in plan["hosts"].items():
        view = host_view(plan, host)
        for path in SHARED:
            try:
                whole = _at(plan, path)
            except KeyError:
                continue
            mine = _at(view, path)
            keep = KEEP_ON.get(path)
            if keep is None or set(entry["roles"]) & keep:
                assert mine is whole, (host, path)
            else:
                assert not mine, (host, path)
        assert view["gpu"] is plan["gpu"] and view["slurm"] is plan["slurm"]
    # the head alone gets the monitoring targets and the whole cabling
    head = plan["cluster"]["head"]
    assert host_view(plan, head)["monitoring"]["targets"] is plan["monitoring"]["targets"]
    whole = plan["fabric"]["cabling"]["scalable_units"]
    assert host_view(plan, head)["fabric"]["cabling"]["scalable_units"] is whole


def test_the_view_leaves_the_plan_untouched() -> None:
    plan = _plan("tier4")
    before = canonical_json(plan)
    for host in plan["hosts"]:
        host_view(plan, host)
    assert canonical_json(plan) == before


_PATH = re.compile(r"gpucluster_host_plan((?:\.[a-z_0-9]+|\[inventory_hostname\])+)")


def _role_paths() -> set[str]:
    """Every gpucluster_host_plan key path in the roles' tasks, handlers, vars and templates."""
    paths: set[str] = set()
    for f in (ROOT / "roles").rglob("*"):
        if f.is_file() and f.suffix in (".yml", ".j2") and "meta" not in f.parts:
            paths |= {m.group(1) for m in _PATH.finditer(f.read_text())}
    return paths


def _lookup(tree: Any, path: str, host: str) -> tuple[bool, Any]:
    for part in re.findall(r"\.([a-z_0-9]+)|\[inventory_hostname\]", path):
        key = part or host
        if key in ("items", "keys", "values") and not (isinstance(tree, dict) and key in tree):
            return True, tree  # a method call (gpucluster_host_plan.nccl.conf.items())
        if not isinstance(tree, dict) or key not in tree:
            return False, None
        tree = tree[key]
    return True, tree


@pytest.mark.parametrize("tier", TIERS)
def test_every_key_path_the_roles_use_is_in_every_view(tier: str) -> None:
    paths = _role_paths()
    assert len(paths) > 40  # the grep found the roles' paths
    plan = _plan(tier)
    for host in plan["hosts"]:
        view = host_view(plan, host)
        roles = set(plan["hosts"][host]["roles"])
        emptied = [key for key, keep in KEEP_ON.items() if not roles & keep]
        for path in paths:
            if any(path.lstrip(".").startswith(f"{key}.") for key in emptied):
                continue  # inside a table this host does not keep (it renders no file that reads it)
            found, _ = _lookup(plan, path, host)
            if found:
                assert _lookup(view, path, host)[0], (host, path)


def _compute_size(nodes: int) -> tuple[int, int]:
    plan = cluster_plan(*generated_site(nodes))
    return view_sizes(host_view(plan, next(h for h, e in plan["hosts"].items() if "compute" in e["roles"])))


def test_a_compute_nodes_view_does_not_grow_with_the_cluster() -> None:
    (small, shared_small), (large, shared_large) = _compute_size(64), _compute_size(1024)
    assert abs(large - small) <= 0.10 * small, (small, large)
    assert shared_large > 8 * shared_small  # the shared tables do grow (and are not in the view's own bytes)


def test_topology_conf_reaches_the_slurm_hosts_as_a_line_a_switch() -> None:
    """topology.conf's data is Slurm's switches with their members as hostlists: a compute node refers to a
    few hundred bytes at 1,024 nodes, not to the cabling's host lists; a storage server gets none of it."""
    plan = cluster_plan(*generated_site(1024))
    switches = plan["fabric"]["slurm_topology"]
    compute = host_view(plan, "compute0001")["fabric"]
    assert compute["slurm_topology"] is switches and compute["cabling"]["scalable_units"] == []
    assert len(switches) == len(plan["fabric"]["cabling"]["scalable_units"]) + 1  # the SUs and the spines
    assert len(canonical_json(switches)) < 2 * 1024  # not a name a node (1,024 names of 11 characters)
    assert host_view(plan, "oss01")["fabric"]["slurm_topology"] == []
    assert host_view(plan, "head01")["fabric"]["slurm_topology"] is switches


def test_a_host_outside_the_plan_is_an_error() -> None:
    with pytest.raises(PlanError, match=r"inventory_hostname.*'nohost'"):
        host_view(_plan("tier1"), "nohost")
    with pytest.raises(AnsibleFilterError, match=r"gpucluster.tiers.host_plan: inventory field 'inventory_hostname'"):
        FilterModule().filters()["host_plan"](_plan("tier1"), "nohost")


def test_the_filter_gives_the_engines_view() -> None:
    plan = _plan("tier3")
    assert FilterModule().filters()["host_plan"](plan, "compute01") == host_view(plan, "compute01")


def test_sha256_is_the_same_for_the_same_plan() -> None:
    site, groups = load_inventory("tier4")
    one, two = cluster_plan(copy.deepcopy(site), groups), cluster_plan(copy.deepcopy(site), groups)
    assert plan_sha256(one) == plan_sha256(two)
    assert re.fullmatch(r"[0-9a-f]{64}", plan_sha256(one))


def test_sha256_ignores_key_order_and_survives_plan_json() -> None:
    plan = _plan("tier2")

    def reverse(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: reverse(value[k]) for k in reversed(list(value))}
        return [reverse(v) for v in value] if isinstance(value, list) else value

    assert plan_sha256(reverse(plan)) == plan_sha256(plan)
    # make plan writes plan.json with indent 2 and sorted keys; reading it back gives the same digest
    assert plan_sha256(json.loads(json.dumps(plan, indent=2, sort_keys=True))) == plan_sha256(plan)
    assert FilterModule().filters()["plan_sha256"](plan) == plan_sha256(plan)


def test_sha256_changes_with_the_plan() -> None:
    plan = copy.deepcopy(_plan("tier1"))
    digest = plan_sha256(plan)
    plan["slurm"]["cluster_name"] += "x"
    assert plan_sha256(plan) != digest


def test_canonical_json_is_compact_and_sorted() -> None:
    assert canonical_json({"b": 1, "a": [1, {"d": None, "c": "é"}]}) == '{"a":[1,{"c":"é","d":null}],"b":1}'


def test_site_and_plan_playbooks_read_the_view() -> None:
    """Every play of site.yml except the plan play sets gpucluster_host_plan to the host's view."""
    expr = "{{ hostvars | gpucluster.tiers.host_plan(inventory_hostname) }}"
    site = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
    # the plan play: localhost (localhost:all under a --limit, which keeps it), run once on the controller
    controller = "{{ 'localhost:all' if ansible_limit | default('') else 'localhost' }}"
    assert site[0]["hosts"] == controller and site[0]["tasks"][0]["delegate_to"] == "localhost"
    for play in site[1:]:
        if "ansible.builtin.import_playbook" in play:  # the preflight (playbooks/preflight.yml): facts only
            assert play["ansible.builtin.import_playbook"] == "preflight.yml", play
            continue
        if play["hosts"] in ("localhost", controller):  # controller plays (Kubernetes objects, the lock)
            continue
        assert play["vars"]["gpucluster_host_plan"] == expr, play["name"]
    plan_pb = yaml.safe_load((ROOT / "playbooks" / "plan.yml").read_text())
    assert plan_pb[-1]["vars"]["gpucluster_host_plan"] == expr
    # no host gets the whole plan as a fact: only the small sha256 and rollout go to localhost (delegate_facts)
    tasks = yaml.safe_load((ROOT / "playbooks" / "tasks" / "plan.yml").read_text())
    delegated = [t for t in tasks if t.get("delegate_facts")]
    assert [set(t["ansible.builtin.set_fact"]) for t in delegated] == [
        {"gpucluster_plan_sha256", "gpucluster_plan_rollout"}
    ]
    assert all(t["delegate_to"] == "localhost" for t in delegated)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(tree=st.dictionaries(st.text(max_size=6), _JSON, max_size=5), depth=st.integers(0, 6))
def test_the_sha256_hashed_piece_by_piece_is_the_sha256_of_the_whole_canonical_json(
    tree: dict[str, Any], depth: int
) -> None:
    assert plan_sha256(tree, depth) == hashlib.sha256(canonical_json(tree).encode("utf-8")).hexdigest()


def test_the_plan_sha256_is_of_the_whole_canonical_json() -> None:
    plan = _plan("tier3")
    assert plan_sha256(plan) == hashlib.sha256(canonical_json(plan).encode("utf-8")).hexdigest()


def test_the_plan_package_does_not_import_the_report() -> None:
    """The plan is data: the report is rendered from it (filter plan_report), so plan/* imports no report module."""
    import ast

    for path in sorted((ROOT / "plugins" / "plugin_utils" / "plan").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else []
            assert not any("plugin_utils.report" in n or n == "report" for n in names), (path.name, names)
    assert "report" not in _plan("tier3") and "report_summary" not in _plan("tier3")
