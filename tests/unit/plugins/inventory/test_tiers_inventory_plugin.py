"""The inventory plugin gpucluster.tiers.tiers: ``-i tier3`` is inventories/tier3, a mistyped tier stops.

Through ansible-inventory with this repository's ansible.cfg (which enables the plugin and sets
unparsed_is_failed), compared with the same inventory given by its path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.inventory.tiers import InventoryModule, known_tiers

BIN = Path(sys.executable).parent
TIERS = ("tier1", "tier2", "tier3", "tier4", "tier4-k8s")


def _inventory(source: str, cwd: Path = ROOT, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", source, *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _squeezed(text: str) -> str:
    """The text without white space: ansible-core 2.18 wraps a warning's lines, also inside a path."""
    return "".join(text.split())


def test_the_known_tiers_are_the_reference_inventories() -> None:
    assert set(known_tiers(ROOT)) == set(TIERS)
    assert known_tiers(ROOT)["tier3"] == ROOT / "inventories" / "tier3"


@pytest.mark.parametrize("tier", ["tier1", "tier4-k8s"])
def test_a_tier_name_reads_as_the_inventory_folder(tier: str) -> None:
    by_name = _inventory(tier, ROOT, "--list")
    by_path = _inventory(f"inventories/{tier}", ROOT, "--list")
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout) == json.loads(by_path.stdout)  # hosts, groups and every variable
    assert json.loads(by_name.stdout)["_meta"]["hostvars"]  # not empty: group_vars/all came along


def test_a_tier_name_works_from_another_folder(tmp_path: Path) -> None:
    run = _inventory("tier2", tmp_path, "--host", "compute01")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["gpucluster_cluster"]["name"] == "tier2"


def test_inventories_under_the_current_folder_come_first(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "inventories" / "tier1", tmp_path / "inventories" / "tier1")
    vars_file = tmp_path / "inventories" / "tier1" / "group_vars" / "all" / "zz-site.yml"
    vars_file.write_text("gpucluster_site_marker: here\n")
    run = _inventory("tier1", tmp_path, "--host", "dgx01")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["gpucluster_site_marker"] == "here"


def test_an_unknown_tier_stops_naming_the_source_and_the_known_tiers(tmp_path: Path) -> None:
    run = _inventory("tier9", tmp_path, "--graph")
    assert run.returncode != 0
    out = " ".join((run.stdout + run.stderr).split())
    assert f"inventory source '{tmp_path / 'tier9'}' is neither a file, a folder nor a reference tier" in out
    assert "known tiers: tier1, tier2, tier3, tier4, tier4-k8s" in out


def test_only_missing_paths_that_look_like_a_tier_are_taken(tmp_path: Path) -> None:
    plugin = InventoryModule()
    assert plugin.verify_file(str(tmp_path / "tier3"))
    assert plugin.verify_file(str(tmp_path / "tier4-k8s/"))
    assert not plugin.verify_file(str(ROOT / "inventories" / "tier3"))  # an existing folder: Ansible's own
    assert not plugin.verify_file(str(tmp_path / "hosts"))  # another missing path: left to Ansible
    assert not plugin.verify_file("compute01,compute02")


def test_a_tier_by_name_with_a_vars_file_nested_past_libyaml_names_the_file(tmp_path: Path) -> None:
    """-i tierN: the plugin loads the var files itself, each checked first (trust.yaml_limits)."""
    shutil.copytree(ROOT / "inventories" / "tier1", tmp_path / "inventories" / "tier1")
    deep = tmp_path / "inventories" / "tier1" / "group_vars" / "all" / "deep.yml"
    deep.write_text("x: " + "[" * 5000 + "]" * 5000 + "\n")
    run = _inventory("tier1", tmp_path, "--list")
    assert run.returncode != 0
    assert _squeezed(f"{deep}:1: the YAML nests more than 256 levels deep") in _squeezed(run.stdout + run.stderr)


def test_vars_plugin_checks_group_vars_of_a_path_before_host_group_vars(tmp_path: Path) -> None:
    """-i <folder>: gpucluster.tiers.yaml_limits (ansible.cfg, before host_group_vars) names the file."""
    inv = tmp_path / "tier1"
    shutil.copytree(ROOT / "inventories" / "tier1", inv)
    deep = inv / "host_vars" / "compute01" / "deep.yml"
    deep.parent.mkdir(parents=True)
    deep.write_text("x:\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(1, 2000)))
    run = _inventory(str(inv), ROOT, "--list")
    assert run.returncode != 0
    assert _squeezed(f"{deep}:257: the YAML nests more than 256 levels deep") in _squeezed(run.stdout + run.stderr)
