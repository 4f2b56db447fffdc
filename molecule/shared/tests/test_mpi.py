"""MPI in the lab: Slurm's PMIx plugin starts an Open MPI program (mpi4py) across two compute nodes.

The lab has no HCA: UCX runs over TCP between the containers (plan.slurm.mpi, a lab override from
plan.cluster.lab), through the same Open MPI UCX PML a real fabric uses. Slurm's PMIx plugin needs
libpmix-dev (the slurm role installs it): it dlopens the unversioned libpmix.so.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import hosts_with

PROGRAM = (
    "import socket; from mpi4py import MPI; c = MPI.COMM_WORLD; "
    "print('rank', c.Get_rank(), c.Get_size(), socket.gethostname(), c.allreduce(c.Get_rank() + 1), flush=True)"
)


def _head(hosts: dict[str, Any], plan: dict[str, Any]) -> Any:
    return hosts[plan["cluster"]["head"]]


def _two_nodes(plan: dict[str, Any]) -> list[str]:
    nodes = hosts_with(plan, "compute")
    if len(nodes) < 2:
        pytest.skip(f"{plan['cluster']['tier']} has {len(nodes)} compute node: no multi-node MPI job")
    return nodes


def test_slurm_offers_pmix_and_defaults_to_it(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = _head(hosts, plan)
    plugins = head.check_output("srun --mpi=list 2>&1")
    assert "pmix" in plugins.split(), plugins
    conf = head.check_output("scontrol show config | awk '$1 == \"MpiDefault\" {print $3}'")
    assert conf.strip() == plan["slurm"]["mpi"]["mpi_default"] == "pmix"


def test_mpi_files_hold_the_planned_values(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    mpi = plan["slurm"]["mpi"]
    if not mpi["files"]:
        pytest.skip(f"{plan['cluster']['tier']}: no fabric, no UCX / Open MPI files (plan.slurm.mpi)")
    for name in hosts_with(plan, "compute"):
        ucx = hosts[name].file(mpi["ucx_conf"]).content_string.splitlines()
        ompi = hosts[name].file(mpi["openmpi_mca_params"]).content_string.splitlines()
        # plan.json is written with sorted keys: compare the values, not their order
        assert sorted(line for line in ucx if not line.startswith("#")) == sorted(
            f"{k}={v}" for k, v in mpi["ucx"].items()
        )
        assert sorted(line for line in ompi if not line.startswith("#")) == sorted(
            f"{k} = {v}" for k, v in mpi["openmpi"].items()
        )
        assert "mlx5" not in " ".join(ucx), "the lab has no HCA: UCX must not name one"


def test_a_pmix_job_spans_two_nodes_over_ucx(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    nodes = _two_nodes(plan)
    head = _head(hosts, plan)
    # pml_base_verbose: Open MPI names the PML it selected, so the job proves it ran on UCX (the plan's
    # pml = ucx from /etc/openmpi/openmpi-mca-params.conf), not on a fallback.
    result = head.run(
        "srun --mpi=pmix --nodes=2 --ntasks=2 --ntasks-per-node=1 --time=2 --job-name=lab-mpi "
        "--export=ALL,OMPI_MCA_pml_base_verbose=10 "
        f'python3 -c "{PROGRAM}"'
    )
    assert result.rc == 0, (result.stdout, result.stderr)
    ranks = [line.split() for line in result.stdout.splitlines() if line.startswith("rank ")]
    assert sorted(int(r[1]) for r in ranks) == [0, 1], result.stdout
    assert {r[2] for r in ranks} == {"2"}  # both see a world of two
    ran_on = [r[3] for r in ranks]
    assert len(set(ran_on)) == 2 and set(ran_on) <= set(nodes), ("one rank on each of two nodes", ran_on)
    assert {r[4] for r in ranks} == {"3"}, "allreduce of rank+1 over two ranks"
    assert "component ucx selected" in result.stdout + result.stderr, result.stderr[-2000:]
