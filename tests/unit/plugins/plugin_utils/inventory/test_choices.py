"""One definition for each enumeration and host group name (inventory/choices.py, issue 31).

The tests read the collection's Python source (ast): a copy of an enumeration or a group name
written out again anywhere else fails here, naming the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import bringup, clocks, nccl
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import cabling, tco
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import choices, site
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import files, firewall, host_plan, rollout
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import mpi, rolling
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import nfs

CHOICES = ROOT / "plugins" / "plugin_utils" / "inventory" / "choices.py"
#: the enumerations choices.py defines (value sets: a copy in another order is a copy too)
ENUMERATIONS = {
    name: frozenset(getattr(choices, name))
    for name in (
        "FABRIC_TYPES",
        "RDMA_FABRICS",
        "TOPOLOGIES",
        "STORAGE_TYPES",
        "NIC_PURPOSES",
        "CLOCK_POLICIES",
        "DRAIN_POLICIES",
        "NCCL_TOPOLOGIES",
        "STORAGE_GROUPS",
        "ROLE_GROUPS",
    )
}
GROUPS = frozenset(choices.ROLE_GROUPS)
#: the modules that pick hosts by group (the issue's four places)
GROUP_USERS = ("inventory/site.py", "plan/files.py", "plan/host_plan.py", "plan/firewall.py")


def _sources() -> list[Path]:
    return sorted(p for p in (ROOT / "plugins").rglob("*.py") if p != CHOICES)


def _string_collections(tree: ast.AST) -> list[tuple[int, frozenset[str]]]:
    """(line, values) of every tuple, list or set literal whose items are all strings."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) > 1:
            items = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(items) == len(node.elts):
                out.append((node.lineno, frozenset(items)))
    return out


def test_each_enumeration_is_written_out_once() -> None:
    copies = [
        f"{path.relative_to(ROOT)}:{line} repeats choices.{name}"
        for path in _sources()
        for line, values in _string_collections(ast.parse(path.read_text()))
        for name, enum in ENUMERATIONS.items()
        if values == enum
    ]
    assert copies == []


def _group_literals(tree: ast.AST) -> list[ast.Constant]:
    """Group names written as strings where a module picks hosts by group: in a tuple, list or set
    literal, in a ``frozenset(...)``, or as the argument of ``groups.get(...)`` or ``hosts_in(...)``
    (plan keys such as ``plan["storage"]`` and NIC purposes are other things of the same spelling)."""
    found = []
    for node in ast.walk(tree):
        places: list[ast.AST] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            places = list(node.elts)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if name in ("frozenset", "hosts_in") or (name == "get" and owner == "groups"):
                places = [n for arg in node.args for n in ast.walk(arg)]
        found += [n for n in places if isinstance(n, ast.Constant) and n.value in GROUPS]
    return list({id(n): n for n in found}.values())  # a set inside frozenset(...) is met twice


def test_the_group_users_name_no_group_in_a_string() -> None:
    """site.py, files.py, host_plan.py and firewall.py spell no group name: they use choices' constants."""
    base = ROOT / "plugins" / "plugin_utils"
    found = [
        f"{name}:{node.lineno} {node.value!r}"
        for name in GROUP_USERS
        for node in _group_literals(ast.parse((base / name).read_text()))
    ]
    assert found == []


def test_the_group_check_sees_a_group_name() -> None:
    """The check above finds what it looks for (a rule of each kind, written with a literal)."""
    code = 'frozenset({"head"}); groups.get("compute"); site.hosts_in("slurm_backup"); x = ("storage", "y")'
    assert sorted(n.value for n in _group_literals(ast.parse(code))) == ["compute", "head", "slurm_backup", "storage"]


@pytest.mark.parametrize(
    ("used", "defined"),
    [
        (site.FABRIC_TYPES, choices.FABRIC_TYPES),
        (nccl.FABRIC_TYPES, choices.FABRIC_TYPES),
        (mpi.FABRIC_TYPES, choices.FABRIC_TYPES),
        (site.CLOCK_POLICIES, choices.CLOCK_POLICIES),
        (clocks.CLOCK_POLICIES, choices.CLOCK_POLICIES),
        (rollout.DRAIN_POLICIES, choices.DRAIN_POLICIES),
        (rolling.DRAIN_POLICIES, choices.DRAIN_POLICIES),
        (cabling.TOPOLOGIES, choices.TOPOLOGIES),
        (bringup.RDMA_FABRICS, choices.RDMA_FABRICS),
        (nfs.RDMA_FABRICS, choices.RDMA_FABRICS),
        (tco.FABRICS, choices.RDMA_FABRICS),
        (site.ROLE_GROUPS, choices.ROLE_GROUPS),
    ],
)
def test_the_users_hold_the_one_definition(used: object, defined: object) -> None:
    assert used is defined


def test_every_group_a_rule_names_is_an_inventory_group() -> None:
    """The host selectors of role files, the kept shared tables and the firewall's services name
    only groups the inventory knows (a typo would silently give a file to no host)."""
    named = set()
    for hosts in files.HOSTS.values():
        named |= hosts or set()
    for keep in host_plan.KEEP_ON.values():
        named |= keep
    for service in firewall.SERVICES:
        named |= service.roles or set()
    assert named and named <= GROUPS, sorted(named - GROUPS)
    assert all(files.HOSTS[g] == {g} for g in (choices.HEAD, choices.COMPUTE, *choices.STORAGE_GROUPS))


def test_choices_imports_nothing_of_the_collection() -> None:
    """A leaf: any engine module may import it without a cycle."""
    tree = ast.parse(CHOICES.read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert imported == ["__future__"]
