"""The Kubernetes path's objects (plugins/plugin_utils/kubernetes/manifests.py) against the plan they come from.

Semantics only (the CRD schemas are test_manifest_schemas.py's): quotas add up to the plan's GPUs,
CPUs and memory, the worker pods carry nccl.conf's values and take whole nodes, the RDMA plugin
sees exactly the compute HCAs, the topology levels follow the fabric plan."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.node import node_resources
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import load_site
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes import common, kuberay, kueue, manifests

GPU = "nvidia.com/gpu"


def _k8s_site(tier: str, **cluster: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    site["gpucluster_cluster"] = {**site["gpucluster_cluster"], "scheduler": "kubernetes", **cluster}
    return site, groups


@pytest.fixture(scope="module")
def plan() -> dict[str, Any]:
    return cluster_plan(*load_inventory("tier4-k8s"))


def _objects(plan: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [m["object"] for m in plan["kubernetes"]["manifests"] if m["object"]["kind"] == kind]


def _quota(obj: dict[str, Any], resource: str, key: str = "nominalQuota") -> Any:
    for group in obj["spec"].get("resourceGroups", []):
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                if r["name"] == resource:
                    return r[key]
    return 0


def _mib(value: Any) -> int:
    text = str(value)
    if text.endswith("Gi"):
        return int(text.removesuffix("Gi")) * 1024
    return int(text.removesuffix("Mi")) if value else 0


def _worker(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]["rayClusterSpec"] if obj["kind"] == "RayJob" else obj["spec"]
    (group,) = spec["workerGroupSpecs"]
    return group


def test_slurm_tiers_have_no_kubernetes_section(tier_inventory: Any) -> None:
    _, site, groups = tier_inventory
    plan = cluster_plan(site, groups)
    assert plan["cluster"]["scheduler"] == "slurm"
    assert "kubernetes" not in plan


def test_the_quotas_add_up_to_what_the_nodes_have(plan: dict[str, Any]) -> None:
    cl = plan["cluster"]
    shape = plan["kubernetes"]["node_shape"]
    holders = _objects(plan, "ClusterQueue") + _objects(plan, "Cohort")
    assert sum(_quota(o, GPU) for o in holders) == cl["gpus_total"] == 64
    assert sum(int(_quota(o, "cpu")) for o in holders) == shape["cpus"] * cl["compute_nodes"]
    assert sum(_mib(_quota(o, "memory")) for o in holders) == shape["memory_mib"] * cl["compute_nodes"]
    # the node's CPUs are the Slurm node line's (2 sockets x 56 cores x 2 threads), not typed twice;
    # the quotas are the Node Allocatable: less kube-reserved and system-reserved (1 CPU each) and, for
    # memory, less the OS reserve, kube-reserved 2 GiB and the 100 MiB hard eviction threshold ([K1])
    assert shape["capacity_cpus"] == 224 and {n["cpus"] for n in plan["slurm"]["nodes"]} == {224}
    assert shape["cpus"] == 222
    assert shape["memory_mib"] == plan["slurm"]["real_memory_mib"] - 2048 - 100
    kubelet = plan["kubernetes"]["kubelet"]
    assert kubelet["kubeReserved"] == {"cpu": "1", "memory": "2048Mi"}
    assert kubelet["evictionHard"] == {"memory.available": "100Mi"}
    reserved = shape["capacity_memory_mib"] - plan["slurm"]["real_memory_mib"]
    assert kubelet["systemReserved"] == {"cpu": "1", "memory": f"{reserved}Mi"}


def test_each_team_gets_its_share_and_its_borrowing_limit(plan: dict[str, Any]) -> None:
    queues = {o["metadata"]["name"]: o for o in _objects(plan, "ClusterQueue")}
    assert list(queues) == [t["name"] for t in plan["tenants"]] == ["research", "production", "interns"]
    for t in plan["tenants"]:
        cq = queues[t["name"]]
        assert _quota(cq, GPU) == t["gpus"]
        assert _quota(cq, GPU, "borrowingLimit") == t["borrowing_limit_gpus"]
        assert cq["spec"]["cohortName"] == "tier4-k8s"
        assert cq["spec"]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": t["name"]}
    assert [(_quota(q, GPU), _quota(q, GPU, "borrowingLimit")) for q in queues.values()] == [(32, 32), (24, 16), (8, 0)]
    local = {(o["metadata"]["namespace"], o["spec"]["clusterQueue"]) for o in _objects(plan, "LocalQueue")}
    assert local == {(t["name"], t["name"]) for t in plan["tenants"]}
    bindings = {o["metadata"]["namespace"]: [s["name"] for s in o["subjects"]] for o in _objects(plan, "RoleBinding")}
    assert bindings == {"research": ["alice", "bob"], "production": ["carol"]}  # interns has no users


def test_without_teams_one_queue_holds_the_whole_cluster() -> None:
    site, groups = _k8s_site("tier3")
    site.pop("gpucluster_tenants", None)
    plan = cluster_plan(site, groups)
    (cq,) = _objects(plan, "ClusterQueue")
    assert _quota(cq, GPU) == plan["cluster"]["gpus_total"] == 32
    assert "cohortName" not in cq["spec"] and not _objects(plan, "Cohort")
    (lq,) = _objects(plan, "LocalQueue")
    assert lq["spec"]["clusterQueue"] == cq["metadata"]["name"]
    assert [n["metadata"]["name"] for n in _objects(plan, "Namespace")] == [lq["metadata"]["namespace"]]


def test_shares_under_100_percent_leave_the_rest_to_the_cohort() -> None:
    site, groups = load_inventory("tier4-k8s")
    site = copy.deepcopy(site)
    site["gpucluster_tenants"] = [{"name": "a", "gpu_share_percent": 30}, {"name": "b", "gpu_share_percent": 20}]
    plan = cluster_plan(site, groups)
    (cohort,) = _objects(plan, "Cohort")
    # largest remainder: 64 x 30 % = 19.2 and 64 x 20 % = 12.8 give 19 and 13 (32 = 64 x 50 % in all)
    assert _quota(cohort, GPU) == 64 - 19 - 13


def test_worker_pods_carry_the_nccl_conf_and_take_whole_nodes(plan: dict[str, Any]) -> None:
    conf = plan["nccl"]["conf"]
    for obj in _objects(plan, "RayJob") + _objects(plan, "RayCluster"):
        group = _worker(obj)
        assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == plan["cluster"]["compute_nodes"]
        pod = group["template"]["spec"]
        (container,) = pod["containers"]
        # nccl.conf's values, but the socket interface is the pod's: the workers are on the pod network
        assert {e["name"]: e["value"] for e in container["env"]} == {**conf, "NCCL_SOCKET_IFNAME": "=eth0"}
        assert conf["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
        limits = container["resources"]["limits"]
        assert limits[GPU] == plan["cluster"]["gpus_per_node"] == int(group["rayStartParams"]["num-gpus"])
        assert limits[plan["kubernetes"]["rdma_resource"]] == 1
        assert container["resources"]["requests"] == limits
        # Pod Security baseline (the team namespace's level): no host network, no added capability, no hostPath
        assert "hostNetwork" not in pod
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
        assert not [v for v in pod["volumes"] if "hostPath" in v]
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        # the same mounts as a Slurm job container's (plan.containers.mounts), the local scratch and /dev/shm
        containers = {m["target"] for m in plan["containers"]["mounts"]}
        assert set(plan["storage"]["paths"].values()) <= containers
        assert containers | {plan["storage"]["local_scratch"], "/dev/shm"} == mounts
        assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == plan["tenants"][0]["name"]


def test_roce_workers_carry_the_gid_index_and_traffic_class() -> None:
    site, groups = _k8s_site("tier2")
    site["gpucluster_fabric"] = {**site["gpucluster_fabric"], "type": "roce", "roce": {"dscp": 26, "gid_index": 3}}
    site["gpucluster_fabric"].pop("infiniband", None)
    site["gpucluster_fabric"].pop("subnet_manager", None)
    plan = cluster_plan(site, groups)
    env = {
        e["name"]: e["value"] for e in _worker(_objects(plan, "RayJob")[0])["template"]["spec"]["containers"][0]["env"]
    }
    assert env == {**plan["nccl"]["conf"], "NCCL_SOCKET_IFNAME": "=eth0"}
    assert env["NCCL_IB_TC"] == str(plan["fabric"]["roce"]["traffic_class"])
    assert env["NCCL_IB_GID_INDEX"] == "3"


def test_the_rdma_plugin_gets_exactly_the_compute_hcas(plan: dict[str, Any]) -> None:
    site, _ = load_inventory("tier4-k8s")
    nics = site["gpucluster_node"]["nics"]
    compute = [n["netdev"] for n in nics if n["purpose"] == "compute"]
    storage = {n["netdev"] for n in nics if n["purpose"] == "storage"}
    (policy,) = _objects(plan, "NicClusterPolicy")
    (config,) = json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])["configList"]
    assert config["selectors"]["ifNames"] == compute and len(compute) == 8
    assert not storage & set(config["selectors"]["ifNames"])
    assert config["resourceName"] == plan["kubernetes"]["rdma_resource"].split("/")[1]


def test_the_gpu_operator_leaves_the_driver_to_the_site_and_exports_dcgm(plan: dict[str, Any]) -> None:
    (policy,) = _objects(plan, "ClusterPolicy")
    spec = policy["spec"]
    assert spec["driver"]["enabled"] is False and spec["dcgmExporter"]["enabled"] is True
    assert spec["mig"]["strategy"] == "none"
    assert common.GPU_TOLERATION in spec["daemonsets"]["tolerations"]


def test_fat_tree_topology_is_block_rack_host(plan: dict[str, Any]) -> None:
    (topology,) = _objects(plan, "Topology")
    levels = [lv["nodeLabel"] for lv in topology["spec"]["levels"]]
    assert levels == ["gpucluster.io/block", "gpucluster.io/rack", "kubernetes.io/hostname"]
    nodes = plan["kubernetes"]["nodes"]
    sus = {h: su["name"] for su in plan["fabric"]["cabling"]["scalable_units"] for h in su["hosts"]}
    assert {h: v["labels"]["gpucluster.io/block"] for h, v in nodes.items()} == sus
    per_rack = plan["power"]["nodes_per_rack"]  # 4: two racks of four
    racks = [v["labels"]["gpucluster.io/rack"] for v in nodes.values()]
    assert racks == ["rack01"] * per_rack + ["rack02"] * per_rack
    flavor, cpu = _objects(plan, "ResourceFlavor")
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    assert cpu["spec"]["nodeLabels"]["gpucluster.io/node-pool"] == "cpu"
    for v in nodes.values():
        assert all(label in v["labels"] for label in levels if label != "kubernetes.io/hostname")
        assert v["labels"]["gpucluster.io/gpu-count"] == "8" and v["labels"]["gpucluster.io/cooling"] == "dlc"
        assert v["taints"] == [common.GPU_TAINT]
        assert all(v["labels"][k] == val for k, val in flavor["spec"]["nodeLabels"].items())


def test_rail_optimized_topology_is_leaf_group_then_host() -> None:
    plan = cluster_plan(*_k8s_site("tier3"))
    assert plan["fabric"]["topology"] == "rail_optimized"
    assert plan["kubernetes"]["topology_levels"] == ["gpucluster.io/leaf-group", "kubernetes.io/hostname"]
    job = _objects(plan, "RayJob")[0]
    annotations = _worker(job)["template"]["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-preferred-topology"] == "gpucluster.io/leaf-group"


def test_every_manifest_has_its_own_path_and_the_kustomization_lists_all_but_the_jobs(plan: dict[str, Any]) -> None:
    paths = [m["path"] for m in plan["kubernetes"]["manifests"]]
    assert len(paths) == len(set(paths))
    templates = [m["path"] for m in plan["kubernetes"]["manifests"] if m["template"]]
    assert sorted(templates) == [
        "kuberay/raycluster-research-tier4-k8s-interactive.yaml",
        "kuberay/rayjob-research-tier4-k8s-train.yaml",
    ]
    # the jobs are submitted by the teams, never applied: everything else is
    assert plan["kubernetes"]["kustomization"]["resources"] == [p for p in paths if p not in templates]
    assert json.loads(json.dumps(plan["kubernetes"])) == plan["kubernetes"]  # plain JSON types only


def test_shares_over_100_percent_name_the_field() -> None:
    site, groups = load_inventory("tier4-k8s")
    site = copy.deepcopy(site)
    site["gpucluster_tenants"][0]["gpu_share_percent"] = 60  # 60 + 37.5 + 12.5 = 110
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    assert err.value.field == "gpucluster_tenants"
    assert "100" in err.value.allowed


def test_a_team_quota_above_the_cluster_names_the_field() -> None:
    tenants = [{"name": "a", "gpu_share_percent": 100, "gpus": 65, "borrowing_limit_gpus": 0}]
    with pytest.raises(PlanError) as err:
        kueue.check_tenants(tenants, 64)
    assert err.value.field == "gpucluster_tenants[0].gpu_share_percent"
    assert "64 GPUs" in err.value.allowed
    two = [dict(tenants[0], gpus=40), {"name": "b", "gpu_share_percent": 50, "gpus": 32}]
    with pytest.raises(PlanError) as err:
        kueue.check_tenants(two, 64)
    assert err.value.field == "gpucluster_tenants" and "found 72" in err.value.allowed


def _fits(request: dict[str, Any], node: dict[str, Any]) -> bool:
    return int(request["cpu"]) <= node["cpu"] and _mib(request["memory"]) <= node["memory_mib"]


@pytest.mark.parametrize("inventory", ["tier4-k8s", "tier2"])
def test_a_whole_cluster_rayjob_fits_its_nodes_head_included(inventory: str) -> None:
    """Issue 26: each worker leaves the kubelet's and the system's reservation and the DaemonSets room on its
    GPU node, and the Ray head runs on the CPU pool (its own selector and flavor), not on a GPU node."""
    site, groups = load_inventory(inventory)
    site = copy.deepcopy(site)
    site["gpucluster_cluster"] = {**site["gpucluster_cluster"], "scheduler": "kubernetes"}
    plan = cluster_plan(site, groups)
    k8s = plan["kubernetes"]
    shape = k8s["node_shape"]
    allocatable = {"cpu": shape["cpus"], "memory_mib": shape["memory_mib"]}
    gpu_flavor, cpu_flavor = _objects(plan, "ResourceFlavor")
    (job,) = _objects(plan, "RayJob")
    spec = job["spec"]["rayClusterSpec"]
    worker = _worker(job)
    (container,) = worker["template"]["spec"]["containers"]
    req = container["resources"]["requests"]
    left = {"cpu": allocatable["cpu"] - int(req["cpu"]), "memory_mib": allocatable["memory_mib"] - _mib(req["memory"])}
    assert left == {"cpu": kuberay.DAEMONSET_CPU, "memory_mib": kuberay.DAEMONSET_MEMORY_MIB}
    assert worker["replicas"] == plan["cluster"]["compute_nodes"]  # one worker per GPU node: the whole cluster
    head = spec["headGroupSpec"]["template"]["spec"]
    (head_container,) = head["containers"]
    # the head selects the CPU pool: no GPU node matches it, and Kueue cannot give it the GPU flavor
    assert head["nodeSelector"]["gpucluster.io/node-pool"] == "cpu"
    assert gpu_flavor["spec"]["nodeLabels"]["gpucluster.io/node-pool"] == "gpu"
    assert all(cpu_flavor["spec"]["nodeLabels"][k] == v for k, v in head["nodeSelector"].items())
    pool = k8s["cpu_pool"]
    assert list(pool) == [plan["cluster"]["head"]]
    assert all(v["labels"]["gpucluster.io/node-pool"] == "gpu" for v in k8s["nodes"].values())
    assert all(k8s["nodes"][h]["labels"]["gpucluster.io/node-pool"] != "cpu" for h in k8s["nodes"])
    # every queue that may admit the job has the head's CPU on the CPU pool flavor
    for cq in _objects(plan, "ClusterQueue"):
        (group,) = cq["spec"]["resourceGroups"]
        heads = next(f for f in group["flavors"] if f["name"] == cpu_flavor["metadata"]["name"])
        quota = {r["name"]: r["nominalQuota"] for r in heads["resources"]}
        assert _fits(
            head_container["resources"]["requests"], {"cpu": quota["cpu"], "memory_mib": _mib(quota["memory"])}
        )
        assert quota[GPU] == 0
    # the head pod's node (the cluster's head) carries no GPU taint and is patched without a spec
    (head_node,) = [o for o in _objects(plan, "Node") if o["metadata"]["name"] == plan["cluster"]["head"]]
    assert "spec" not in head_node


def test_without_a_cpu_pool_the_head_shares_a_gpu_node_and_the_workers_leave_it_room() -> None:
    site, groups = _k8s_site("tier1")
    site.pop("gpucluster_tenants", None)
    plan = cluster_plan(site, groups)
    assert plan["kubernetes"]["cpu_pool"] == {}
    sizes = plan["kubernetes"]["ray"]
    shape = plan["kubernetes"]["node_shape"]
    assert sizes["head"]["node_pool"] == "gpu"
    assert sizes["worker"]["cpu"] + sizes["head"]["cpu"] + kuberay.DAEMONSET_CPU == shape["cpus"]
    head = _objects(plan, "RayJob")[0]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert head["nodeSelector"]["gpucluster.io/node-pool"] == "gpu"


def test_the_node_shape_comes_from_the_node_not_from_the_slurm_section(plan: dict[str, Any]) -> None:
    """The Kubernetes path reads the node's CPUs and memory after the OS reserve from compute/node.py, the
    function Slurm's RealMemory= comes from too: a plan without a Slurm section gives the same shape."""
    raw, groups = load_inventory("tier4-k8s")
    site = load_site(raw, groups)
    node = node_resources(site.node)
    no_slurm = {k: v for k, v in plan.items() if k not in ("slurm", "kubernetes")}
    k8s = manifests.kubernetes_plan(no_slurm, node, site.facility_model.cooling)
    assert k8s == plan["kubernetes"]
    assert k8s["node_shape"]["capacity_memory_mib"] == node.memory_mib
    assert k8s["node_shape"]["memory_mib"] == node.after_os_mib - 2048 - 100
    assert node.after_os_mib == plan["slurm"]["real_memory_mib"]  # one reserve for both schedulers
