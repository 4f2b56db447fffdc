"""Issue 40, end to end: the bad inventories only the real Ansible path can show (templates Ansible would
evaluate, YAML aliases and nesting, host names YAML reads or Ansible caches) stop make plan
(``ansible-playbook playbooks/plan.yml -i <inventory>``) in its first check, naming the field and the file,
with nothing run on the controller, in seconds and under 1 GiB of memory."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

BIN = Path(sys.executable).parent
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
#: the memory one bad inventory may take (address space of ansible-playbook and its workers)
MEMORY = 1 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY, MEMORY))


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / tool), *args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )


def _copy(tmp_path: Path, tier: str = "tier1") -> Path:
    inv = tmp_path / tier
    shutil.copytree(ROOT / "inventories" / tier, inv)
    return inv


def _plan(inv: Path, tmp_path: Path) -> str:
    run = _run("ansible-playbook", "-i", str(inv), "playbooks/plan.yml", "-e", f"gpucluster_plan_root={tmp_path}/out")
    assert run.returncode != 0, run.stdout[-2000:]
    assert not (tmp_path / "out").exists(), "nothing is written for a bad inventory"
    return run.stdout + run.stderr


def test_a_template_in_a_site_value_is_refused_unevaluated(tmp_path: Path) -> None:
    marker = tmp_path / "lookup-ran"
    inv = _copy(tmp_path)
    cluster = inv / "group_vars" / "all" / "cluster.yml"
    template = f"{{{{ lookup('ansible.builtin.pipe', 'touch {marker}') }}}}cluster.internal"
    cluster.write_text(cluster.read_text().replace("domain: cluster.internal", f'domain: "{template}"'))
    out = _plan(inv, tmp_path)
    assert "inventory field 'gpucluster_cluster.domain'" in out
    assert "plain text without a Jinja template" in out
    assert f"(set in {cluster}:" in out
    assert not marker.exists(), "the lookup ran on the controller"
    # the same inventory read by a task that templates the value does run it: the guard is what stops it
    run = _run("ansible", "localhost", "-i", str(inv), "-m", "ansible.builtin.debug", "-a", "var=gpucluster_cluster")
    assert run.returncode == 0, run.stdout[-2000:]
    assert marker.exists()


def test_an_alias_bomb_in_a_teams_users_stops_in_seconds(tmp_path: Path) -> None:
    inv = _copy(tmp_path, "tier3")
    tenants = inv / "group_vars" / "all" / "tenants.yml"
    names = ", ".join(f"user{i}" for i in range(9))
    bomb = f"x_users:\n  - &a0 [{names}]\n" + "".join(
        f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)
    )  # 9**10 names if expanded
    text = tenants.read_text().replace("---\n", "", 1).replace("users: [alice, bob]", "users: *a9")
    tenants.write_text(bomb + text)
    out = _plan(inv, tmp_path)
    assert "inventory field 'gpucluster_tenants[0].users" in out
    assert "at most 200000 values in one variable" in out
    assert f"(set in {tenants}:" in out


def test_a_64_kb_host_name_stops_with_a_short_message(tmp_path: Path) -> None:
    inv = _copy(tmp_path)
    hosts = inv / "hosts.yml"
    long = "a" * 65536
    group = "    compute:\n      hosts:\n"
    hosts.write_text(hosts.read_text().replace(group, f"{group}        ? {long}\n"))  # an explicit key: any length
    out = _plan(inv, tmp_path)
    assert "inventory field 'inventory host name'" in out
    assert "(65536 characters)" in out
    assert len(out) < 5000, "the name is shown cut"


def test_nesting_deeper_than_the_limit_names_the_field_and_file(tmp_path: Path) -> None:
    inv = _copy(tmp_path)
    deep = inv / "group_vars" / "all" / "deep.yml"
    deep.write_text("gpucluster_workload_extra: " + "[" * 200 + "]" * 200 + "\n")
    out = _plan(inv, tmp_path)
    assert "inventory field 'gpucluster_workload_extra[0][0]" in out
    assert "at most 32 levels" in out
    assert f"(set in {deep}:1)" in out


@pytest.mark.parametrize("style", ["flow", "block"])
def test_nesting_past_libyaml_names_the_file_and_line_before_ansible_loads_it(tmp_path: Path, style: str) -> None:
    inv = _copy(tmp_path)
    deep = inv / "group_vars" / "all" / "deep.yml"
    if style == "flow":  # libyaml's own limit (1,000 flow levels) gives a message without file or line
        deep.write_text("x: 1\ngpucluster_workload_extra: " + "[" * 5000 + "]" * 5000 + "\n")
    else:
        deep.write_text("gpucluster_workload_extra:\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(1, 5000)))
    out = _plan(inv, tmp_path)
    line = 2 if style == "flow" else 257
    assert f"{deep}:{line}: the YAML nests more than 256 levels deep" in out
    assert "maximum nesting depth" not in out, "libyaml never reads it"


def test_a_hosts_file_nested_past_the_limit_is_named(tmp_path: Path) -> None:
    inv = _copy(tmp_path)
    hosts = inv / "hosts.yml"
    hosts.write_text(hosts.read_text() + "    deep:\n      vars:\n        x: " + "[" * 3000 + "]" * 3000 + "\n")
    out = _plan(inv, tmp_path)
    assert f"{hosts}:" in out and "nests more than 256 levels deep" in out


def test_too_many_aliases_in_a_vars_file_are_named(tmp_path: Path) -> None:
    inv = _copy(tmp_path)
    many = inv / "host_vars" / "compute01.yml"
    many.parent.mkdir(exist_ok=True)
    many.write_text("x_base: &b 1\nx_refs: [" + ", ".join(["*b"] * 10001) + "]\n")
    out = _plan(inv, tmp_path)
    assert f"{many}:2: the YAML uses more than 10000 aliases" in out


def test_lab_settings_in_a_production_inventory_are_refused(tmp_path: Path) -> None:
    inv = _copy(tmp_path)
    lab = inv / "group_vars" / "all" / "lab.yml"
    lab.write_text("gpucluster_lab:\n  enabled: true\n  memlock_kb: 8192\n")
    out = _plan(inv, tmp_path)
    assert "inventory field 'gpucluster_lab'" in out
    assert f"set in {lab}" in out
    assert "only from the lab's own overlay" in out


@pytest.mark.parametrize(("name", "reading"), [("yes", "true"), ("010", "the number 8")])
def test_a_host_name_yaml_reads_as_no_name_is_named_with_the_fix(tmp_path: Path, name: str, reading: str) -> None:
    inv = _copy(tmp_path, "tier3")
    hosts = inv / "hosts.yml"
    hosts.write_text(hosts.read_text().replace("compute04:", f"{name}:"))
    out = _plan(inv, tmp_path)
    assert f"host name {name} is read by YAML as {reading}" in out
    assert f'quote it ("{name}":)' in out


def test_a_shared_ansible_host_names_the_file_it_was_set_in(tmp_path: Path) -> None:
    inv = _copy(tmp_path, "tier3")
    (inv / "host_vars").mkdir()
    for host in ("compute01", "compute02"):
        (inv / "host_vars" / f"{host}.yml").write_text("ansible_host: 10.0.0.5\n")
    out = _plan(inv, tmp_path)
    assert "inventory field 'hostvars.compute02.ansible_host'" in out
    assert f"(set in {inv / 'host_vars' / 'compute02.yml'}:1)" in out


def test_a_site_variable_under_a_group_in_the_hosts_file_is_refused(tmp_path: Path) -> None:
    inv = _copy(tmp_path)
    hosts = inv / "hosts.yml"
    group = "    compute:\n      hosts:\n        dgx01:\n"
    hosts.write_text(hosts.read_text().replace(group, group + "      vars:\n        gpucluster_tenants: []\n"))
    out = _plan(inv, tmp_path)
    assert "inventory field 'gpucluster_tenants'" in out
    assert "a value set on group all only" in out


def test_a_registry_credential_no_declared_secret_provides_stops_the_plan(tmp_path: Path) -> None:
    inv = _copy(tmp_path, "tier3")
    (inv / "group_vars" / "all" / "secrets.yml").write_text("gpucluster_secrets: [ngc_old]\n")
    out = _plan(inv, tmp_path)
    assert "inventory field 'gpucluster_containers.registries[0].credential': value 'ngc'" in out
    assert "one of the secrets the site declares (gpucluster_secrets: ngc_old)" in out
