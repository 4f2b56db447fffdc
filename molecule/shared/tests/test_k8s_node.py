"""The Kubernetes path's compute node tuning, as applied (molecule/tier4-k8s: tier4-k8s's compute node set).

A plan whose scheduler is kubernetes only: on the Slurm tiers every test here is skipped. The
scenario converges one compute node (--limit) and no Kubernetes API exists in the lab: the plan
renders the health check's kubectl calls as a dry run (healthcheck.json scheduler.dry_run, from
plan.cluster.lab), so the check prints the cordon, taint and annotation it would run and runs none.
Everything else is the node's real state: the installed files byte for byte as make plan renders
them, the units systemd has enabled and started, and no Slurm on the node.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import nvidia_smi_rows

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

CHECK = "/usr/local/sbin/gpucluster-healthcheck"
SLURM_FILES = ("/etc/slurm/slurm.conf", "/etc/slurm/gres.conf", "/etc/slurm/cgroup.conf")


@pytest.fixture(scope="module", autouse=True)
def _kubernetes_only(plan: dict[str, Any]) -> None:
    if plan["cluster"]["scheduler"] != "kubernetes":
        pytest.skip(f"scheduler {plan['cluster']['scheduler']}: the Kubernetes path's checks do not apply")


@pytest.fixture(scope="module")
def nodes(lab: Path, plan: dict[str, Any]) -> list[str]:
    """The compute nodes the lab converged: the plan's compute hosts that have a container (a node set
    scenario makes containers for its --limit and the head only, lab/create.yml)."""
    lab_hosts = yaml.safe_load((lab / "inventory.yml").read_text())["all"]["hosts"]
    names = [name for name, host in plan["hosts"].items() if "compute" in host["roles"] and name in lab_hosts]
    assert names, "no compute node in the lab"
    return names


def _unit_lines(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def test_planned_files_installed(hosts: dict[str, Any], plan: dict[str, Any], lab: Path, nodes: list[str]) -> None:
    for name in nodes:
        dests = [item["dest"] for item in files_by_host(plan)[name]]
        assert not [d for d in dests if "slurm" in d], dests  # no Slurm file in the plan of the node
        for dest in dests:
            installed = hosts[name].file(dest)
            assert installed.exists, (name, dest)
            assert installed.content == (lab / "planned" / name / dest.lstrip("/")).read_bytes(), (name, dest)


def test_clocks_and_power_unit_enabled_with_planned_values(
    hosts: dict[str, Any], plan: dict[str, Any], nodes: list[str]
) -> None:
    clocks = plan["gpu"]["clocks"]
    for name in nodes:
        host = hosts[name]
        unit = host.file("/etc/systemd/system/gpucluster-gpu-clocks.service")
        assert unit.exists, name
        text = unit.content_string
        assert _unit_lines(text, "ExecStart") == [f"/usr/bin/nvidia-smi {a}" for a in clocks["apply_args"]]
        assert _unit_lines(text, "ExecStop") == [f"/usr/bin/nvidia-smi {a}" for a in clocks["reset_args"]]
        lgc = clocks["lock_gpu_clocks"]
        assert f"/usr/bin/nvidia-smi -lgc {lgc[0]},{lgc[1]}" in _unit_lines(text, "ExecStart")
        assert f"/usr/bin/nvidia-smi -pl {clocks['power_limit_w']}" in _unit_lines(text, "ExecStart")
        assert host.service("gpucluster-gpu-clocks.service").is_enabled, name
        # the lab has no nvidia-smi: the unit's condition keeps it from running anything
        assert "ConditionPathExists=/usr/bin/nvidia-smi" in text
        assert not host.file("/usr/bin/nvidia-smi").exists


def test_fabric_manager_and_gpudirect_configured(hosts: dict[str, Any], plan: dict[str, Any], nodes: list[str]) -> None:
    bringup = plan["gpu"]["bringup"]
    fm = bringup["fabric_manager"]
    assert fm["required"]  # H100 SXM: an NVSwitch board
    gpudirect = bringup["gpudirect"]
    assert gpudirect["method"] == "dmabuf"  # Debian 12's kernel has no PeerDirect: no nvidia_peermem
    for name in nodes:
        host = hosts[name]
        dropin = host.file(f"/etc/systemd/system/{fm['service']}.d/gpucluster.conf").content_string
        assert _unit_lines(dropin, "Before") == [" ".join(fm["before"])]
        assert "kubelet.service" in fm["before"]  # the Kubernetes path's GPU user starts after it
        assert not host.file("/etc/modules-load.d/gpucluster-gpudirect.conf").exists, name
        assert host.file(gpudirect["pcie"]["grub_dropin"]).exists, name


def test_no_slurm_on_the_node(hosts: dict[str, Any], nodes: list[str]) -> None:
    for name in nodes:
        host = hosts[name]
        for path in SLURM_FILES:
            assert not host.file(path).exists, (name, path)
        slurmd = host.service("slurmd")
        assert not slurmd.is_running, name
        assert not slurmd.is_enabled, name
        # nor Slurm's authentication: no munge key (the lab's image has the package), munge not running
        assert not host.file("/etc/munge/munge.key").exists, name
        assert not host.service("munge").is_running, name


def test_health_check_timer_runs_it(hosts: dict[str, Any], plan: dict[str, Any], nodes: list[str]) -> None:
    for name in nodes:
        host = hosts[name]
        timer = host.service("gpucluster-healthcheck.timer")
        assert timer.is_enabled and timer.is_running, name
        service = host.file("/etc/systemd/system/gpucluster-healthcheck.service").content_string
        assert _unit_lines(service, "ExecStart") == [f"{CHECK} --mode periodic"]
        assert (
            f"OnUnitActiveSec={plan['health']['interval_s']}"
            in host.file("/etc/systemd/system/gpucluster-healthcheck.timer").content_string
        )
        assert host.file(CHECK).mode == 0o755


def _run_check(host: Any, sample: str) -> Any:
    host.run(f"printf %s {shlex.quote(sample)} > /tmp/nvidia-smi.csv")
    return host.run(f"{CHECK} --nvidia-smi-output /tmp/nvidia-smi.csv")


def test_unhealthy_node_would_be_cordoned_and_tainted(
    hosts: dict[str, Any], plan: dict[str, Any], nodes: list[str]
) -> None:
    name = nodes[0]
    host = hosts[name]
    cfg = json.loads(host.file("/etc/gpucluster/healthcheck.json").content_string)["scheduler"]
    assert cfg["kind"] == "kubernetes" and cfg["dry_run"] is True  # the lab: no API
    kubectl = f"{cfg['kubectl']} --kubeconfig {cfg['kubeconfig']}"
    gpus, critical = plan["cluster"]["gpus_per_node"], plan["gpu"]["temperature"]["critical_c"]
    marker = host.file("/run/gpucluster/health/drained")

    hot = _run_check(host, nvidia_smi_rows(gpus, gpu=3, column=9, value=str(critical + 2)))
    assert hot.rc == 1, hot.stdout + hot.stderr
    assert f"gpu3 {critical + 2}C >= {critical}C" in hot.stdout
    would = [line.removeprefix("would run: ") for line in hot.stdout.splitlines() if line.startswith("would run: ")]
    assert would[0] == f"{kubectl} cordon {name}"
    assert would[1] == f"{kubectl} taint nodes {name} {cfg['taint']}=health:NoSchedule --overwrite"
    assert would[2].startswith(f"{kubectl} annotate node {name} '{cfg['reason_annotation']}=")
    assert len(would) == 3
    assert "run: " not in hot.stdout.replace("would run: ", "")  # nothing executed
    assert not marker.exists  # a dry run does not record a drain

    healthy = _run_check(host, nvidia_smi_rows(gpus))
    assert healthy.rc == 0, healthy.stdout + healthy.stderr
    assert "would run" not in healthy.stdout


def test_containerd_memlock_dropin_as_planned(hosts: dict[str, Any], plan: dict[str, Any], nodes: list[str]) -> None:
    """The teams' pods run without IPC_LOCK (Pod Security baseline): RDMA pins registered memory against the
    RLIMIT_MEMLOCK they inherit from containerd, which the drop-in sets to the plan's value."""
    containerd = plan["kubernetes"]["node"]["containerd"]
    assert containerd["dropin"].startswith("/etc/systemd/system/containerd.service.d/")
    for name in nodes:
        dropin = hosts[name].file(containerd["dropin"])
        assert dropin.exists and dropin.user == "root" and dropin.mode == 0o644, name
        lines = [line for line in dropin.content_string.splitlines() if line and not line.startswith("#")]
        assert lines == ["[Service]", f"LimitMEMLOCK={containerd['limit_memlock']}"], (name, lines)
        # containerd is not installed in the lab, and systemd loads no drop-in of a unit it does not find
        # (systemctl show containerd: DropInPaths empty): what it would read is the file, checked above


def test_team_folders_present_with_planned_owner_and_mode(
    hosts: dict[str, Any], plan: dict[str, Any], nodes: list[str]
) -> None:
    """Every folder a team's PersistentVolume points to (hostPath type Directory: a missing one keeps the
    pod in ContainerCreating) exists with the plan's owner, group and mode; the lab mounts no shared file
    system, so the shared ones are made too (team_folder_mounts is empty there)."""
    node = plan["kubernetes"]["node"]
    assert node["team_folder_mounts"] == {}  # the lab
    pv_paths = {
        m["object"]["spec"]["hostPath"]["path"]
        for m in plan["kubernetes"]["manifests"]
        if m["object"]["kind"] == "PersistentVolume"
    }
    assert {f["path"] for f in node["team_folders"]} == pv_paths
    for name in nodes:
        for folder in node["team_folders"]:
            d = hosts[name].file(folder["path"])
            assert d.is_directory, (name, folder["path"])
            assert (d.user, d.group, d.mode) == (folder["owner"], folder["group"], int(folder["mode"], 8)), (
                name,
                folder,
                (d.user, d.group, oct(d.mode)),
            )
