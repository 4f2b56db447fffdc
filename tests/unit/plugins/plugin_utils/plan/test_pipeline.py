"""cluster_plan as a pipeline (plan/assembly.py): each stage reads the sections it names, read-only, and
returns its own; the site model holds the inputs' defaults; the GPU model, the requested power limit and
the clock policy are each settled once; the plan holds data, not rendered documents."""

from __future__ import annotations

import ast
import copy
import inspect
import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, TIERS, cluster_plan, load_inventory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import (
    clocks,
    cooling,
    gpu,
    nccl,
    parallelism,
    power,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import node as compute_node
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import plan as fabric_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import errors, gpu_limits, site
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Facility, Workload, load_site
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import plan as monitoring_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import assembly, system
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import interfaces, lustre_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import plan as storage_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import plan as validation_plan

#: a plan's strings stay short: documents are rendered from the plan by the filters and templates
MAX_STRING = 2048


def _strings(value: Any, path: str = "") -> list[tuple[str, int]]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{path}[{i}]")]
    return [(path, len(value))] if isinstance(value, str) else []


@pytest.mark.parametrize("tier", TIERS)
def test_no_string_of_a_reference_plan_is_a_document(tier: str) -> None:
    plan = json.loads(json.dumps(cluster_plan(*load_inventory(tier))))
    assert [(p, n) for p, n in _strings(plan) if n > MAX_STRING] == []


#: a string with a line break is a document (a file's lines), whatever its length: the renderers write
#: documents, the plan holds data (lists, mappings, one-line values)
#: the inventories whose plans hold no document: the reference tiers, the Kubernetes path, every example
EXAMPLES = sorted(p.parent.name for p in (ROOT / "inventories" / "examples").glob("*/hosts.yml"))
#: the Kubernetes path with MIG (no inventory of its own): tier4-k8s with two nodes' GPUs split
K8S_MIG = "tier4-k8s with MIG"
PLANNED = (*TIERS, "tier4-k8s", K8S_MIG, *(f"examples/{name}" for name in EXAMPLES))


def _inventory(name: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    if name != K8S_MIG:
        return load_inventory(name)
    raw, groups = load_inventory("tier4-k8s")
    raw = copy.deepcopy(raw)
    mig = [{"nodes": groups["compute"][:2], "profiles": ["3g.40gb", "3g.40gb"]}]
    raw["gpucluster_gpu_policy"] = {**(raw.get("gpucluster_gpu_policy") or {}), "mig": mig}
    return raw, groups


#: the multi-line strings a plan still holds, each with the reason (a path with ``<host>`` for any host)
DOCUMENTS_ALLOWED: dict[str, str] = {
    # the GPU Operator's MIG Manager reads mig-parted's config from a ConfigMap, whose data the Kubernetes
    # API types as text: the plan's manifests are the API objects the k8s_workload role writes and applies
    # as they are; the text is rendered from gpu.mig.parted by compute/mig.py's mig_parted_config, the
    # function the compute role's filter calls, and a string keeps its bytes through plan.json
    "kubernetes.manifests[].object.data.config.yaml": "a ConfigMap's data is text by the Kubernetes API",
}


def _documents(value: Any, path: str = "") -> list[tuple[str, int]]:
    """(path, length) of every string with a line break (even one ending a single line); a host's key
    reads ``<host>``."""
    if isinstance(value, dict):
        return [d for k, v in value.items() for d in _documents(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [d for v in value for d in _documents(v, f"{path}[]")]
    if isinstance(value, str) and "\n" in value:
        return [(path, len(value))]
    return []


@pytest.mark.parametrize("name", PLANNED)
def test_a_plan_holds_no_rendered_document(name: str) -> None:
    """nccl.conf, mount units, BeeGFS and NVMe-oF files, topology.conf, Grafana provisioning, rules,
    dashboards, mig-parted's config and the report are rendered from the plan's data by the filters and
    templates; only the allow-listed remain."""
    plan = cluster_plan(*_inventory(name))
    hosts = set(plan["hosts"])
    found = {
        ".".join("<host>" if part in hosts else part for part in path.split(".")): n for path, n in _documents(plan)
    }
    assert set(found) <= set(DOCUMENTS_ALLOWED), {p: n for p, n in found.items() if p not in DOCUMENTS_ALLOWED}


def test_every_allowed_document_is_still_in_some_plan() -> None:
    """The allow-list shrinks as documents leave the plan: each entry is found in one of the plans."""
    found: set[str] = set()
    for name in PLANNED:
        found |= {path for path, _ in _documents(cluster_plan(*_inventory(name)))}
    assert set(DOCUMENTS_ALLOWED) <= found


def test_the_removed_documents_stay_out_of_the_plan() -> None:
    """The texts the renderers write (issue 31): none of their keys is back in a plan."""
    plan = cluster_plan(*load_inventory("examples/tier3-beegfs"))
    assert "conf_text" not in plan["nccl"]
    assert "conf" not in plan["storage"]["beegfs"]  # the service, interface and mounts files: filters, templates
    assert {"datasource_yaml", "provider_yaml"}.isdisjoint(plan["monitoring"]["grafana"])
    tier4 = cluster_plan(*load_inventory("tier4"))
    assert "unit_text" not in tier4["slurm"]["ha"]["state_save_mount"]
    assert all("unit_text" not in f.get("unit", {}) for files in files_by_host(tier4).values() for f in files)
    tier2 = cluster_plan(*load_inventory("tier2"))
    assert all("unit_text" not in m for m in tier2["storage"]["nfs"]["client_mounts"])
    nvme = cluster_plan(*load_inventory("examples/tier2-nvmeof"))["storage"]["nvmeof"]
    assert nvme["targets"] and all("config_json" not in t for t in nvme["targets"].values())
    assert "discovery_conf" not in nvme and nvme["target_modules"] == ["nvmet", "nvmet-rdma"]
    assert "topology_conf" not in tier4["fabric"] and tier4["fabric"]["slurm_topology"]
    # slurm.conf's NodeName lines: a mapping each (slurm.conf.j2 writes the lines)
    assert "node_line" not in tier4["slurm"] and tier4["slurm"]["nodes"]
    mig = cluster_plan(*load_inventory("examples/tier2-mig"))["gpu"]["mig"]
    assert "parted_yaml" not in mig and isinstance(mig["parted"]["mig-configs"], list)  # filter mig_parted_config
    # a site that opts in to NCCL's topology file: its PCI tree as data (filter nccl_topology_xml)
    site_vars, groups = load_inventory("tier3")
    site_vars = copy.deepcopy(site_vars)
    site_vars["gpucluster_node"]["nccl_topology"] = "file"
    opted = cluster_plan(site_vars, groups)["nccl"]
    assert "topology_xml" not in opted and opted["topology_tree"]["cpus"] and _documents(opted) == []


def test_the_plan_package_does_not_import_report() -> None:
    from pathlib import Path

    folder = Path(assembly.__file__).parent
    for path in folder.glob("*.py"):
        text = path.read_text()
        assert "plugin_utils.report" not in text and "import report" not in text, path.name


def _root(node: ast.AST) -> str | None:
    """The name an expression starts from: ``site`` for ``site.storage_model.paths`` or ``site.x["k"]``."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _site_reads(tree: ast.AST) -> set[str]:
    """``site`` and the local names bound to a part of it (``lu = site.lustre_model``)."""
    names = {"site"}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (
                zip(target.elts, node.value.elts, strict=False)
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                else [(target, node.value)]
            )
            names |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _root(v) == "site"}
    return names


def _raw_reads(source: str) -> list[str]:
    """The reads of ``source`` that bypass the site model: ``.raw``, a ``.get(key, default)``, and a ``.get``
    or a ``["key"]`` on the site or a name bound to a part of it."""
    tree = ast.parse(source)
    site_names = _site_reads(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr):
            continue
        where = f"line {node.lineno}: {ast.unparse(node)}"
        if isinstance(node, ast.Attribute) and node.attr == "raw":
            found.append(where)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if len(node.args) > 1 or _root(node.func.value) in site_names:
                found.append(where)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)  # a section's key (a list's index or slice is no default)
            and _root(node.value) in site_names
        ):
            found.append(where)
    return found


def _stage_sources() -> dict[str, str]:
    """The source of plan/assembly.py and of every stage it calls that reads the site model."""
    modules = (assembly, storage_plan, lustre_plan, interfaces, fabric_plan, gpu, validation_plan, monitoring_plan)
    functions = (
        nccl.nccl_plan,
        power.site_power_plan,
        cooling.site_cooling,
        parallelism.site_parallelism,
        compute_node.node_resources,
        system.cluster_section,
        system.time_plan,
        system.hosts_plan,
    )
    return {m.__name__: Path(str(m.__file__)).read_text() for m in modules} | {
        f.__qualname__: textwrap.dedent(inspect.getsource(f)) for f in functions
    }


def test_the_plan_reads_the_site_model_never_the_raw_inventory() -> None:
    """plan/assembly.py and its stages read typed fields of the site model (inventory/site.py): no
    ``site.raw``, no ``.get(key, default)`` and no ``.get``/``["key"]`` on a part of the site, so each optional
    field's default is decided once, in load_site. Reads of the plan's own computed sections
    (``fab["infiniband"]``) stay."""
    sources = _stage_sources()
    aliases = {name for source in sources.values() for name in _site_reads(ast.parse(source))}
    assert {"site", "st", "lu", "f", "policy"} <= aliases  # the stages' aliases
    assert {name: _raw_reads(source) for name, source in sources.items()} == {name: [] for name in sources}
    # what the check finds: each way a stage would read the inventory past the site model
    bad = [
        'x = site.raw.get("gpucluster_tenants")',
        'lu = site.lustre_model\ny = lu.get("layouts")',
        'z = site.storage["type"]',
        'rate = fab.get("link_rate_gbps", 400)',
    ]
    assert [len(_raw_reads(text)) > 0 for text in bad] == [True] * len(bad)
    assert _raw_reads('a = fab["infiniband"]\nb = plan["storage"].get("nfs")\nc = site.node.nics[0]') == []


def test_a_stage_reads_only_the_sections_it_names_and_writes_none() -> None:
    gpu: dict[str, Any] = {"model": "m"}
    needs = assembly._needs(gpu=gpu)
    assert needs == {"gpu": {"model": "m"}}
    # each stage its own view: what one stage adds to its view, the next never sees
    needs["cluster"] = {}  # type: ignore[typeddict-item]
    assert assembly._needs(gpu=gpu) == {"gpu": {"model": "m"}}


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    real: Callable[..., Any] = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_the_gpu_model_the_requested_limit_and_the_clock_policy_are_settled_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requested = _counting(monkeypatch, clocks, "requested_power_limit")
    limits = _counting(monkeypatch, gpu_limits, "apply_gpu_limits")
    policy_checks: list[str] = []
    real_choice = errors.check_choice

    def check_choice(value: Any, field: str, allowed: Any) -> Any:
        if field.endswith("clock_policy"):
            policy_checks.append(field)
        return real_choice(value, field, allowed)

    monkeypatch.setattr(site, "check_choice", check_choice)
    monkeypatch.setattr(clocks, "check_choice", check_choice)
    plan = cluster_plan(*load_inventory("tier3"))
    assert (len(requested), len(limits), policy_checks) == (1, 1, ["gpucluster_gpu_policy.clock_policy"])
    # the one decision reaches every consumer: the power plan and the clocks
    assert plan["gpu"]["clocks"]["power_limit_w"] == plan["power"]["power_limit_w"]


def test_the_site_model_holds_the_defaults_of_optional_fields() -> None:
    raw, groups = load_inventory("tier3")
    raw = copy.deepcopy(raw)
    raw["gpucluster_facility"] = {
        k: v for k, v in raw["gpucluster_facility"].items() if k in ("rack_power_budget_kw", "breaker_amps")
    } | {"circuit_voltage_v": 415}
    raw["gpucluster_workload"] = {"model_params_b": 70}
    s = load_site(raw, groups)
    budget = raw["gpucluster_facility"]["rack_power_budget_kw"]
    assert s.facility_model == Facility(
        rack_power_budget_kw=budget,
        breaker_amps=raw["gpucluster_facility"]["breaker_amps"],
        circuit_voltage_v=415,
        pdu_rating_kw=budget,  # the PDU defaults to the rack's budget
    )
    assert (s.facility_model.racks, s.facility_model.cooling, s.facility_model.ashrae_class) == (1, "air", "W32")
    assert s.workload_model == Workload(model_params_b=70)
    assert (s.workload_model.checkpoint_bytes_per_param, s.workload_model.io_wait_fraction) == (14, 0.2)
    assert (s.in_lab, s.memlock_kb, s.management_interface) == (False, "unlimited", "eno1")
    plan = cluster_plan(raw, groups)
    assert plan["cooling"]["cooling"] == "air" and plan["storage"]["sizing"]["inputs"]["bytes_per_param"] == 14


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    racks=st.integers(1, 4),
    delta_t=st.sampled_from([5, 8, 10, 12]),
    bpp=st.sampled_from([2, 12, 14, 16]),
)
def test_a_field_the_site_sets_wins_over_its_default(racks: int, delta_t: int, bpp: int) -> None:
    raw, groups = load_inventory("tier4")
    raw = copy.deepcopy(raw)
    raw["gpucluster_facility"] = {**raw["gpucluster_facility"], "racks": racks, "coolant_delta_t_k": delta_t}
    raw["gpucluster_workload"] = {**raw["gpucluster_workload"], "checkpoint_bytes_per_param": bpp}
    s = load_site(raw, groups)
    assert (s.facility_model.racks, s.facility_model.coolant_delta_t_k) == (racks, delta_t)
    assert s.workload_model.checkpoint_bytes_per_param == bpp


def test_a_bad_defaulted_field_still_names_itself() -> None:
    raw, groups = load_inventory("tier3")
    raw = copy.deepcopy(raw)
    raw["gpucluster_facility"] = {**raw["gpucluster_facility"], "racks": 0}
    with pytest.raises(PlanError, match=r"gpucluster_facility\.racks"):
        cluster_plan(raw, groups)


def test_lustre_and_the_subnet_manager_default_in_the_site_model() -> None:
    raw, groups = load_inventory("tier3")
    raw = copy.deepcopy(raw)
    lustre = {k: v for k, v in raw["gpucluster_storage"]["lustre"].items() if k not in ("fsname", "mount_point")}
    raw["gpucluster_storage"] = {**raw["gpucluster_storage"], "lustre": lustre}
    # the paths on the default mount point (checkpoints off the shared file system are refused: inventory/rules.py)
    raw["gpucluster_storage"]["paths"] = {k: f"/lustre/lustre/{k}" for k in raw["gpucluster_storage"]["paths"]}
    s = load_site(raw, groups)
    assert (s.lustre_model.fsname, s.lustre_model.mount_point, s.lustre_model.lnet_net) == (
        "lustre",
        "/lustre/lustre",
        lustre.get("lnet_net", "o2ib0"),
    )
    assert s.subnet_manager == raw["gpucluster_fabric"].get("subnet_manager", "head")
    plan = cluster_plan(raw, groups)
    assert plan["storage"]["lustre"]["client_mount"]["where"] == "/lustre/lustre"
    assert plan["fabric"]["subnet_manager"] == s.subnet_manager


def _roce_tier2() -> tuple[dict[str, Any], dict[str, list[str]]]:
    raw, groups = load_inventory("tier2")
    raw = copy.deepcopy(raw)
    raw["gpucluster_fabric"] = {**raw["gpucluster_fabric"], "type": "roce", "roce": {"dscp": 26}}
    raw["gpucluster_fabric"].pop("infiniband")  # an InfiniBand section on RoCE is refused (inventory/rules.py)
    return raw, groups


@pytest.mark.parametrize("inventory", [*TIERS, "tier4-k8s", "roce"])
def test_no_stage_changes_a_section_it_was_given(inventory: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every section a stage reads is, at the end of the plan, what it was when that stage read it: no later
    stage patched it (the RoCE MTU, NCCL's intra_node, the acceptance tests, the monitoring extras)."""
    seen: list[dict[str, Any]] = []
    real = assembly._needs

    def recording(**sections: Any) -> Any:
        seen.append(copy.deepcopy(sections))
        return real(**sections)

    monkeypatch.setattr(assembly, "_needs", recording)
    plan = cluster_plan(*(_roce_tier2() if inventory == "roce" else load_inventory(inventory)))
    assert len(seen) >= 6
    for read in seen:
        assert {name: plan[name] for name in read} == read
    if inventory == "roce":  # the hosts' rail units carry the RoCE MTU from the start
        units = [u for h in plan["hosts"].values() for u in h["network_units"] if u["purpose"] == "compute"]
        assert units and {u["mtu"] for u in units} == {plan["fabric"]["roce"]["mtu"]}


def test_no_engine_module_reads_the_raw_inventory() -> None:
    """Only inventory/site.py (load_site) reads the raw ``gpucluster_*`` variables, and a Site keeps none of
    them: every engine module gets the site model's fields (Slurm's and the costs' sections as written,
    checked by their own module)."""
    engine = Path(assembly.__file__).parents[1]
    readers = {
        str(path.relative_to(engine))
        for path in engine.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "raw"
    }
    assert readers == set()
    assert "raw" not in site.Site.__dataclass_fields__
