"""Training jobs in containers: runtime, cache, mounts, environment, devices (compute/containers.py).

Sources: docs/sources.md [CR1] (Slurm oci.conf), [CR2] (Enroot configuration), [CR3] (Pyxis),
[CR4] (NVIDIA Container Toolkit), [CR5] (NGC PyTorch image size).
"""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, cluster_plan, load_inventory, render_role_template
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import containers
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError


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
    return {f["dest"]: f["src"] for f in plan["files"][host]}


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


def test_epilog_removes_the_jobs_container_state() -> None:
    epilog = render_role_template("compute", "gpucluster-epilog.j2", _tier("tier3"), "compute01")
    assert '/run/gpucluster-containers/user-*/*."$SLURM_JOB_ID".*' in epilog
    assert 'rm -rf "/run/gpucluster-containers/job-$SLURM_JOB_ID".*' in epilog
    assert epilog.rstrip().endswith("--mode epilog")  # the health check still decides the epilog's status
    plain = render_role_template("compute", "gpucluster-epilog.j2", _tier("tier2"), "compute01")
    assert "SLURM_JOB_ID" not in plain  # no runtime: the epilog as it was


def test_pyxis_gets_plugstack_and_enroot_with_the_same_mounts_and_env() -> None:
    plan = _tier("tier3", {"runtime": "pyxis", "cache": {"path": "/raid/enroot", "size_gb": 300}})
    files = _files(plan, "compute01")
    assert {"/etc/slurm/plugstack.conf", "/etc/slurm/plugstack.conf.d/pyxis.conf", "/etc/enroot/enroot.conf"} <= set(
        files
    )
    assert "/etc/slurm/oci.conf" not in files
    conf = render_role_template("compute", "enroot.conf.j2", plan, "compute01")
    assert "ENROOT_CACHE_PATH /raid/enroot/enroot-cache/group-$(id -g)" in conf
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
    assert plan["containers"]["credentials_file"] == "/etc/enroot/.credentials"


def test_no_runtime_by_default_and_no_file() -> None:
    for tier in ("tier1", "tier2", "tier4"):
        plan = _tier(tier)
        assert plan["containers"]["runtime"] == "none"
        for host in plan["files"]:
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
    assert not any(f["src"] in ("oci.conf.j2", "enroot.conf.j2") for f in plan["files"]["compute01"])
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
