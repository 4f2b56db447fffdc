"""Issue 40: an inventory value is data (no template), bounded (depth, values, strings, host names, host
lists) and the lab's settings come from the lab's overlay only (plugin_utils/inventory/trust.py)."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import trust
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError


def _refused(name: str, value: Any) -> PlanError:
    with pytest.raises(PlanError) as caught:
        trust.check_value(name, value)
    assert len(str(caught.value)) < 1000, "a short message whatever the value"
    return caught.value


@pytest.mark.parametrize(
    ("value", "field", "mark"),
    [
        ({"domain": "{{ lookup('pipe', 'id') }}"}, "gpucluster_cluster.domain", "{{"),
        ({"name": "x{% for i in range(9) %}{% endfor %}"}, "gpucluster_cluster.name", "{%"),
        ({"name": "x{# a comment #}"}, "gpucluster_cluster.name", "{#"),
        ({"name": "#jinja2:variable_start_string:'<<'\n<< 1 >>"}, "gpucluster_cluster.name", "#jinja2:"),
        ({"users": ["alice", "{{ x }}"]}, "gpucluster_cluster.users[1]", "{{"),
        ({"{{ k }}": 1}, "gpucluster_cluster.<key>", "{{"),
    ],
)
def test_a_template_anywhere_in_a_value_is_refused_naming_its_field(value: Any, field: str, mark: str) -> None:
    error = _refused("gpucluster_cluster", value)
    assert error.field == field
    assert f"it holds {mark!r}" in str(error)
    assert "docs/security.md" in error.allowed


@given(st.text(alphabet=st.characters(blacklist_characters="{#"), max_size=200))
def test_text_without_a_jinja_start_string_passes(text: str) -> None:
    trust.check_value("gpucluster_cluster", {"name": text, "list": [text, {"x": text}]})


def test_an_alias_bomb_stops_at_the_value_limit_without_expanding() -> None:
    level: Any = ["alice", "bob", "carol", "dave", "eve", "fay", "gus", "hal", "ian"]
    for _level in range(12):  # 9**13 values if walked in full: shared lists, as YAML aliases load
        level = [level] * 9
    error = _refused("gpucluster_tenants", [{"name": "research", "users": level}])
    assert error.field.startswith("gpucluster_tenants[0].users")
    assert f"at most {trust.MAX_VALUES} values" in error.allowed
    assert "alias" in error.allowed


def test_nesting_deeper_than_the_limit_is_refused() -> None:
    value: Any = "leaf"
    for _level in range(500):
        value = [value]
    error = _refused("gpucluster_workload", {"x": value})
    assert f"at most {trust.MAX_DEPTH} levels" in error.allowed
    assert error.field.startswith("gpucluster_workload.x[0]")
    trust.check_value("gpucluster_workload", {"a": {"b": {"c": {"d": [[{"e": [1]}]]}}}})  # real depth passes


def test_a_string_longer_than_path_max_is_refused_and_shown_cut() -> None:
    error = _refused("gpucluster_storage", {"paths": {"home": "/" + "a" * 70_000}})
    assert error.field == "gpucluster_storage.paths.home"
    assert "(70001 characters)" in str(error.value)
    assert "at most 4096 characters" in error.allowed


@pytest.mark.parametrize(
    ("name", "fragment"),
    [("a" * 65536, "65536 characters"), ("a" * 64 + ".example", "each dot-separated label at most 63")],
)
def test_an_overlong_host_name_is_refused_with_a_short_message(name: str, fragment: str) -> None:
    with pytest.raises(PlanError) as caught:
        trust.check_host_names(["head01", name])
    assert caught.value.field == "inventory host name"
    assert fragment in str(caught.value)
    assert len(str(caught.value)) < 400


def test_real_host_names_pass() -> None:
    trust.check_host_names(["head01", "compute-0001.rack12.example.org", "a" * 63])


ROOT = PurePath("/srv/gpucluster")


@pytest.mark.parametrize(
    "origin", ["/srv/gpucluster/lab/overlay/lab.yml", "/srv/gpucluster/lab/overlay-tier4-k8s/group_vars/all/x.yml"]
)
def test_the_lab_settings_pass_from_the_labs_overlay(origin: str) -> None:
    trust.check_lab_origin(origin, ROOT, from_command_line=False)


@pytest.mark.parametrize(
    ("origin", "cli", "shown"),
    [
        ("/srv/site/group_vars/all/lab.yml", False, "set in /srv/site/group_vars/all/lab.yml"),
        ("/srv/gpucluster/inventories/tier3/group_vars/all/lab.yml", False, "set in /srv/gpucluster/inventories"),
        ("/srv/gpucluster/lab/create.yml", False, "set in /srv/gpucluster/lab/create.yml"),
        ("/srv/gpucluster/lab/overlays-not/x.yml", False, "set in"),
        ("/srv/gpucluster/lab/overlay/../../site/lab.yml", False, "set in"),
        (None, False, "set on the command line"),
        ("/srv/gpucluster/lab/overlay/lab.yml", True, "set on the command line (-e)"),
    ],
)
def test_the_lab_settings_are_refused_from_anywhere_else(origin: str | None, cli: bool, shown: str) -> None:
    with pytest.raises(PlanError) as caught:
        trust.check_lab_origin(origin, ROOT, from_command_line=cli)
    assert caught.value.field == "gpucluster_lab"
    assert shown in str(caught.value.value)
    assert "only from the lab's own overlay" in caught.value.allowed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("all:\n  hosts:\n    yes:\n", [("yes", 3, "true")]),
        ("all:\n  children:\n    compute:\n      hosts:\n        010:\n", [("010", 5, "the number 8")]),
        ("all:\n  hosts:\n    null:\n    off:\n", [("null", 3, "null (no value)"), ("off", 4, "false")]),
        ("all:\n  hosts:\n    'yes':\n    \"010\":\n    compute01:\n", []),
        ("not: [yaml", []),
    ],
)
def test_host_names_yaml_reads_as_no_name_are_found_with_their_line(text: str, expected: list[Any]) -> None:
    assert trust.coerced_host_names(text) == expected


@pytest.mark.parametrize(
    "expr",
    [
        ",".join(["n[0-65535]"] * 20),  # each token under the per-token cap, 1.3 million in all
        "n[" + ",".join(["0-65535"] * 20) + "]",  # one bracket of many ranges
    ],
)
def test_a_host_list_is_capped_in_total_not_only_per_bracket(expr: str) -> None:
    with pytest.raises(hostlist.HostlistError) as caught:
        hostlist.expand(expr)
    assert f"more than {hostlist.MAX_HOSTS} hosts" in str(caught.value)
    assert len(str(caught.value)) < 600, "the expression is shown cut"


class _RawHostVars:
    """What the plan play's inventory check uses of ansible's HostVars: raw_get(host)."""

    def __init__(self, data: dict[str, dict[str, Any]]) -> None:
        self.data = data

    def raw_get(self, host: str) -> dict[str, Any]:
        return self.data.get(host, {})


def test_a_runs_own_results_are_not_inventory_data() -> None:
    """The registered plan (a Grafana legend ``{{state}}`` in it) and the run's facts are left alone; the same
    text in a site variable is refused."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.scope import (
        ScopeError,
        check_raw_inventory,
    )

    legend = {"monitoring": {"legend": "{{state}}"}}
    own = {"gpucluster_plan": legend, "gpucluster_plan_rollout": legend, "gpucluster_gpus": [{"name": "{{x}}"}]}
    check_raw_inventory(
        _RawHostVars({"localhost": own, "dgx01": own}), ["localhost", "dgx01"], "localhost", frozenset()
    )
    with pytest.raises(ScopeError, match=r"gpucluster_monitoring\.legend"):
        check_raw_inventory(
            _RawHostVars({"localhost": {"gpucluster_monitoring": {"legend": "{{state}}"}}}),
            ["localhost"],
            "localhost",
            frozenset(),
        )
    # a run's switch read as a variable (so templated) stays checked
    with pytest.raises(ScopeError, match=r"gpucluster_plan_file"):
        check_raw_inventory(
            _RawHostVars({"localhost": {"gpucluster_plan_file": "{{ lookup('pipe', 'id') }}"}}),
            ["localhost"],
            "localhost",
            frozenset(),
        )


# --- a YAML file's nesting and aliases, read as parser events before Ansible loads the file


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("x: 1\na: " + "[" * 5000 + "]" * 5000 + "\n", 2, "nests more than 256"),  # libyaml's own limit: its line
        ("a: " + "{b: " * 300 + "}" * 300 + "\n", 1, "nests more than 256"),
        ("a:\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(1, 400)), 257, "nests more than 256"),
        ("a: &x 1\nb: [" + ", ".join(["*x"] * (trust.MAX_FILE_ALIASES + 1)) + "]\n", 2, "uses more than 10000"),
    ],
)
def test_a_yaml_file_over_the_limits_is_found_with_its_line(text: str, line: int, what: str) -> None:
    found = trust.yaml_limits(text)
    assert found is not None and found[0] == line and found[1].startswith(what)
    message = trust.yaml_limit_message("group_vars/all/deep.yml", *found)
    assert message.startswith(f"group_vars/all/deep.yml:{line}: the YAML {what}")


@given(st.integers(1, trust.MAX_FILE_DEPTH))
def test_nesting_up_to_the_limit_is_left_to_the_variable_checks(levels: int) -> None:
    """Up to 256 levels the file loads, and check_value names the field (32 levels per variable)."""
    assert trust.yaml_limits("[" * levels + "]" * levels) is None
    assert trust.yaml_limits("[" * (levels + trust.MAX_FILE_DEPTH) + "]" * (levels + trust.MAX_FILE_DEPTH))


def test_text_that_is_no_yaml_is_left_to_ansible() -> None:
    assert trust.yaml_limits("a: [1, 2\nb: : c") is None
    assert trust.yaml_limits(b"a: &x [1]\nb: *x\n") is None  # bytes and a few aliases are fine
