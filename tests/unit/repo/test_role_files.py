"""Each role's file list (roles/<role>/vars/files.yml) against the role itself.

The list is the one place that names the files a role installs: the role's tasks write them
(roles/common/tasks/configure.yml, imported by each role: one gpucluster.tiers.host_files call per
host; entries marked ``task: own`` by a task of their own) and the
plan renders them per host (make plan). Adding a template means adding its entry: these tests
fail when a template is not listed, a listed template is missing, an own-task entry has no
task (or a looped one has a second writer), or a notified handler does not exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROLE_FILES, ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.filter.gpucluster import FilterModule
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import COLLECTION_ROOT, role_files
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import NCCL_TOPO_FILE, files_by_host

ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks" / "main.yml").is_file())
#: roles that run on the controller and write no host file (their list is empty; no templates, no configure.yml)
CONTROLLER_ROLES = {"k8s_workload"}
HOST_ROLES = [r for r in ROLES if r not in CONTROLLER_ROLES]


def _tasks(items: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for task in items or []:
        out.append(task)
        out += _tasks(task.get("block")) + _tasks(task.get("rescue")) + _tasks(task.get("always"))
    return out


def _role_tasks(role: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in sorted((ROOT / "roles" / role / "tasks").glob("*.yml")):
        found += _tasks(yaml.safe_load(path.read_text()))
    return found


def _templates(role: str) -> list[dict[str, Any]]:
    return [t["ansible.builtin.template"] for t in _role_tasks(role) if "ansible.builtin.template" in t]


def test_every_role_has_a_list_and_the_filter_reads_them_all() -> None:
    assert all(ROLE_FILES[r] == [] for r in CONTROLLER_ROLES)
    assert list(ROLE_FILES) == ROLES  # by name: the order of each host's files in the plan
    assert role_files() == role_files(COLLECTION_ROOT) == ROLE_FILES


@pytest.mark.parametrize("role", HOST_ROLES)
def test_every_template_is_listed_once_and_every_listed_template_exists(role: str) -> None:
    listed = [f["src"] for f in ROLE_FILES[role] if not f.get("static")]
    assert len(listed) == len(set(listed)), listed
    assert set(listed) == {p.name for p in (ROOT / "roles" / role / "templates").iterdir()}
    # a copied entry (static: true) is a file of the role's files/ folder, installed as is
    copied = [f["src"] for f in ROLE_FILES[role] if f.get("static")]
    assert all((ROOT / "roles" / role / "files" / src).is_file() for src in copied), copied


def test_the_programs_are_copied_where_the_plan_runs_them() -> None:
    """The static programs of files/ are manifest entries (static: true) at the plan's program paths,
    written with the role's other files: no copy task of their own left (one module call per host)."""
    plan = cluster_plan(*load_inventory("tier3"))
    programs = {
        "gpucluster-healthcheck": plan["health"]["modes"]["periodic"]["program"],
        "gpucluster-ckpt-drain": plan["storage"]["checkpoint_drain"]["program"],
        "gpucluster-oci-run": plan["containers"]["oci"]["wrapper"],
        "gpucluster-slurm-metrics": plan["monitoring"]["slurm_queue"]["program"],
        "gpucluster-web-auth": plan["monitoring"]["auth"]["program"],
        # self-healing (compute/healing.py): the head's loop, and the active check next to the health check
        "gpucluster-heal": plan["healing"]["program"],
        "gpucluster-activecheck": str(Path(plan["healing"]["active"]["program"]).with_name("gpucluster-activecheck")),
        # a MIG site's compute nodes: their gres.conf lines from the driver (compute/mig.py)
        "gpucluster-mig-gres": cluster_plan(*load_inventory("examples/tier2-mig"))["slurm"]["gres_mig"]["program"],
        # tier4's controllers have a backup: the takeover hook
        "gpucluster-slurmctld-primary-on": cluster_plan(*load_inventory("tier4"))["slurm"]["ha"]["primary_on"][
            "program"
        ],
    }
    entries = {f["src"]: f for files in ROLE_FILES.values() for f in files if f.get("static")}
    assert {src: f["dest"] for src, f in entries.items()} == programs
    assert all(f["mode"] == "0755" and "task" not in f for f in entries.values())
    assert {f["src"] for f in files_by_host(plan)["compute01"] if f.get("static")} == {
        "gpucluster-healthcheck",
        "gpucluster-ckpt-drain",
        "gpucluster-oci-run",  # tier3 runs its training containers with Slurm's oci.conf
        "gpucluster-activecheck",
    }
    assert {f["src"] for f in files_by_host(plan)["head01"] if f.get("static")} == {
        "gpucluster-slurm-metrics",
        "gpucluster-web-auth",
        "gpucluster-heal",
    }
    for role in HOST_ROLES:
        copies = [t for t in _role_tasks(role) if "ansible.builtin.copy" in t]
        assert not [t for t in copies if t["ansible.builtin.copy"].get("src") in programs], role


def test_etc_hosts_is_written_in_place_where_a_rename_is_refused() -> None:
    """/etc/hosts goes with common's other files (one call), unsafe_writes: a container runtime
    bind-mounts it, so the writer falls back to writing it in place (ansible's unsafe_writes)."""
    (entry,) = [f for f in ROLE_FILES["common"] if f["dest"] == "/etc/hosts"]
    assert entry.get("unsafe_writes") is True and "task" not in entry
    assert not [t for t in _templates("common") if t["dest"] == "/etc/hosts"]


@pytest.mark.parametrize("role", ROLES)
def test_own_files_have_their_task_and_looped_files_no_other_writer(role: str) -> None:
    literal = {(t["src"], t["dest"]) for t in _templates(role) if "{{" not in f"{t['src']}{t['dest']}"}
    for f in ROLE_FILES[role]:
        if f.get("each"):  # one file per unit: an own one has its host_files task, the others the shared writer
            named = any(f"'{f['src']}'" in str(t["files"]) for t in _host_files(role))
            assert named == (f.get("task") == "own"), f
            continue
        # an own file: its template task, or a host_files task of its own naming it (not the shared writer)
        named = (f["src"], f["dest"]) in literal or any(f"'{f['src']}'" in str(t["files"]) for t in _host_files(role))
        assert named == (f.get("task") == "own"), f
    assert {src for src, _ in literal} <= {f["src"] for f in ROLE_FILES[role]}


def _host_files(role: str) -> list[dict[str, Any]]:
    return [t["gpucluster.tiers.host_files"] for t in _role_tasks(role) if "gpucluster.tiers.host_files" in t]


def test_one_writer_of_the_roles_files() -> None:
    """One tasks/configure.yml in the collection: host_files with the plan's entries of the calling role."""
    assert sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("roles/*/tasks/configure.yml")) == [
        "roles/common/tasks/configure.yml"
    ]
    (writer,) = _host_files("common")[:1]
    assert "selectattr('role', 'equalto', role_path | basename)" in writer["files"]  # the importing role's entries
    assert "rejectattr('task', 'defined')" in writer["files"]  # own-task entries have their own task


@pytest.mark.parametrize("role", HOST_ROLES)
def test_the_role_writes_its_list_with_the_shared_writer(role: str) -> None:
    main = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    path = "configure.yml" if role == "common" else "../../common/tasks/configure.yml"
    assert {"name": "The role's files (vars/files.yml)", "ansible.builtin.import_tasks": path} in main
    assert not [t for t in _templates(role) if "item.src" in t["src"]]  # no per-file template loop left


@pytest.mark.parametrize("role", ROLES)
def test_notified_handlers_exist(role: str) -> None:
    handlers = {h["name"] for h in yaml.safe_load((ROOT / "roles" / role / "handlers" / "main.yml").read_text())}
    for f in ROLE_FILES[role]:
        assert set(f.get("notify", [])) <= handlers, f


def test_the_nccl_topology_file_goes_where_nccl_conf_points() -> None:
    entry = next(f for f in ROLE_FILES["compute"] if f["src"] == "nccl-topo.xml.j2")
    assert entry["dest"] == NCCL_TOPO_FILE


def test_files_kept_out_of_the_plan_are_on_no_host() -> None:
    unplanned = {f["src"] for files in ROLE_FILES.values() for f in files if f.get("plan") is False}
    assert "slurmdbd.conf.j2" in unplanned  # its database password never enters the plan
    for tier in ("tier1", "tier3"):
        plan = cluster_plan(*load_inventory(tier))
        assert not {f["src"] for files in files_by_host(plan).values() for f in files} & unplanned


def test_the_filters_plan_has_the_roles_files() -> None:
    site, groups = load_inventory("tier2")
    plan = FilterModule().filters()["cluster_plan"](site, groups)
    assert plan["files"] == cluster_plan(site, groups)["files"]
    assert all(files_by_host(plan).values())


def test_the_planned_mount_units_go_where_the_plan_says() -> None:
    """The NFS client mounts and Slurm's shared state mount: per-unit files at the plan's unit_path."""
    for tier, kind in (("tier2", "nfs_mount"), ("tier3", "lustre_mount"), ("tier4", "slurm_state_mount")):
        plan = cluster_plan(*load_inventory(tier))
        units = [f for files in files_by_host(plan).values() for f in files if f["src"].endswith(".mount.j2")]
        assert units, (tier, kind)
        assert all(f["dest"] == f["unit"]["unit_path"] for f in units)
    # the units are rendered from the mount's data by the engine's function, not stored in the plan
    assert (ROOT / "roles/compute/templates/nfs-client.mount.j2").read_text() == (
        "{{ item.unit | gpucluster.tiers.nfs_mount_unit(gpucluster_host_plan.storage.nfs.server) }}"
    )
    assert (ROOT / "roles/compute/templates/lustre-client.mount.j2").read_text() == (
        "{{ item.unit | gpucluster.tiers.lustre_client_unit('mount') }}"
    )
    assert (ROOT / "roles/slurm/templates/slurm-state.mount.j2").read_text() == (
        "{{ item.unit | gpucluster.tiers.slurm_state_mount_unit }}"
    )


def test_the_written_files_are_read_from_the_shared_writers_result() -> None:
    """common_files_written (the shared writer registers it for the importing role); no per-role copy."""
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        text = path.read_text()
        for role in ROLES:
            if role != "common":
                assert f"{role}_files_written" not in text, path
