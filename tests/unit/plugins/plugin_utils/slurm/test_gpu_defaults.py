"""slurm.conf DefMemPerGPU and DefCpuPerGPU from the node shape (issue 38, build item 6): a 1-GPU job
without --mem or --cpus gets its GPU's share of the node, so small GPU jobs share a node."""

from __future__ import annotations

import copy
import re

import pytest
from conftest import TIERS, cluster_plan, load_inventory, render_role_template
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import settings


@given(
    cores=st.integers(1, 512),
    threads=st.sampled_from([1, 2, 4]),
    memory=st.integers(1, 8 * 1024 * 1024),
    counts=st.lists(st.integers(0, 64), min_size=1, max_size=4),
)
def test_the_defaults_fit_every_gpu_of_the_node(cores: int, threads: int, memory: int, counts: list[int]) -> None:
    gpus = max(counts)
    if gpus == 0:
        assert settings.gpu_defaults(cores * threads, threads, memory, counts) == {
            "def_cpu_per_gpu": 0,
            "def_mem_per_gpu": 0,
        }
        return
    if cores < gpus or memory < gpus:
        with pytest.raises(PlanError):
            settings.gpu_defaults(cores * threads, threads, memory, counts)
        return
    d = settings.gpu_defaults(cores * threads, threads, memory, counts)
    # one such job per GPU fits the schedulable CPUs and RealMemory of the node line with the most GPUs
    assert d["def_cpu_per_gpu"] >= 1 and d["def_cpu_per_gpu"] * gpus <= cores * threads
    assert d["def_mem_per_gpu"] >= 1 and d["def_mem_per_gpu"] * gpus <= memory
    # whole cores (CR_Core allocates a core's threads together), and no more than a core short of the share
    assert d["def_cpu_per_gpu"] % threads == 0
    assert (d["def_cpu_per_gpu"] // threads + 1) * gpus > cores
    assert (d["def_mem_per_gpu"] + 1) * gpus > memory


def test_a_dgx_h100_gives_each_gpu_an_eighth() -> None:
    # 2 x 56 cores, 2 threads, 2 TiB (tier3's node); RealMemory = 2 TiB less 5 %
    site, groups = load_inventory("tier3")
    plan = cluster_plan(site, groups)
    s = plan["slurm"]
    node = s["nodes"][0]
    assert s["def_cpu_per_gpu"] == node["cpus"] // 8 == 28
    assert s["def_mem_per_gpu"] == node["real_memory"] // 8
    conf = render_role_template("slurm", "slurm.conf.j2", plan, plan["cluster"]["head"])
    assert f"\nDefMemPerGPU={s['def_mem_per_gpu']}\n" in conf
    assert f"\nDefCpuPerGPU={s['def_cpu_per_gpu']}\n" in conf
    # mutually exclusive with DefMemPerGPU (slurm.conf(5), 22.05): never set
    assert not re.search(r"^DefMemPer(CPU|Node)=", conf, re.MULTILINE)


@pytest.mark.parametrize("tier", TIERS)
def test_every_tier_has_both_within_its_nodes(tier: str) -> None:
    plan = cluster_plan(*load_inventory(tier))
    s = plan["slurm"]
    for node in s["nodes"]:
        gpus = settings.gres_gpu_count(node["gres"])
        assert 1 <= s["def_cpu_per_gpu"] * gpus <= node["cpus"], (tier, node)
        assert 1 <= s["def_mem_per_gpu"] * gpus <= node["real_memory"], (tier, node)


def test_mig_nodes_count_their_mig_devices() -> None:
    # the MIG example: a node with 7 slices per GPU has more GPU devices than a plain one; the per-GPU
    # default is set by the line with the most devices
    site, groups = load_inventory("examples/tier2-mig")
    plan = cluster_plan(site, groups)
    s = plan["slurm"]
    most = max(settings.gres_gpu_count(n["gres"]) for n in s["nodes"])
    assert most > plan["cluster"]["gpus_per_node"]
    assert s["def_mem_per_gpu"] == s["nodes"][0]["real_memory"] // most
    for node in s["nodes"]:
        assert s["def_cpu_per_gpu"] * settings.gres_gpu_count(node["gres"]) <= node["cpus"]


def test_fewer_cores_than_gpus_is_refused_naming_the_field() -> None:
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    site["gpucluster_node"]["cpu_sockets"] = 1
    site["gpucluster_node"]["cores_per_socket"] = 4
    with pytest.raises(PlanError, match=r"cores_per_socket.*DefCpuPerGPU is at least 1"):
        cluster_plan(site, groups)


def test_gres_counts() -> None:
    assert settings.gres_gpu_count("gpu:h100:8") == 8
    assert settings.gres_gpu_count("gpu:1g.10gb:14,gpu:3g.40gb:4,gpu:h100:6") == 24
