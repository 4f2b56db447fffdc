"""Slurm in the lab: controller with accounting, every compute node idle with its GPUs."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import hosts_with


def _head(hosts: dict[str, Any], plan: dict[str, Any]) -> Any:
    return hosts[plan["cluster"]["head"]]


def test_services_active(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = _head(hosts, plan)
    for service in ("slurmctld", "slurmdbd", "mariadb", "munge"):
        assert head.service(service).is_running, service
    for name in hosts_with(plan, "compute"):
        for service in ("slurmd", "munge"):
            assert hosts[name].service(service).is_running, (name, service)


def test_sinfo_lists_exactly_the_compute_nodes_with_their_gpus(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = _head(hosts, plan)
    gres = plan["slurm"]["gres"]
    # a node resumed a moment ago shows "idle*" until slurmd answers the controller's next ping
    out = head.check_output(
        "for i in $(seq 120); do out=$(sinfo --noheader --Node --partition=gpu --format='%N %G %t'); "
        'case $out in *"*"*) sleep 0.5;; *) break;; esac; done; echo "$out"'
    )
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert sorted(rows) == sorted(hosts_with(plan, "compute"))
    for name, (node_gres, state) in rows.items():
        assert node_gres == gres, name
        assert state in ("idle", "mix", "alloc"), (name, state)


def test_a_job_runs_on_every_node_and_is_accounted(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = _head(hosts, plan)
    nodes = hosts_with(plan, "compute")
    gpus = plan["cluster"]["gpus_per_node"]
    result = head.run(
        f"srun --job-name=lab-verify --nodes={len(nodes)} --ntasks-per-node=1 --gres=gpu:{gpus} "
        "--time=1 bash -c 'echo $(hostname) $CUDA_VISIBLE_DEVICES'"
    )
    assert result.rc == 0, result.stderr
    seen = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()}
    assert sorted(seen) == sorted(nodes)
    assert all(v == ",".join(str(i) for i in range(gpus)) for v in seen.values())
    # slurmctld hands job records to slurmdbd asynchronously: give it a few seconds
    acct = head.check_output(
        "for i in $(seq 30); do out=$(sacct --noheader --parsable2 --name=lab-verify --starttime=now-1hour "
        '--format=JobName,State); case $out in *lab-verify*COMPLETED*) break;; esac; sleep 1; done; echo "$out"'
    )
    assert "lab-verify|COMPLETED" in acct


def test_topology_matches_the_plan(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = _head(hosts, plan)
    switches = plan["fabric"]["slurm_topology"]  # the data topology.conf is rendered from (filter slurm_topology_conf)
    shown = head.check_output("scontrol show topology")
    if not switches:
        assert "TopologyPlugin" not in head.file("/etc/slurm/slurm.conf").content_string
        return
    for sw in switches:
        members = f"Nodes={sw['nodes']}" if "nodes" in sw else f"Switches={sw['switches']}"
        row = next(r for r in shown.splitlines() if r.startswith(f"SwitchName={sw['name']} "))
        assert members in row.split(), (sw, row)


def test_two_small_gpu_jobs_share_a_node(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    # DefMemPerGPU/DefCpuPerGPU (plan.slurm.def_mem_per_gpu, def_cpu_per_gpu): a 1-GPU job without --mem
    # or --cpus gets its GPU's share of the node; without them it got all of RealMemory and a second job
    # waited. Two such jobs on one idle node run at once; each holds DefCpuPerGPU CPUs. Event-driven: the
    # jobs sleep until cancelled, squeue is polled until both run (or 60 s), then both are cancelled.
    head = _head(hosts, plan)
    if plan["cluster"]["gpus_per_node"] < 2 or not plan["slurm"]["def_mem_per_gpu"]:
        pytest.skip("one GPU per node, or no per-GPU defaults planned")
    idle = head.check_output("sinfo --noheader --Node --partition=gpu --states=idle --format=%N").split()
    assert idle, "no idle compute node to run the two jobs on"
    node = idle[0]
    submit = f"sbatch --parsable --job-name=lab-share --nodelist={node} --gres=gpu:1 --time=2 --wrap='sleep 300'"
    jobs = [head.check_output(submit).split(";")[0] for _ in range(2)]
    try:
        out = head.check_output(
            f"for i in $(seq 60); do out=$(squeue --noheader --jobs={','.join(jobs)} --format='%i %T %N %C'); "
            'case $out in *PENDING*|*CONFIGURING*|"") sleep 1;; *) break;; esac; done; echo "$out"'
        )
    finally:
        head.run(f"scancel {' '.join(jobs)}")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert sorted(rows) == sorted(jobs), out
    for job, (state, where, cpus) in rows.items():
        assert (state, where) == ("RUNNING", node), (job, out)
        assert int(cpus) == plan["slurm"]["def_cpu_per_gpu"], (job, out)


def test_gres_conf_includes_the_nodes_mig_lines_only_where_mig_is_planned(
    hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    """Issue 43: a MIG site's gres.conf includes the lines each node writes from its driver before slurmd
    starts (gpucluster-mig-gres; compute/mig.py), never AutoDetect=nvml, and no node gets Debian's NVML
    plugin (contrib, pinned to a slurmd version the mirror does not carry). The lab plans no MIG: the MIG
    example's configuration is started in test_mig_slurmd.py."""
    mig = plan["slurm"]["gres_mig"]
    for name in hosts_with(plan, "compute"):
        out = hosts[name].check_output(
            "dpkg-query -W -f='${Status}' slurm-wlm-nvml-plugin 2>/dev/null; echo; "
            "grep -c -e 'AutoDetect=nvml' /etc/slurm/gres.conf || true; "
            "grep -c -e '^Include ' /etc/slurm/gres.conf || true; "
            "test -e /etc/systemd/system/slurmd.service.d/gpucluster-mig-gres.conf && echo drop-in || echo none"
        )
        status, nvml, include, drop_in = out.splitlines()
        assert "install ok installed" not in status, name
        assert nvml == "0", name
        assert (include, drop_in) == (("1", "drop-in") if mig["hosts"] else ("0", "none")), (name, out)
