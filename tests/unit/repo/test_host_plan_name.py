"""Issue 31: two names for the plan.

``gpucluster_plan`` is the whole plan, on localhost only (playbooks/tasks/plan.yml registers it);
``gpucluster_host_plan`` is one host's slice of it, the play variable of every host play and the one plan
variable the host roles read. Neither is site data: the cluster_plan action's site, the inventory check
and the cluster_plan filter leave both out.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import site_variables
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import RUN_PREFIXES

VIEW = "{{ hostvars | gpucluster.tiers.host_plan(inventory_hostname) }}"
#: roles that run on the controller and read the whole plan
CONTROLLER_ROLES = frozenset({"k8s_workload"})
#: the whole plan's name as a word, where a host play or a host role would read it
WHOLE = re.compile(r"\bgpucluster_plan\b")
#: readings of the whole plan a host play may have: another host's fact (hostvars[...]), the source of
#: the host_plan filter (molecule's verify registers the plan on the play's hosts) and localhost's branch
#: of a variable shared with the controller's plays (validate.yml's _validate_plan)
ALLOWED = re.compile(
    r"hostvars\[[^\]]*\]\.gpucluster_plan\b|\bgpucluster_plan \| gpucluster\.tiers\.host_plan\("
    r"|\bgpucluster_plan if inventory_hostname == 'localhost' else gpucluster_host_plan\b"
)
PLAYBOOKS = sorted(
    [
        *(ROOT / "playbooks").glob("*.yml"),
        *(ROOT / "tests" / "playbooks").glob("*.yml"),
        *(ROOT / "molecule").glob("*/verify.yml"),
        *(ROOT / "lab").glob("*.yml"),
    ]
)


def _plays(path: Path) -> list[dict[str, Any]]:
    return [p for p in yaml.safe_load(path.read_text()) or [] if isinstance(p, dict) and "hosts" in p]


def _strings(node: Any) -> str:
    """Every key and string value of a parsed play, one a line (anchors and merge keys resolved)."""
    if isinstance(node, dict):
        return "\n".join(f"{k}\n{_strings(v)}" for k, v in node.items())
    if isinstance(node, list):
        return "\n".join(_strings(v) for v in node)
    return str(node)


#: plays on the controller: localhost, or localhost (localhost:all under a --limit) with run_once tasks delegated
#: to the controller and the head (site.yml's plan and lock plays, which a --limit without localhost must not skip)
CONTROLLER_HOSTS = ("localhost", "{{ 'localhost:all' if ansible_limit | default('') else 'localhost' }}")


@pytest.mark.parametrize("path", PLAYBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_host_play_reads_the_slice_only(path: Path) -> None:
    """No play sets gpucluster_plan (it is registered on localhost); a play on hosts reads the plan only as
    gpucluster_host_plan, set to its host's view (or another host's fact through hostvars)."""
    for play in _plays(path):
        vars_ = play.get("vars") or {}
        assert "gpucluster_plan" not in vars_, play["name"]
        if play["hosts"] in CONTROLLER_HOSTS:
            continue
        text = ALLOWED.sub("", _strings(play))
        assert not WHOLE.search(text), (play["name"], WHOLE.findall(text))
        if "gpucluster_host_plan" in text:
            assert vars_.get("gpucluster_host_plan") in (
                VIEW,
                "{{ gpucluster_plan | gpucluster.tiers.host_plan(inventory_hostname) }}",
            ), play["name"]


@pytest.mark.parametrize("name", ["site.yml", "plan.yml", "audit.yml", "validate.yml"])
def test_the_playbooks_set_the_slice_on_every_host_play(name: str) -> None:
    host_plays = [p for p in _plays(ROOT / "playbooks" / name) if p["hosts"] not in CONTROLLER_HOSTS]
    assert host_plays
    for play in host_plays:
        assert (play.get("vars") or {}).get("gpucluster_host_plan") == VIEW, play["name"]


def _role_dirs() -> list[Path]:
    return sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir())


@pytest.mark.parametrize("role", _role_dirs(), ids=lambda p: p.name)
def test_a_role_reads_one_of_the_two_names(role: Path) -> None:
    """A host role reads gpucluster_host_plan only (tasks, templates, vars, specs, README); a controller
    role (k8s_workload) the whole plan, gpucluster_plan."""
    controller = role.name in CONTROLLER_ROLES
    for f in sorted(p for p in role.rglob("*") if p.is_file()):
        text = f.read_text(errors="replace")
        if controller:
            assert "gpucluster_host_plan" not in text, f
        else:
            assert not WHOLE.search(text), (f, [text[: m.start()].count("\n") + 1 for m in WHOLE.finditer(text)])
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    options = specs["main"]["options"]
    name = "gpucluster_plan" if controller else "gpucluster_host_plan"
    assert options[name]["required"] is True and options[name]["type"] == "dict"
    for entry in specs.values():  # every entry point that takes the plan takes it under the role's name
        assert not ({"gpucluster_plan", "gpucluster_host_plan"} - {name}) & set(entry.get("options") or {})


def _varnames_patterns() -> list[str]:
    text = (ROOT / "plugins" / "modules" / "cluster_plan.py").read_text()
    return re.findall(r"query\('ansible\.builtin\.varnames', '([^']+)'\)", text)


def test_the_plan_stage_reads_the_site_in_the_action() -> None:
    """playbooks/tasks/plan.yml passes no site: the action reads the gpucluster_* variables itself, after the
    inventory check (reading.site_variables); the module docs' example with a site scans the same names."""
    stage = yaml.safe_load((ROOT / "playbooks" / "tasks" / "plan.yml").read_text())
    (task,) = [t for t in stage if "gpucluster.tiers.cluster_plan" in t]
    assert "site" not in task["gpucluster.tiers.cluster_plan"] and "varnames" not in str(task)
    assert len(_varnames_patterns()) == 1, _varnames_patterns()


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", max_size=24))
def test_the_plan_stage_leaves_out_exactly_the_run_variables(suffix: str) -> None:
    """The action's site (reading.site_variables) and the module docs' varnames pattern (ansible.builtin.varnames:
    re.search) read a gpucluster_ name as site data exactly when site.RUN_PREFIXES (the inventory check) does."""
    pattern = re.compile(_varnames_patterns()[0])
    for name in (f"gpucluster_{suffix}", f"gpucluster_host_plan{suffix}", f"gpucluster_plan{suffix}"):
        site_data = not name.startswith(RUN_PREFIXES)
        assert bool(pattern.search(name)) == site_data, name
        assert (name in site_variables({name: 1})) == site_data, name
    assert not pattern.search("gpucluster_host_plan") and not pattern.search("gpucluster_plan")
    assert pattern.search("gpucluster_cluster") and pattern.search("gpucluster_hosts_extra")


def test_an_inventory_value_of_either_name_is_no_site_data(tmp_path: Path) -> None:
    """Both names set in the inventory (group all, one host's host_vars) neither stop the plan (unknown
    site variable, value on one host) nor reach a host: the play variable is the host's own view."""
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "tier2", inv)
    stale = "gpucluster_plan: {stale: true}\ngpucluster_host_plan: {stale: true}\n"
    (inv / "group_vars" / "all" / "stale.yml").write_text(stale)
    (inv / "host_vars").mkdir(exist_ok=True)
    (inv / "host_vars" / "compute01.yml").write_text("gpucluster_host_plan: {hosts: {}}\n")
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), "tests/playbooks/plan_only.yml"],
        cwd=ROOT,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert "plan tier2 sha256" in run.stdout
    assert "VIEW compute01 hosts=compute01 files=compute01" in run.stdout
    assert "VIEW head01 hosts=head01 files=head01" in run.stdout
