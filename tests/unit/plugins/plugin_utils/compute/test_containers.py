"""Training jobs in containers: runtime, cache, mounts, environment, devices (compute/containers.py).

Sources: docs/sources.md [CR1] (Slurm oci.conf), [CR2] (Enroot configuration), [CR3] (Pyxis),
[CR4] (NVIDIA Container Toolkit), [CR5] (NGC PyTorch image size).
"""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, cluster_plan, load_inventory, render_role_template
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import containers
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host


def _tier(tier: str, section: dict[str, Any] | None = None) -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    if section is not None:
        site["gpucluster_containers"] = section
    return cluster_plan(site, groups)


def _error(tier: str, section: dict[str, Any]) -> PlanError:
    with pytest.raises(PlanError) as err:
        _tier(tier, section)
    return err.value


def _files(plan: dict[str, Any], host: str) -> dict[str, str]:
    return {f["dest"]: f["src"] for f in files_by_host(plan)[host]}


def test_tier3_compute_gets_oci_conf_whose_mounts_and_env_are_the_plans() -> None:
    plan = _tier("tier3")
    c = plan["containers"]
    assert c["runtime"] == "oci" and c["enabled"]
    files = _files(plan, "compute01")
    assert files["/etc/slurm/oci.conf"] == "oci.conf.j2"
    assert files["/etc/gpucluster/containers.json"] == "gpucluster-containers.json.j2"
    assert "/etc/slurm/oci.conf" not in _files(plan, "head01")  # slurmstepd reads it, on the nodes
    rendered = json.loads(
        render_role_template("compute", "gpucluster-containers.json.j2", plan, "compute01", core_filters=True)
    )
    # the environment is nccl.conf's, key for key
    assert rendered["env"] == plan["nccl"]["conf"]
    assert rendered["env"]["NCCL_IB_HCA"].startswith("=mlx5_0:1")
    # the mounts are the planned shared paths and the checkpoint staging folder
    targets = [m["target"] for m in rendered["mounts"]]
    assert targets == [*sorted(plan["storage"]["paths"].values()), plan["storage"]["checkpoint_drain"]["staging_path"]]
    assert all(m["source"] == m["target"] for m in rendered["mounts"])
    # the GPUs and the RDMA devices of the InfiniBand fabric
    assert rendered["devices"][:8] == [f"/dev/nvidia{i}" for i in range(8)]
    assert "/dev/infiniband" in rendered["devices"]
    oci = render_role_template("compute", "oci.conf.j2", plan, "compute01")
    assert 'RunTimeRun="/usr/local/libexec/gpucluster/gpucluster-oci-run --user %u --root ' in oci
    assert 'ContainerPath="/run/gpucluster-containers/job-%j.%s.%t"' in oci  # 22.05 makes no parent folders
    assert "%U" not in oci  # 22.05 knows no %U: "unexpected replacement character: U"
    # the cache on the local NVMe scratch, not on Lustre
    assert c["cache"]["path"] == "/raid/containers" and c["cache"]["size_gb"] == 400


def _code(script: str) -> list[str]:
    return [line.strip() for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_epilog_removes_the_jobs_container_state_running_runc_only_through_the_wrapper() -> None:
    epilog = render_role_template("compute", "gpucluster-epilog.j2", _tier("tier3"), "compute01")
    assert '/run/gpucluster-containers/job-"$SLURM_JOB_ID".*/runc/*' in epilog
    assert 'rm -rf "/run/gpucluster-containers/job-$SLURM_JOB_ID".*' in epilog
    # the epilog (root) never runs runc on a user's state itself: only the wrapper does, as the job's user
    code = _code(epilog)
    assert not [line for line in code if re.search(r"(^|[;&|(]\s*)(/usr/s?bin/)?runc\s", line)], code
    assert (
        '/usr/local/libexec/gpucluster/gpucluster-oci-run --user "$SLURM_JOB_USER" --root "${state%/*}" '
        'delete --force "${state##*/}"' in epilog
    )
    assert "user-*" not in epilog and "1777" not in epilog
    assert epilog.rstrip().endswith("--mode epilog")  # the health check still decides the epilog's status
    plain = render_role_template("compute", "gpucluster-epilog.j2", _tier("tier2"), "compute01")
    assert "SLURM_JOB_ID" not in plain  # no runtime: the epilog as it was


def test_oci_state_lives_in_the_task_folder_slurmstepd_makes_in_a_root_only_folder() -> None:
    plan = _tier("tier3")
    oci = plan["containers"]["oci"]
    assert oci["run_dir"] == "/run/gpucluster-containers" and oci["run_dir_mode"] == "0755"
    assert oci["state_root"] == oci["container_path"] + "/runc"
    for key in ("RunTimeQuery", "RunTimeKill", "RunTimeDelete", "RunTimeRun"):
        assert f"--user %u --root {oci['container_path']}/runc " in oci["conf"][key], key
    assert oci["config"]["run_dir"] == oci["run_dir"]  # the wrapper checks the folder against it
    tmpfiles = _code(render_role_template("compute", "gpucluster-containers-tmpfiles.conf.j2", plan, "compute01"))
    assert tmpfiles == ["d /run/gpucluster-containers 0755 root root -"]
    import yaml

    tasks = yaml.safe_load((ROOT / "roles/compute/tasks/containers.yml").read_text())
    text = json.dumps(tasks)
    assert "1777" not in text  # no folder every user may write
    assert "credential" not in text  # no registry credential is written to a node


def test_pyxis_gets_plugstack_and_enroot_with_the_same_mounts_and_env() -> None:
    plan = _tier("tier3", {"runtime": "pyxis", "cache": {"path": "/raid/enroot", "size_gb": 300}})
    files = _files(plan, "compute01")
    assert {"/etc/slurm/plugstack.conf", "/etc/slurm/plugstack.conf.d/pyxis.conf", "/etc/enroot/enroot.conf"} <= set(
        files
    )
    assert "/etc/slurm/oci.conf" not in files
    conf = render_role_template("compute", "enroot.conf.j2", plan, "compute01")
    assert "ENROOT_CACHE_PATH /raid/enroot/enroot-cache/user-$(id -u)" in conf
    assert "ENROOT_DATA_PATH /raid/enroot/enroot-data/user-$(id -u)" in conf
    assert "ENROOT_MOUNT_HOME yes" in conf
    fstab = render_role_template("compute", "enroot-mounts.fstab.j2", plan, "compute01")
    assert [line.split()[1] for line in fstab.splitlines() if not line.startswith("#")] == [
        m["target"] for m in plan["containers"]["mounts"]
    ]
    env = render_role_template("compute", "enroot-environ.env.j2", plan, "compute01")
    assert dict(line.split("=", 1) for line in env.splitlines() if not line.startswith("#")) == plan["nccl"]["conf"]
    plug = render_role_template("compute", "plugstack-pyxis.conf.j2", plan, "compute01")
    assert plug.strip().endswith("required /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_pyxis.so")
    assert "credentials_file" not in plan["containers"]  # no node gets a registry credential


def test_no_runtime_by_default_and_no_file() -> None:
    for tier in ("tier1", "tier2", "tier4"):
        plan = _tier(tier)
        assert plan["containers"]["runtime"] == "none"
        for host in files_by_host(plan):
            assert not any(
                d.startswith(("/etc/enroot", "/etc/slurm/oci.conf", "/etc/slurm/plugstack")) for d in _files(plan, host)
            )


def test_unknown_runtime_is_a_field_named_error() -> None:
    err = _error("tier3", {"runtime": "docker"})
    assert err.field == "gpucluster_containers.runtime" and err.value == "docker"
    assert "pyxis" in err.allowed and "oci" in err.allowed


def test_cache_on_the_shared_file_system_is_refused() -> None:
    err = _error("tier3", {"runtime": "oci", "cache": {"path": "/lustre/aifs/containers"}})
    assert err.field == "gpucluster_containers.cache.path" and "/lustre/aifs" in err.allowed


def test_cache_outside_the_local_scratch_is_refused() -> None:
    err = _error("tier3", {"runtime": "oci", "cache": {"path": "/var/lib/containers"}})
    assert err.field == "gpucluster_containers.cache.path" and "/raid" in err.allowed


def test_cache_larger_than_the_scratch_left_by_checkpoint_staging_is_refused() -> None:
    plan = _tier("tier3")
    staging_gb = plan["storage"]["checkpoint_drain"]["staging_bytes"] / 1e9  # 1,890 GB on tier3
    err = _error("tier3", {"runtime": "oci", "cache": {"size_gb": 500, "local_capacity_gb": int(staging_gb) + 100}})
    assert err.field == "gpucluster_containers.cache.size_gb" and err.value == 500
    assert "local_capacity_gb" in err.allowed
    ok = _tier("tier3", {"runtime": "oci", "cache": {"size_gb": 90, "local_capacity_gb": int(staging_gb) + 100}})
    assert ok["containers"]["cache"]["size_gb"] == 90


def test_mount_outside_the_planned_file_systems_is_refused() -> None:
    err = _error("tier3", {"runtime": "oci", "mounts": ["/opt/models"]})
    assert err.field == "gpucluster_containers.mounts[0]" and err.value == "/opt/models"
    assert "/lustre/aifs" in err.allowed
    ok = _tier("tier3", {"runtime": "oci", "mounts": ["/lustre/aifs/models", "/raid/datasets-cache"]})
    assert [m["target"] for m in ok["containers"]["mounts"]][-2:] == ["/lustre/aifs/models", "/raid/datasets-cache"]


def test_secrets_never_enter_the_inventory() -> None:
    err = _error("tier3", {"runtime": "oci", "registries": [{"host": "nvcr.io", "password": "hunter2"}]})
    assert "password" in err.field and "hunter2" not in str(err)
    with pytest.raises(PlanError) as direct:
        containers._registries([{"host": "nvcr.io", "token": "abc"}])
    assert direct.value.field == "gpucluster_containers.registries[0].token" and "abc" not in str(direct.value)
    bad = _error("tier3", {"runtime": "oci", "registries": [{"host": "nvcr.io", "credential": "ngc key"}]})
    assert bad.field == "gpucluster_containers.registries[0].credential"


def test_kubernetes_path_installs_no_runtime() -> None:
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    site["gpucluster_cluster"] = {**site["gpucluster_cluster"], "scheduler": "kubernetes"}
    plan = cluster_plan(site, groups)
    c = plan["containers"]
    assert c["runtime"] == "none" and "GPU Operator" in c["reason"]
    assert not any(f["src"] in ("oci.conf.j2", "enroot.conf.j2") for f in files_by_host(plan)["compute01"])
    # the Ray workers mount what a Slurm job container gets, and carry nccl.conf's environment
    worker = next(m["object"] for m in plan["kubernetes"]["manifests"] if m["object"]["kind"] == "RayCluster")
    pod = worker["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert {m["target"] for m in c["mounts"]} <= mounts
    # but the socket interface is the pod's: the workers are on the pod network (Pod Security baseline)
    assert {e["name"]: e["value"] for e in pod["containers"][0]["env"]} == {**c["env"], "NCCL_SOCKET_IFNAME": "=eth0"}


def _storage(scratch: str = "/raid") -> dict[str, Any]:
    return {
        "type": "lustre",
        "lustre": {"mount_point": "/lustre/aifs"},
        "paths": {"checkpoints": "/lustre/aifs/checkpoints", "datasets": "/lustre/aifs/datasets"},
        "local_scratch": scratch,
        "checkpoint_drain": {"enabled": True, "staging_path": f"{scratch}/staging", "staging_bytes": 10**11},
    }


@given(
    st.lists(
        st.sampled_from(["/lustre/aifs", "/raid", "/opt", "/home", "/lustre/other", "/"]).flatmap(
            lambda root: st.text("abc", min_size=1, max_size=4).map(lambda leaf: f"{root.rstrip('/')}/{leaf}")
        ),
        max_size=4,
    )
)
def test_every_mount_lies_in_a_planned_file_system(extra: list[str]) -> None:
    """For any extra mounts: either each one is inside the shared FS or the local scratch, or the plan refuses it."""
    planned = ("/lustre/aifs", "/raid")
    inside = all(any(p == r or p.startswith(r + "/") for r in planned) for p in extra)
    kwargs: dict[str, Any] = {
        "scheduler": "slurm",
        "storage": _storage(),
        "nccl_conf": {"NCCL_IB_HCA": "=mlx5_0:1"},
        "gpus_per_node": 8,
        "fabric_type": "infiniband",
        "lab": False,
    }
    if not inside:
        with pytest.raises(PlanError) as err:
            containers.containers_plan({"runtime": "oci", "mounts": extra}, **kwargs)
        assert err.value.field.startswith("gpucluster_containers.mounts[")
        return
    plan = containers.containers_plan({"runtime": "oci", "mounts": extra}, **kwargs)
    for m in plan["mounts"]:
        assert any(m["source"] == r or m["source"].startswith(r + "/") for r in planned)
    assert len({m["target"] for m in plan["mounts"]}) == len(plan["mounts"])


def _wrapper() -> Any:
    path = ROOT / "roles" / "compute" / "files" / "gpucluster-oci-run"
    loader = importlib.machinery.SourceFileLoader("gpucluster_oci_run", str(path))
    spec = importlib.util.spec_from_loader("gpucluster_oci_run", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_oci_wrapper_adds_the_plans_mounts_env_and_devices(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    plan = {
        "mounts": [
            {"source": str(shared), "target": "/lustre/aifs", "options": "rw"},
            {"source": "/nonexistent", "target": "/x", "options": "rw"},
        ],
        "env": {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_DEBUG": "WARN"},
        "devices": ["/dev/null", "/dev/nvidia-absent"],
        "nvidia_hook": "/nonexistent/hook",
        "nested": True,
    }
    spec = {
        "process": {"env": ["PATH=/bin", "NCCL_DEBUG=INFO"], "user": {"uid": 1000, "gid": 1000}},
        "hostname": "runc",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/sys/fs/cgroup", "type": "cgroup"},
        ],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}], "cgroupsPath": "/x"},
    }
    out = _wrapper().amend(spec, plan, 1000, 1000)
    assert "NCCL_IB_HCA==mlx5_0:1" in out["process"]["env"]
    assert (
        "NCCL_DEBUG=INFO" in out["process"]["env"] and "NCCL_DEBUG=WARN" not in out["process"]["env"]
    )  # the job's wins
    dests = [m["destination"] for m in out["mounts"]]
    assert "/lustre/aifs" in dests and "/x" not in dests  # a missing source is left out
    assert "/dev/null" in dests and "/dev/nvidia-absent" not in dests
    # nested (the lab): no PID namespace, the node's /proc, no cgroups, the user mapped to root inside
    assert {n["type"] for n in out["linux"]["namespaces"]} == {"mount", "user"}
    assert next(m for m in out["mounts"] if m["destination"] == "/proc")["type"] == "bind"
    assert "/sys/fs/cgroup" not in dests and "hostname" not in out and "cgroupsPath" not in out["linux"]
    assert out["linux"]["uidMappings"] == [{"containerID": 0, "hostID": 1000, "size": 1}]
    assert "hooks" not in out  # the toolkit's hook only where it is installed


# --- the wrapper as root: runc only as the job's user, on a folder only slurmstepd can have made --------


def _run_dir(tmp_path: Path, mode: int = 0o755) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_dir.chmod(mode)
    return run_dir


def test_wrapper_accepts_the_task_folder_of_the_jobs_user(tmp_path: Path) -> None:
    w = _wrapper()
    run_dir = _run_dir(tmp_path)
    (run_dir / "job-7.0.0").mkdir()
    root = f"{run_dir}/job-7.0.0/runc"
    assert w.check_state_root(root, str(run_dir), os.getuid(), root_uid=os.getuid()) == root


@pytest.mark.parametrize(
    "case",
    ["world-writable run_dir", "link", "other owner", "outside run_dir", "dotdot", "not runc", "missing", "file"],
)
def test_wrapper_refuses_a_state_folder_a_user_could_have_planted(tmp_path: Path, case: str) -> None:
    w = _wrapper()
    run_dir = _run_dir(tmp_path, 0o1777 if case == "world-writable run_dir" else 0o755)
    uid = os.getuid()
    job = run_dir / "job-7.0.0"
    root = f"{job}/runc"
    if case == "link":
        (tmp_path / "elsewhere").mkdir()
        job.symlink_to(tmp_path / "elsewhere")
    elif case == "file":
        job.write_text("")
    elif case != "missing":
        job.mkdir()
    if case == "other owner":
        uid = uid + 1
    if case == "outside run_dir":
        (tmp_path / "job-7.0.0").mkdir()
        root = f"{tmp_path}/job-7.0.0/runc"
    if case == "dotdot":
        root = f"{run_dir}/job-7.0.0/../job-7.0.0/runc"
    if case == "not runc":
        root = f"{job}/state"
    with pytest.raises(w.Refused):
        w.check_state_root(root, str(run_dir), uid, root_uid=os.getuid())


def test_wrapper_run_by_a_user_for_another_user_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    w = _wrapper()
    monkeypatch.setattr(w.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(w.os, "getuid", lambda: 1000)
    with pytest.raises(w.Refused):
        w.drop_privileges("root")


_ROOT_RUNC = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("runc") or not Path("/usr/sbin/runc").exists(),
    reason="needs root and Debian's runc (/usr/sbin/runc): the hook is really run",
)


def _plant(state: Path, hook: Path, marker: Path) -> None:
    """A stopped container's state.json whose poststop hook writes the uid it ran as (runc 1.1 format)."""
    hook.write_text(f"#!/bin/sh\nid -u > {marker}\n")
    hook.chmod(0o755)
    state.mkdir(parents=True)
    cfg = {
        "rootfs": "/nonexistent",
        "cgroups": {"path": "/gpucluster-unit-test", "memory": 0},
        "hooks": {"poststop": [{"path": str(hook), "args": [hook.name]}]},
        "labels": ["bundle=/nonexistent"],
    }
    doc = {
        "id": state.name,
        "init_process_pid": 2**22 - 7,
        "init_process_start": 1,
        "created": "2024-01-01T00:00:00Z",
        "config": cfg,
        "rootless": True,
        "cgroup_paths": {},
        "namespace_paths": {},
        "external_descriptors": [],
    }
    (state / "state.json").write_text(json.dumps(doc))


def _call_wrapper(tmp_path: Path, run_dir: Path, user: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "containers.json"
    config.write_text(json.dumps({"run_dir": str(run_dir)}))
    path = ROOT / "roles" / "compute" / "files" / "gpucluster-oci-run"
    code = (
        "import importlib.machinery, importlib.util, sys\n"
        f"loader = importlib.machinery.SourceFileLoader('w', {str(path)!r})\n"
        "spec = importlib.util.spec_from_loader('w', loader); m = importlib.util.module_from_spec(spec)\n"
        "loader.exec_module(m)\n"
        f"sys.exit(m.main({['--user', user, *argv]!r}, config={str(config)!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


@_ROOT_RUNC
def test_wrapper_as_root_runs_a_planted_poststop_hook_only_as_the_user() -> None:
    """The attack of issue 37: state.json with a poststop hook in the user's state folder; root's
    RunTimeDelete (and the epilog, through the wrapper) must never run it as root."""
    base = Path(tempfile.mkdtemp(prefix="gpucluster-oci-test-"))  # not under pytest's 0700 folder: nobody reaches it
    try:
        base.chmod(0o755)
        run_dir = _run_dir(base)
        job = run_dir / "job-7.0.0"
        job.mkdir(mode=0o750)
        drop = base / "drop"
        drop.mkdir()
        drop.chmod(0o1777)  # the hook may write its marker whoever it runs as
        marker = drop / "marker"
        _plant(job / "runc" / "node.nobody.7.0.0", base / "hook.sh", marker)
        subprocess.run(["chown", "-R", "nobody:nogroup", str(job)], check=True)
        argv = ["--root", f"{job}/runc", "delete", "--force", "node.nobody.7.0.0"]
        out = _call_wrapper(base, run_dir, "nobody", argv)
        # the hook ran (runc deleted the stopped container), as nobody, never as root
        assert marker.read_text().strip() == str(pwd_uid("nobody")), (out.stdout, out.stderr)
        marker.unlink()
        # the same folder under another user's name: refused, runc does not run at all
        _plant(job / "runc" / "again", base / "hook.sh", marker)
        out = _call_wrapper(base, run_dir, "daemon", ["--root", f"{job}/runc", "delete", "--force", "again"])
        assert out.returncode == 2 and "not the job's user" in out.stderr
        assert not marker.exists()
    finally:
        shutil.rmtree(base)


def pwd_uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


# --- Enroot (pyxis): every folder per user, made by root in root's folders ------------------------------


def test_enroot_folders_are_per_user_and_made_by_root_in_the_prolog() -> None:
    plan = _tier("tier3", {"runtime": "pyxis", "cache": {"path": "/raid/enroot"}})
    enroot = plan["containers"]["enroot"]
    conf = render_role_template("compute", "enroot.conf.j2", plan, "compute01")
    paths = dict(line.split(None, 1) for line in _code(conf) if line.split()[0].endswith("_PATH"))
    roots = {"/run/enroot", "/raid/enroot/enroot-cache", "/raid/enroot/enroot-data", "/raid/enroot/enroot-tmp"}
    assert set(enroot["user_roots"]) == roots
    # each path Enroot writes is user-<uid> in one of root's folders: no folder every user may write,
    # none shared by a group (a layer one user wrote is never another's)
    assert sorted(paths) == ["ENROOT_CACHE_PATH", "ENROOT_DATA_PATH", "ENROOT_RUNTIME_PATH", "ENROOT_TEMP_PATH"]
    for value in paths.values():
        assert value.endswith("/user-$(id -u)") and value.rsplit("/", 1)[0] in roots, value
    assert "group-" not in conf
    assert {f["path"] for f in enroot["folders"]} == roots and {f["mode"] for f in enroot["folders"]} == {"0755"}
    # the Prolog (root) makes user-<uid>, mode 0700, the user's, never through a link
    prolog = render_role_template("compute", "gpucluster-prolog.j2", plan, "compute01")
    assert "for top in " + " ".join(sorted(roots)) + "; do" in prolog
    assert 'dir="$top/user-$SLURM_JOB_UID"' in prolog and '[ -L "$dir" ]' in prolog
    assert 'mkdir -m 0700 "$dir"' in prolog and 'chown -h "$SLURM_JOB_UID:$gid" "$dir"' in prolog
    assert prolog.rstrip().endswith("--mode prolog")
    tmpfiles = _code(render_role_template("compute", "gpucluster-enroot-tmpfiles.conf.j2", plan, "compute01"))
    assert tmpfiles == ["d /run/enroot 0755 root root -"]
    assert _files(plan, "compute01")["/etc/tmpfiles.d/gpucluster-enroot.conf"] == "gpucluster-enroot-tmpfiles.conf.j2"
    # oci (tier3's reference): the Prolog makes no Enroot folder
    assert "enroot" not in render_role_template("compute", "gpucluster-prolog.j2", _tier("tier3"), "compute01")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the Prolog's block is run (chown)")
def test_prolog_block_refuses_a_planted_link_and_makes_the_users_folder(tmp_path: Path) -> None:
    plan = _tier("tier3", {"runtime": "pyxis", "cache": {"path": "/raid/enroot"}})
    prolog = render_role_template("compute", "gpucluster-prolog.j2", plan, "compute01")
    block = prolog[prolog.index("if [ -n") : prolog.index("\nfi\n") + 4]
    top = tmp_path / "top"
    top.mkdir()
    script = re.sub(r"for top in [^;]*;", f"for top in {top};", block)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_JOB_UID": str(pwd_uid("nobody"))}
    ok = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=False)
    made = top / f"user-{pwd_uid('nobody')}"
    assert ok.returncode == 0, ok.stderr
    assert made.is_dir() and made.stat().st_uid == pwd_uid("nobody") and made.stat().st_mode & 0o777 == 0o700
    made.rmdir()
    (tmp_path / "victim").mkdir()
    made.symlink_to(tmp_path / "victim")  # had a user planted it (root's folder: only root could)
    bad = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert bad.returncode != 0 and (tmp_path / "victim").stat().st_uid == 0


# --- Pyxis built from a tarball: https and a sha256, checked before anything runs as root ---------------


def test_pyxis_source_needs_https_and_its_sha256() -> None:
    sha = "a" * 64
    ok = _tier(
        "tier3",
        {"runtime": "pyxis", "pyxis_source": {"url": "https://example.org/pyxis-0.20.0.tar.gz", "sha256": sha.upper()}},
    )
    assert ok["containers"]["enroot"]["pyxis_source"] == {
        "url": "https://example.org/pyxis-0.20.0.tar.gz",
        "sha256": sha,
    }
    assert _tier("tier3", {"runtime": "pyxis"})["containers"]["enroot"]["pyxis_source"] is None
    missing = _error("tier3", {"runtime": "pyxis", "pyxis_source": {"url": "https://example.org/p.tar.gz"}})
    assert missing.field == "gpucluster_containers.pyxis_source.sha256" and "sha256" in missing.allowed
    short = _error(
        "tier3", {"runtime": "pyxis", "pyxis_source": {"url": "https://example.org/p.tar.gz", "sha256": "abc"}}
    )
    assert short.field == "gpucluster_containers.pyxis_source.sha256" and short.value == "abc"
    http = _error("tier3", {"runtime": "pyxis", "pyxis_source": {"url": "http://example.org/p.tar.gz", "sha256": sha}})
    assert http.field == "gpucluster_containers.pyxis_source.url" and "https" in http.allowed
    extra = _error("tier3", {"runtime": "pyxis", "pyxis_source": {"url": "https://x/p", "sha256": sha, "md5": "x"}})
    assert extra.field == "gpucluster_containers.pyxis_source.md5"


def test_pyxis_build_uses_only_the_download_checked_against_the_plans_sha256() -> None:
    import yaml

    tasks = yaml.safe_load((ROOT / "roles/compute/tasks/containers_repo.yml").read_text())

    def walk(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for t in items:
            out.append(t)
            out += walk(t.get("block", []))
        return out

    flat = walk(tasks)
    get = next(t["ansible.builtin.get_url"] for t in flat if "ansible.builtin.get_url" in t)
    assert get["checksum"] == "sha256:{{ gpucluster_host_plan.containers.enroot.pyxis_source.sha256 }}"
    assert get["url"] == "{{ gpucluster_host_plan.containers.enroot.pyxis_source.url }}"
    unpack = next(t["ansible.builtin.unarchive"] for t in flat if "ansible.builtin.unarchive" in t)
    assert unpack["src"] == get["dest"] and unpack["remote_src"] is True  # the checked file, nothing else
    assert "compute_pyxis_source" not in json.dumps(tasks)
