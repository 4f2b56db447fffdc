"""The files manifest: which entry of the roles' file lists goes on which host.

The lists themselves (roles/<role>/vars/files.yml against the roles' templates and tasks) are
checked in tests/unit/repo/test_role_files.py.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
import yaml
from conftest import ROLE_FILES, ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import assembly, files
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import (
    FIELDS,
    HOSTS,
    conditions,
    files_by_host,
    files_manifest,
    host_files,
    role_file_entries,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections

sys.path.insert(0, str(ROOT / "tools" / "bench"))
from bench_plan import generated_site


def _entry(**fields: Any) -> dict[str, Any]:
    return {"src": "x.j2", "dest": "/etc/x", "hosts": "all", "mode": "0644", **fields}


def _by_host(plan: dict[str, Any], lists: dict[str, Any]) -> dict[str, Any]:
    """Each host's list from the plan's rules made of ``lists`` (as the host views derive it)."""
    return files_by_host({**plan, "files": files_manifest(plan, lists)})


@pytest.fixture(scope="module")
def tier3() -> dict[str, Any]:
    return cluster_plan(*load_inventory("tier3"))


def test_the_roles_lists_are_valid(tier3: dict[str, Any]) -> None:
    entries = role_file_entries(ROLE_FILES, conditions(tier3))
    # every role with files (k8s_workload runs on the controller: its list is empty)
    assert {f.role for f in entries} == {role for role, files in ROLE_FILES.items() if files}
    assert {f.hosts for f in entries} <= set(HOSTS)


def test_hosts_and_conditions_select_the_hosts(tier3: dict[str, Any]) -> None:
    lists = {
        "x": [
            _entry(src="a.j2", hosts="lustre_server", **{"if": "lustre"}),
            _entry(src="b.j2", hosts="slurm", **{"if": "nfs_kernel"}),
            _entry(src="c.j2", hosts="slurm"),
            _entry(src="d.j2", hosts="lustre_mds"),
            _entry(src="e.j2", hosts="all", plan=False),
        ]
    }
    got = {h: [f["src"] for f in files] for h, files in _by_host(tier3, lists).items()}
    assert got["mds01"] == ["a.j2", "d.j2"] and got["oss01"] == ["a.j2"]
    assert got["head01"] == ["c.j2"] and got["compute01"] == ["c.j2"]
    assert conditions(tier3)["lustre"] and not conditions(tier3)["nfs_kernel"]


def test_a_per_unit_file_comes_once_per_interface_unit_after_the_others(tier3: dict[str, Any]) -> None:
    lists = {"x": [_entry(src="n.j2", dest="/etc/units", each="network_unit", task="own"), _entry()]}
    files = _by_host(tier3, lists)["compute01"]
    units = tier3["hosts"]["compute01"]["network_units"]
    assert files[0] == {"role": "x", "src": "x.j2", "dest": "/etc/x", "mode": "0644"}
    assert files[1:] == [
        {"role": "x", "src": "n.j2", "dest": f"/etc/units/{u['name']}", "mode": "0644", "task": "own", "unit": u}
        for u in units
    ]


def test_an_entry_carries_how_the_host_files_writer_installs_it(tier3: dict[str, Any]) -> None:
    """mode always; notify, validate, mkdir and task only when the role's list sets them."""
    lists = {
        "x": [
            _entry(src="a.j2", mode="0600", notify=["Restart a"], validate="a-check %s", mkdir=True),
            _entry(src="b.j2", task="own", mkdir=False, notify=[]),
        ]
    }
    a, b = _by_host(tier3, lists)["head01"]
    assert a == {
        "role": "x",
        "src": "a.j2",
        "dest": "/etc/x",
        "mode": "0600",
        "notify": ["Restart a"],
        "validate": "a-check %s",
        "mkdir": True,
    }
    assert b == {"role": "x", "src": "b.j2", "dest": "/etc/x", "mode": "0644", "task": "own"}


def test_no_field_shadows_a_dict_method() -> None:
    """Jinja's selectattr('copy', 'defined') finds dict.copy on every entry: no field may be named so."""
    assert not FIELDS & set(dir(dict))


def test_unsafe_writes_and_static_reach_the_manifest_only_when_set(tier3: dict[str, Any]) -> None:
    lists = {"x": [_entry(src="hosts.j2", unsafe_writes=True), _entry(src="prog", mode="0755", static=True), _entry()]}
    hosts, prog, plain = _by_host(tier3, lists)["head01"]
    assert hosts == {"role": "x", "src": "hosts.j2", "dest": "/etc/x", "mode": "0644", "unsafe_writes": True}
    assert prog == {"role": "x", "src": "prog", "dest": "/etc/x", "mode": "0755", "static": True}
    assert "unsafe_writes" not in plain and "static" not in plain


def test_the_real_lists_reach_the_manifest_with_their_handlers(tier3: dict[str, Any]) -> None:
    head = {f["dest"]: f for f in files_by_host(tier3)["head01"]}
    assert head["/etc/chrony/chrony.conf"]["notify"] == ["Restart chrony"]
    assert head["/etc/gpucluster/nftables.nft"]["validate"] == "nft --check --file %s"
    assert head["/etc/slurm/slurm.conf"]["task"] == "own"


def test_hosts_get_the_roles_files_in_role_order(tier3: dict[str, Any]) -> None:
    roles = [f["role"] for f in files_by_host(tier3)["head01"] if f["src"] != "network.j2"]
    assert roles == sorted(roles) and {"common", "fabric", "head", "slurm"} <= set(roles)
    assert files_by_host(tier3)["head01"][-1]["src"] == "network.j2"


def test_the_plan_holds_the_rules_the_same_at_any_size() -> None:
    """plan.files is the rules (who gets which file, once or per unit), not each host's list: the same
    section for a cluster of 64 or 256 compute nodes; a host's list (host_files) is derived from them."""
    small, large = (cluster_plan(*generated_site(n)) for n in (64, 256))
    assert small["files"] == large["files"] and small["files"]
    assert all(set(rule) <= {"hosts", "each", "file"} and rule["hosts"] in HOSTS for rule in large["files"])
    # the files installed once are the rules' own entries (shared by the hosts), the per-unit ones are new
    node = [h for h, v in large["hosts"].items() if "compute" in v["roles"]][-1]
    own = host_files(large, node)
    once = [rule["file"] for rule in large["files"] if "each" not in rule]
    assert [f for f in own if "unit" not in f] == [f for f in once if any(f is g for g in own)]
    assert {f["dest"] for f in own if "unit" in f} >= {
        f"/etc/gpucluster/network/{u['name']}" for u in large["hosts"][node]["network_units"]
    }


def test_without_role_lists_every_host_has_none() -> None:
    plan = assembly.cluster_plan(*load_inventory("tier1"))
    assert plan["files"] == []
    assert files_by_host(plan) == {h: [] for h in plan["hosts"]}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"hosts": "gpus"}, "hosts"),
        ({"if": "sometimes"}, "if"),
        ({"owner": "slurm"}, "owner"),
        ({"mode": 644}, "mode"),
        ({"mode": "644"}, "mode"),
        ({"dest": "etc/x"}, "dest"),
        ({"notify": "Restart chrony"}, "notify"),
        ({"task": "mine"}, "task"),
        ({"mkdir": "yes"}, "mkdir"),
        ({"each": "disk"}, "each"),
        ({"each": "network_unit"}, "task"),
        ({"validate": "nft --check --file"}, "validate"),
        ({"validate": ["nft", "%s"]}, "validate"),
        ({"unsafe_writes": "yes"}, "unsafe_writes"),
        ({"static": 1}, "static"),
        ({"static": True, "each": "nfs_mount"}, "static"),
    ],
)
def test_a_bad_entry_names_its_file_index_and_field(tier3: dict[str, Any], fields: dict[str, Any], field: str) -> None:
    where = re.escape(f"roles/common/vars/files.yml common_files[1].{field}")
    with pytest.raises(PlanError, match=where):
        files_manifest(tier3, {"common": [_entry(src="ok.j2"), _entry(**fields)]})


def test_a_template_listed_twice_or_a_list_that_is_not_one_is_an_error(tier3: dict[str, Any]) -> None:
    with pytest.raises(PlanError, match="each template"):
        files_manifest(tier3, {"common": [_entry(), _entry()]})
    with pytest.raises(PlanError, match=re.escape("roles/common/vars/files.yml common_files")):
        files_manifest(tier3, {"common": None})


# ---------------------------------------------------------------- the Kubernetes path's file sets


def test_kubernetes_compute_nodes_keep_node_tuning_and_get_no_slurm_files() -> None:
    plan = cluster_plan(*load_inventory("tier4-k8s"))
    assert plan["cluster"]["scheduler"] == "kubernetes"
    dests = {f["dest"] for f in files_by_host(plan)["compute01"]}
    assert {
        "/etc/systemd/system/gpucluster-gpu-clocks.service",
        "/etc/gpucluster/healthcheck.json",
        "/etc/systemd/system/gpucluster-healthcheck.service",
        "/etc/systemd/system/gpucluster-healthcheck.timer",
        "/etc/systemd/system/nvidia-fabricmanager.service.d/gpucluster.conf",
        "/etc/default/grub.d/gpucluster.cfg",  # iommu=pt for GPUDirect RDMA by DMA-BUF (no module to load)
    } <= dests
    for host, own in files_by_host(plan).items():
        slurm = [f["dest"] for f in own if f["role"] == "slurm" or "/slurm/" in f["dest"]]
        assert slurm == [], host
        assert not {"/usr/local/sbin/gpucluster-prolog", "/usr/local/sbin/gpucluster-epilog"} & {
            f["dest"] for f in own
        }, host
    rows = [r for s in report_sections(plan) for r in s["rows"] if r[0] == "scheduler"]
    assert [r[:2] for r in rows] == [["scheduler", "Kubernetes (Kueue, KubeRay)"]]
    assert "gpucluster_cluster.scheduler: kubernetes" in rows[0][2]


def test_slurm_plans_keep_their_files_and_no_health_timer() -> None:
    plan = cluster_plan(*load_inventory("tier3"))
    dests = {f["dest"] for f in files_by_host(plan)["compute01"]}
    assert "/etc/slurm/slurm.conf" in dests and "/usr/local/sbin/gpucluster-epilog" in dests
    assert "/etc/systemd/system/gpucluster-healthcheck.timer" not in dests
    assert files.SCHEDULER_ROLES == {"slurm": "slurm"}


def test_site_yml_runs_the_compute_role_on_both_scheduler_paths() -> None:
    plays = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
    batch = next(p for p in plays if p["name"] == "Compute nodes, in rolling batches")
    tasks = batch["tasks"][0]["block"]
    compute = next(
        t for t in tasks if t.get("ansible.builtin.import_role", {}).get("name") == "gpucluster.tiers.compute"
    )
    assert "when" not in compute
    slurm = next(t for t in tasks if t.get("ansible.builtin.import_role", {}).get("name") == "gpucluster.tiers.slurm")
    assert any("scheduler" in w for w in slurm["when"])
