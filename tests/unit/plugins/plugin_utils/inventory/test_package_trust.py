"""Issue 37, the supply side: package sources signed by pinned keys, no secret in the site variables, and
BeeGFS's conn_auth_file a file of its own.

- every apt repository the roles add (values.PACKAGE_SOURCES) needs its signing key and the key's pinned
  fingerprint, and https URIs (http only for a declared site mirror); a missing one is a plan error naming
  the role variable, raised by the inventory check (site.check_host_variables) before any host is touched;
- a value shaped like a token anywhere in the site variables, and a credential NAME that looks like a key
  or token, are refused naming the field, never echoing the value;
- gpucluster_storage.beegfs.conn_auth_file is a file under /etc/beegfs/, not a configuration file.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import site as site_module
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import values
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import beegfs

CUDA = {
    "compute_gpu_repo": ["https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"],
    "compute_gpu_repo_key": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub",
    "compute_gpu_repo_key_fingerprint": "EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC",
}


def _refused(variables: dict[str, Any]) -> PlanError:
    with pytest.raises(PlanError) as err:
        values.check_package_sources(variables)
    return err.value


def test_a_signed_https_source_passes_and_an_unset_one_needs_nothing() -> None:
    values.check_package_sources(CUDA)
    values.check_package_sources({"compute_gpu_repo": [], "head_grafana_repo": []})
    armored = {**CUDA, "compute_gpu_repo_key": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINB...\n"}
    values.check_package_sources(armored)
    values.check_package_sources({**CUDA, "compute_gpu_repo_key": "/usr/share/keyrings/cuda-archive-keyring.gpg"})
    two = {**CUDA, "compute_gpu_repo_key_fingerprint": ["eb693b3035cd5710e231e123a4b469963bf863cc", "A" * 64]}
    values.check_package_sources(two)


@pytest.mark.parametrize("name", values.PACKAGE_SOURCES)
def test_a_source_without_key_is_refused_naming_the_key_variable(name: str) -> None:
    err = _refused({name: ["https://mirror.example/repo/"]})
    assert err.field == f"{name}_key"
    assert "signing key" in err.allowed and "https:// URL" in err.allowed


@pytest.mark.parametrize("pinned", [None, "", "3BF863CC", "A4B469963BF863CC", "EB69-3B30", ["EB69" * 10, "xyz"], 42])
def test_a_source_without_a_full_fingerprint_is_refused(pinned: Any) -> None:
    variables = {**CUDA, "compute_gpu_repo_key_fingerprint": pinned}
    if pinned is None:
        del variables["compute_gpu_repo_key_fingerprint"]
    err = _refused(variables)
    assert err.field == "compute_gpu_repo_key_fingerprint"
    assert "40 hex digits" in err.allowed


def test_http_uris_are_refused_unless_the_site_declares_its_mirror() -> None:
    mirror = {**CUDA, "compute_gpu_repo": ["https://a.example/", "http://mirror.site.internal/cuda/"]}
    err = _refused(mirror)
    assert err.field == "compute_gpu_repo[1]" and err.value == "http://mirror.site.internal/cuda/"
    assert "compute_gpu_repo_http_mirror: true" in err.allowed
    values.check_package_sources({**mirror, "compute_gpu_repo_http_mirror": True})
    assert _refused({**CUDA, "compute_gpu_repo": ["ftp://x.example/"]}).field == "compute_gpu_repo[0]"
    assert _refused({**mirror, "compute_gpu_repo_http_mirror": "yes"}).field == "compute_gpu_repo_http_mirror"


def test_a_key_fetched_over_http_is_refused_even_for_a_mirror() -> None:
    plain = {**CUDA, "compute_gpu_repo_key": "http://developer.download.nvidia.com/x/3bf863cc.pub"}
    for variables in (plain, {**plain, "compute_gpu_repo_http_mirror": True}):
        err = _refused(variables)
        assert err.field == "compute_gpu_repo_key" and "could be anyone's" in err.allowed
    assert _refused({**CUDA, "compute_gpu_repo_key": "3bf863cc.pub"}).field == "compute_gpu_repo_key"


def test_the_inventory_check_refuses_an_unpinned_source_on_the_host_that_has_it() -> None:
    """Through site.check_host_variables (the plan play's inventory_scope filter): group all, or the one
    host whose group sets the source (group_vars/compute/...), named in the error."""
    base = {"gpucluster_cluster": {"name": "x"}}
    hosts = {"localhost": dict(base), "head01": dict(base), "compute01": {**base, **CUDA}}
    site_module.check_host_variables(hosts)
    hosts["compute01"] = {**base, "compute_gpu_repo": CUDA["compute_gpu_repo"]}
    with pytest.raises(PlanError) as err:
        site_module.check_host_variables(hosts)
    assert err.value.field == "compute_gpu_repo_key" and "(set on host compute01)" in err.value.allowed
    unpinned = {
        **base,
        "head_grafana_repo": ["https://apt.grafana.com"],
        "head_grafana_repo_key": "https://apt.grafana.com/gpg.key",
    }
    with pytest.raises(PlanError) as err:
        site_module.check_host_variables({"localhost": unpinned, "head01": unpinned})
    assert err.value.field == "head_grafana_repo_key_fingerprint" and "(set on group all)" in err.value.allowed


def test_the_example_sources_are_pinned_and_the_plan_play_stops_on_an_unpinned_one(tmp_path: Path) -> None:
    """inventories/examples/tier4-b200 declares NVIDIA's and Grafana's repositories on the compute and head
    groups; without the compute group's fingerprint the plan play stops at the inventory check, before the
    plan is computed and before any host is contacted, naming the variable and the host."""
    example = ROOT / "inventories" / "examples" / "tier4-b200"
    for group in ("compute", "head"):
        variables = yaml.safe_load((example / "group_vars" / group / "packages.yml").read_text())
        assert set(variables) & set(values.PACKAGE_SOURCES), group
        values.check_package_sources(variables, group)
    inv = tmp_path / "inv"
    shutil.copytree(example, inv)
    packages = inv / "group_vars" / "compute" / "packages.yml"
    packages.write_text("\n".join(x for x in packages.read_text().splitlines() if "gpu_repo_key_fingerprint" not in x))
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), "playbooks/plan.yml",
         "-e", f"gpucluster_plan_root={tmp_path / 'plan'}"],
        cwd=ROOT, env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode != 0
    assert "inventory field 'compute_gpu_repo_key_fingerprint'" in run.stdout, run.stdout[-3000:]
    assert "(set on host compute01)" in run.stdout
    assert not (tmp_path / "plan").exists()  # nothing written


def test_the_filter_reads_the_package_source_variables() -> None:
    picked = site_module.variables_to_check(
        {**CUDA, "compute_gpu_repo_suites": ["/"], "head_grafana_admin_password": "x"}
    )
    assert set(picked) == set(CUDA)  # the sources' variables, never a secret's


# --- secrets in the site variables ------------------------------------------------------------------

TOKENS = {
    "a GitHub token": "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6",
    "a GitLab token": "glpat-" + "Ab3De6Gh9Jk2Mn5Pq8St",
    "an AWS access key id": "AKIA" + "IOSFODNN7EXAMPLE",
    "a Slack token": "xoxb-" + "123456789012-abcdefABCDEF",
    "an NGC API key": "nvapi-" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7",
    "a JSON Web Token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.mark.parametrize("what", sorted(TOKENS))
def test_a_token_shaped_credential_name_is_refused_without_its_value(
    what: str, tier3: tuple[dict[str, Any], dict[str, list[str]]]
) -> None:
    site, groups = tier3
    site["gpucluster_containers"]["registries"][0]["credential"] = TOKENS[what]
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    assert err.value.field == "gpucluster_containers.registries[0].credential"
    assert f"looks like a secret ({what})" in str(err.value)
    assert TOKENS[what] not in str(err.value) and TOKENS[what] not in repr(err.value.value)


@pytest.mark.parametrize(
    "name",
    ["0123456789abcdef0123456789abcdef", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==", "k8sT0k3nX9qLp2Vr7Ws4Yz1Bn6Mc"],
)
def test_a_random_string_as_credential_name_is_refused(
    name: str, tier3: tuple[dict[str, Any], dict[str, list[str]]]
) -> None:
    site, groups = tier3
    site["gpucluster_containers"]["registries"][0]["credential"] = name
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    assert err.value.field == "gpucluster_containers.registries[0].credential" and name not in str(err.value)


@pytest.mark.parametrize("name", ["ngc", "nvcr_pull", "registry_2024_prod_readonly", "team_a_ngc_org_readonly"])
def test_ordinary_credential_names_pass(name: str) -> None:
    assert values.secret_shape(name, name=True) is None


def test_a_token_anywhere_in_the_site_variables_is_refused_before_the_schema_echoes_it(
    tier3: tuple[dict[str, Any], dict[str, list[str]]],
) -> None:
    site, groups = tier3
    token = TOKENS["a GitHub token"]
    site["gpucluster_cluster"]["domain"] = token  # a schema error would print the value
    with pytest.raises(PlanError) as err:
        cluster_plan(copy.deepcopy(site), groups)
    assert err.value.field == "gpucluster_cluster.domain" and token not in str(err.value)
    # a hash or a fingerprint is no secret where a value (not a name) is expected
    assert values.secret_shape("EB693B3035CD5710E231E123A4B469963BF863CC") is None


def test_the_inventory_check_does_not_echo_a_token_set_on_one_host() -> None:
    """A gpucluster_* value set on one host is refused by the inventory check (before the plan's own secret
    check runs): its error shows the value, unless the value holds something shaped like a token."""
    token = TOKENS["an NGC API key"]
    base = {"gpucluster_cluster": {"name": "x"}}
    own = {"gpucluster_containers": {"registries": [{"host": "nvcr.io", "credential": token}]}}
    with pytest.raises(PlanError) as err:
        site_module.check_host_variables({"localhost": base, "compute01": {**base, **own}})
    assert err.value.field == "gpucluster_containers" and token not in str(err.value)
    assert "looks like a secret" in str(err.value)


def test_every_reference_inventory_passes_the_secret_check() -> None:
    for tier in ("tier1", "tier2", "tier3", "tier4", "tier4-k8s", "examples/tier4-b200"):
        values.check_secrets(load_inventory(tier)[0])


# --- BeeGFS conn_auth_file ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/etc/beegfs/conn.auth", "/etc/beegfs/connauthfile", "/etc/beegfs/auth/cluster.key"])
def test_a_file_of_its_own_under_etc_beegfs_passes(path: str) -> None:
    assert beegfs.auth_file(path, "f") == path


@pytest.mark.parametrize(
    "path",
    [
        "/etc/shadow", "/root/.ssh/id_ed25519", "/etc/munge/munge.key", "/var/lib/beegfs/conn.auth", "/data/x",
        "/etc/beegfs/../shadow", "/etc/beegfs//conn.auth", "/etc/beegfs/./conn.auth", "/etc/beegfs/",
        "/etc/beegfs", "/etc/beegfs/beegfs-client.conf", "/etc/beegfs/beegfs-mounts.conf",
        "/etc/beegfs/server-interfaces", "/etc/beegfs/other.conf", "/etc/beegfs/conn auth", "etc/beegfs/x", 7,
    ],
)  # fmt: skip
def test_any_other_path_is_refused(path: Any) -> None:
    with pytest.raises(PlanError) as err:
        beegfs.auth_file(path, "gpucluster_storage.beegfs.conn_auth_file")
    assert err.value.field == "gpucluster_storage.beegfs.conn_auth_file" and "/etc/beegfs/" in err.value.allowed


def test_the_beegfs_example_refuses_a_system_file_as_its_secret() -> None:
    site, groups = load_inventory("examples/tier3-beegfs")
    site = copy.deepcopy(site)
    site["gpucluster_storage"]["beegfs"]["conn_auth_file"] = "/etc/shadow"
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    assert err.value.field == "gpucluster_storage.beegfs.conn_auth_file"
