"""Issue 30: no control character or dangerous value reaches a host, no inventory variable is lost.

- every string field of every reference inventory, with a control character injected, stops the plan
  naming that very field (so no rendered file can hold one);
- values with the right form that cannot be meant (values.py) and inventory variables the plan would
  ignore or that would move it (site.check_host_variables) are refused with the field, the value and
  what is allowed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import site as site_module
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import field_path
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.values import (
    SYSTEM_TREES,
    yaml_reading,
)

INVENTORIES = sorted(
    str(p.relative_to(ROOT / "inventories"))
    for p in [*(ROOT / "inventories").glob("tier*"), *(ROOT / "inventories" / "examples").glob("*")]
    if (p / "hosts.yml").is_file()
)
CONTROLS = ["\n", "\r", "\t", "\x00", "\x1b", "\x7f", "\x85", "\u2028"]


def strings(value: Any, path: list[Any]) -> Iterator[list[Any]]:
    """The path of every string in ``value``."""
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from strings(sub, [*path, key])
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from strings(sub, [*path, i])


def inject(site: dict[str, Any], path: list[Any], text: str, at: int | None = None) -> dict[str, Any]:
    out = copy.deepcopy(site)
    target: Any = out
    for step in path[:-1]:
        target = target[step]
    old = target[path[-1]]
    where = len(old) if at is None else min(at, len(old))
    target[path[-1]] = old[:where] + text + old[where:]
    return out


@pytest.mark.parametrize("name", INVENTORIES)
def test_a_control_character_in_any_string_field_stops_the_plan_at_that_field(name: str) -> None:
    site, groups = load_inventory(name)
    paths = list(strings(site, []))
    assert len(paths) > 20, paths
    for i, path in enumerate(paths):
        bad = inject(site, path, CONTROLS[i % len(CONTROLS)])
        with pytest.raises(PlanError) as caught:
            cluster_plan(bad, groups)
        assert caught.value.field == field_path(path), str(caught.value)
        assert "without control characters" in str(caught.value)


@pytest.mark.parametrize("name", ["tier1", "tier3"])
def test_a_control_character_in_a_host_name_stops_the_plan(name: str) -> None:
    site, groups = load_inventory(name)
    for control in CONTROLS:
        bad = copy.deepcopy(groups)
        host = bad["compute"][0]
        bad["compute"][0] = host + control
        bad["all"] = [h + control if h == host else h for h in bad["all"]]
        with pytest.raises(PlanError) as caught:
            cluster_plan(site, bad)
        assert caught.value.field.startswith("groups."), str(caught.value)


SITE3, GROUPS3 = load_inventory("tier3")
PATHS3 = list(strings(SITE3, []))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(PATHS3), st.sampled_from(CONTROLS), st.integers(0, 80))
def test_control_characters_anywhere_in_any_field_are_refused(path: list[Any], control: str, at: int) -> None:
    with pytest.raises(PlanError) as caught:
        cluster_plan(inject(SITE3, path, control, at), GROUPS3)
    assert caught.value.field == field_path(path)


def numbers(value: Any, path: list[Any]) -> Iterator[list[Any]]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from numbers(sub, [*path, key])
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from numbers(sub, [*path, i])


@pytest.mark.parametrize("name", ["tier2", "tier4", "examples/tier2-nvmeof"])
def test_a_non_finite_number_in_any_number_field_stops_the_plan_at_that_field(name: str) -> None:
    site, groups = load_inventory(name)
    for i, path in enumerate(numbers(site, [])):
        bad = copy.deepcopy(site)
        target: Any = bad
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = [float("nan"), float("inf"), float("-inf")][i % 3]
        with pytest.raises(PlanError) as caught:
            cluster_plan(bad, groups)
        assert caught.value.field == field_path(path), str(caught.value)
        assert "a finite number" in str(caught.value)


# --- names YAML would read as something else


@pytest.mark.parametrize(
    ("name", "reading"),
    [("yes", "true"), ("no", "false"), ("on", "true"), ("null", "null (no value)"), ("010", "the number 8")],
)
def test_yaml_reading_says_what_yaml_reads(name: str, reading: str) -> None:
    assert yaml_reading(name) == reading


@pytest.mark.parametrize("name", ["compute01", "head01", "gpu-a1", "node8", "yes-1", "x010"])
def test_ordinary_host_names_read_as_text(name: str) -> None:
    assert yaml_reading(name) is None


@given(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True))
def test_every_name_yaml_does_not_read_as_text_is_refused(name: str) -> None:
    if not isinstance(yaml.safe_load(name), str):
        assert yaml_reading(name) is not None


# --- system folders


@given(st.sampled_from(SYSTEM_TREES), st.from_regex(r"(/[a-z0-9_.-]{1,8}){0,3}", fullmatch=True))
@settings(max_examples=40, deadline=None)
def test_no_mount_point_lies_in_a_system_tree(tree: str, rest: str) -> None:
    bad = copy.deepcopy(SITE3)
    bad["gpucluster_storage"]["lustre"]["mount_point"] = tree + rest
    with pytest.raises(PlanError) as caught:
        cluster_plan(bad, GROUPS3)
    assert caught.value.field == "gpucluster_storage.lustre.mount_point"


# --- inventory variables the plan would ignore (site.check_host_variables, filter inventory_scope)

ALL = {"gpucluster_cluster": {"name": "x"}, "gpucluster_tenants": []}


def _hosts(**per_host: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {"localhost": dict(ALL), "head01": dict(ALL), "compute01": dict(ALL)}
    for host, values in per_host.items():
        out[host] = {**out.get(host, {}), **values}
    return out


def test_group_all_variables_pass() -> None:
    site_module.check_host_variables(_hosts())


def test_a_host_var_is_refused_with_the_host_named() -> None:
    with pytest.raises(PlanError) as caught:
        site_module.check_host_variables(_hosts(compute01={"gpucluster_tenants": [{"name": "a"}]}))
    assert caught.value.field == "gpucluster_tenants"
    assert "host compute01 has its own value" in str(caught.value)


def test_a_variable_of_another_group_only_is_refused() -> None:
    with pytest.raises(PlanError) as caught:
        site_module.check_host_variables(_hosts(compute01={"gpucluster_gpu_policy": {"clock_policy": "fixed"}}))
    assert caught.value.field == "gpucluster_gpu_policy"
    assert "while group all has none" in str(caught.value)


def test_a_declared_per_host_variable_passes() -> None:
    hosts = _hosts(compute01={"gpucluster_gpu_policy": {"clock_policy": "fixed"}})
    site_module.check_host_variables(hosts, per_host=frozenset({"gpucluster_gpu_policy"}))


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("gpucluser_gpu_policy", "gpucluster_gpu_policy"),
        ("gpuclusterr_node", "gpucluster_node"),
        ("gpcluster_tenants", "gpucluster_tenants"),
        ("gpucluster-fabric", "gpucluster_fabric"),
    ],
)
def test_a_near_miss_name_gets_did_you_mean(name: str, meant: str) -> None:
    with pytest.raises(PlanError) as caught:
        site_module.check_host_variables(_hosts(localhost={name: {}}))
    assert caught.value.field == name
    assert f"did you mean '{meant}'?" in str(caught.value)


@pytest.mark.parametrize("name", ["ansible_host", "slurm_version", "gpu_driver", "cluster_name", "k8s_workload_dir"])
def test_other_variables_are_not_near_misses(name: str) -> None:
    site_module.check_host_variables(_hosts(localhost={name: "x"}, head01={name: "x"}))


@pytest.mark.parametrize("name", ["gpucluster_plan_root", "gpucluster_plan_dir"])
def test_the_plan_root_comes_from_the_command_line_only(name: str) -> None:
    hosts = _hosts(localhost={name: "/etc"}, compute01={name: "/etc"})
    with pytest.raises(PlanError) as caught:
        site_module.check_host_variables(hosts)
    assert caught.value.field == name and caught.value.value == "/etc"
    assert f"-e {name}=PATH" in str(caught.value)
    site_module.check_host_variables(hosts, extra_vars={name})


def test_runtime_results_and_run_switches_are_not_site_data() -> None:
    site_module.check_host_variables(
        _hosts(compute01={"gpucluster_gpus": [], "gpucluster_lock_taken": True, "gpucluster_plan_no_log": False})
    )


@pytest.mark.parametrize("name", ["gpucluster_plan", "gpucluster_host_plan"])
def test_the_whole_plan_and_a_hosts_slice_are_not_site_data(name: str) -> None:
    """localhost's whole plan (gpucluster_plan) and a host play's slice (gpucluster_host_plan) on one host
    only are no "value set on group all only" error: a run's variables, not the site's."""
    site_module.check_host_variables(_hosts(compute01={name: {"hosts": {"compute01": {}}}}))
    assert "gpucluster_host_plan".startswith(site_module.RUN_PREFIXES)


def test_two_hosts_with_one_ansible_host_are_refused() -> None:
    hosts = _hosts(head01={"ansible_host": "10.0.0.5"}, compute01={"ansible_host": "10.0.0.5"})
    with pytest.raises(PlanError) as caught:
        site_module.check_host_variables(hosts)
    assert caught.value.field == "hostvars.head01.ansible_host" and caught.value.value == "10.0.0.5"
    assert "compute01 has 10.0.0.5 too" in str(caught.value)
    site_module.check_host_variables(hosts, extra_vars={"ansible_host"})  # -e: every host, on purpose


def test_variables_to_check_keeps_only_what_the_check_reads() -> None:
    values = {"gpucluster_node": {}, "gpucluser_node": {}, "ansible_host": "h", "ansible_user": "root", "x": 1}
    assert set(site_module.variables_to_check(values)) == {"gpucluster_node", "gpucluser_node", "ansible_host"}


def test_every_reference_inventory_still_plans() -> None:
    for name in INVENTORIES:
        site, groups = load_inventory(name)
        assert cluster_plan(site, groups)["cluster"]["name"], name
