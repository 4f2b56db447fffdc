"""Tenant isolation on the Kubernetes path (issue 37): what a team user with ``edit`` in the team's namespace
can and cannot do, as far as the rendered objects decide it, checked offline.

- Pod Security: every team namespace enforces ``baseline`` (audit/warn ``restricted``) at the pinned version;
  tools/k8s/pod_security.py, a checker of the standard's rules (kubeconform cannot run admission), refuses a
  privileged, host-network or hostPath pod at that level and admits the collection's own Ray pods (at
  ``restricted`` too);
- NetworkPolicy: a small evaluator of the rendered policies shows that another namespace's pod and the
  internet are unreachable, and that the namespace's own pods, DNS and the KubeRay operator (to the Ray
  head's dashboard only) are reachable;
- storage: each team's volumes are its own folders, bound to its own claims;
- Ray: token authentication on.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes import common, tenancy


def _load_tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"k8s_tool_{name}", ROOT / "tools" / "k8s" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


ps = _load_tool("pod_security")
vm = _load_tool("validate_manifests")
PSA = "pod-security.kubernetes.io"


@pytest.fixture(scope="module")
def plan() -> dict[str, Any]:
    return cluster_plan(*load_inventory("tier4-k8s"))


def _objects(plan: dict[str, Any], kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
    return [
        m["object"]
        for m in plan["kubernetes"]["manifests"]
        if m["object"]["kind"] == kind and (namespace is None or m["object"]["metadata"].get("namespace") == namespace)
    ]


def _teams(plan: dict[str, Any]) -> list[str]:
    return [t["name"] for t in plan["tenants"]]


def _ray_pods(plan: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    pods = [p for kind in ("RayJob", "RayCluster") for o in _objects(plan, kind) for p in ps.pod_templates(o)]
    assert len(pods) == 4  # head and workers of the RayJob and of the RayCluster
    return pods


# --- Pod Security Admission labels ---------------------------------------------------------------


def test_every_team_namespace_enforces_baseline_and_warns_at_restricted(plan: dict[str, Any]) -> None:
    namespaces = _objects(plan, "Namespace")
    assert (
        sorted(n["metadata"]["name"] for n in namespaces)
        == sorted(_teams(plan))
        == ["interns", "production", "research"]
    )
    for ns in namespaces:
        labels = ns["metadata"]["labels"]
        assert labels[f"{PSA}/enforce"] == "baseline"
        assert labels[f"{PSA}/audit"] == labels[f"{PSA}/warn"] == "restricted"
        for mode in ("enforce", "audit", "warn"):
            assert labels[f"{PSA}/{mode}-version"] == f"v{vm.KUBERNETES_VERSION}"  # the validated release


def test_without_teams_the_training_namespace_is_guarded_too() -> None:
    site, groups = load_inventory("tier4-k8s")
    site = copy.deepcopy(site)
    del site["gpucluster_tenants"]
    plan = cluster_plan(site, groups)
    (ns,) = _objects(plan, "Namespace")
    assert ns["metadata"]["name"] == common.DEFAULT_NAMESPACE
    assert ns["metadata"]["labels"][f"{PSA}/enforce"] == "baseline"
    assert {p["metadata"]["name"] for p in _objects(plan, "NetworkPolicy", "training")} >= {"default-deny"}
    assert ps.check_manifests(vm.objects_in_plan(plan)) == []


def test_the_pinned_version_is_the_release_the_manifests_validate_against() -> None:
    assert f"v{vm.KUBERNETES_VERSION}" == tenancy.POD_SECURITY_VERSION


# --- the baseline checker: a privileged pod is refused, the collection's pods are admitted ----------

PRIVILEGED_POD = {
    "hostNetwork": True,
    "containers": [{"name": "root", "image": "debian:12", "securityContext": {"privileged": True}}],
    "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
}


def test_a_privileged_host_network_hostpath_pod_is_refused_by_the_rendered_level(plan: dict[str, Any]) -> None:
    (ns,) = _objects(plan, "Namespace")[:1]
    level = ps.namespace_level(ns)
    assert level == "baseline"
    assert ps.violations(level, PRIVILEGED_POD) == [
        "Host Namespaces: spec.hostNetwork is true",
        "HostPath Volumes: spec.volumes[0] (host) is a hostPath",
        "Privileged Containers: spec.containers[0].securityContext.privileged is true",
    ]
    # what admission does in a namespace without the label (today's main): nothing refused
    assert ps.violations("privileged", PRIVILEGED_POD) == []


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        ({"hostPID": True}, "Host Namespaces: spec.hostPID"),
        ({"hostIPC": True}, "Host Namespaces: spec.hostIPC"),
        ({"containers": [{"name": "c", "ports": [{"containerPort": 22, "hostPort": 22}]}]}, "Host Ports"),
        ({"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}, "SYS_ADMIN"),
        ({"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}]}, "IPC_LOCK"),
        (
            {"initContainers": [{"name": "i", "securityContext": {"privileged": True}}], "containers": []},
            "initContainers",
        ),
        ({"containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]}, "/proc Mount Type"),
        ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, "Seccomp"),
        ({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}, "Sysctls"),
        ({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}, "SELinux"),
        ({"containers": [{"name": "c", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]}, "AppArmor"),
        ({"securityContext": {"windowsOptions": {"hostProcess": True}}}, "HostProcess"),
    ],
)
def test_each_baseline_rule_refuses_its_escape(spec: dict[str, Any], rule: str) -> None:
    found = ps.violations("baseline", spec)
    assert len(found) == 1 and rule in found[0], found


def test_what_baseline_allows_passes() -> None:
    spec = {
        "securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"}]},
        "containers": [
            {"name": "c", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"]}, "runAsUser": 0}}
        ],
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "x"}}, {"name": "s", "emptyDir": {}}],
    }
    assert ps.violations("baseline", spec) == []
    restricted = ps.violations("restricted", spec)  # root, no seccomp, capabilities not dropped
    assert any("Running as Non-root" in v for v in restricted) and any("Seccomp" in v for v in restricted)


def test_the_collections_own_ray_pods_are_admitted_at_baseline_and_restricted(plan: dict[str, Any]) -> None:
    for path, metadata, spec in _ray_pods(plan):
        assert ps.violations("baseline", spec, metadata) == [], path
        assert ps.violations("restricted", spec, metadata) == [], path
    assert ps.check_manifests(vm.objects_in_plan(plan)) == []


def test_the_ray_workers_of_todays_main_would_be_refused(plan: dict[str, Any]) -> None:
    """The worker as main rendered it (host network, IPC_LOCK, the shared file system as hostPath): baseline
    refuses it, which is why the workers moved to the pod network and the team's claims."""
    (_, _, worker) = next(p for p in _ray_pods(plan) if "workerGroupSpecs" in p[0])
    old = copy.deepcopy(worker)
    old["hostNetwork"] = True
    old["containers"][0]["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    old["volumes"].append({"name": "lustre", "hostPath": {"path": "/lustre/aifs", "type": "Directory"}})
    rules = {v.split(":")[0] for v in ps.violations("baseline", old)}
    assert rules == {"Host Namespaces", "Capabilities", "HostPath Volumes"}


def test_the_validator_fails_an_unlabelled_namespace_and_a_template_its_level_refuses(
    plan: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    def render(items: list[tuple[str, Any]]) -> Path:
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        for path, obj in items:
            (out / path).parent.mkdir(parents=True, exist_ok=True)
            (out / path).write_text(yaml.safe_dump(obj, sort_keys=False))
        return out

    items = vm.objects_in_plan(plan)
    assert vm.main([str(render(items)), "--quiet"]) == 0
    assert "Pod Security: every Namespace enforces baseline" in capsys.readouterr().out
    # today's main: a namespace without the label
    bare = copy.deepcopy(items)
    for _, obj in bare:
        if obj["kind"] == "Namespace" and obj["metadata"]["name"] == "research":
            obj["metadata"]["labels"] = {k: v for k, v in obj["metadata"]["labels"].items() if not k.startswith(PSA)}
    assert vm.main([str(render(bare)), "--quiet"]) == 1
    assert "Namespace 'research' enforces 'privileged'" in capsys.readouterr().out
    # a template with a hostPath in a baseline namespace
    bad = copy.deepcopy(items)
    for _, obj in bad:
        if obj["kind"] == "RayJob":
            obj["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["hostNetwork"] = True
    assert vm.main([str(render(bad)), "--quiet"]) == 1
    assert "breaks Pod Security baseline of 'research': Host Namespaces: spec.hostNetwork is true" in (
        capsys.readouterr().out
    )


# --- NetworkPolicy -------------------------------------------------------------------------------


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # the rendered policies use matchLabels only
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer(peer: dict[str, Any], here: str, ns: str, labels: dict[str, str]) -> bool:
    """Whether a NetworkPolicy peer (from/to entry) of a policy in namespace ``here`` matches a pod."""
    assert "ipBlock" not in peer
    ns_labels = {tenancy.NAMESPACE_NAME_LABEL: ns}  # what the API server guarantees on every namespace
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], ns_labels):
            return False
    elif ns != here:
        return False
    return _selects(peer.get("podSelector") or {}, labels)


def _allows(policies: list[dict[str, Any]], direction: str, pod: tuple, peer: tuple, port: tuple) -> bool:
    """Kubernetes' semantics: a pod no policy selects for a direction is open; else some rule must allow."""
    ns, labels = pod
    key, peers_key, kind = ("ingress", "from", "Ingress") if direction == "in" else ("egress", "to", "Egress")
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == ns
        and kind in p["spec"]["policyTypes"]
        and _selects(p["spec"]["podSelector"], labels)
    ]
    if not selecting:
        return True
    for p in selecting:
        for rule in p["spec"].get(key) or []:
            peers = rule.get(peers_key)
            ok_peer = peers is None or any(_peer(x, ns, peer[0], peer[1]) for x in peers)
            ports = rule.get("ports")
            ok_port = ports is None or any(x["protocol"] == port[0] and x["port"] == port[1] for x in ports)
            if ok_peer and ok_port:
                return True
    return False


def _connects(policies: list[dict[str, Any]], src: tuple, dst: tuple, port: tuple) -> bool:
    return _allows(policies, "out", src, dst, port) and _allows(policies, "in", dst, src, port)


HEAD = {"ray.io/node-type": "head", "ray.io/cluster": "c"}
WORKER = {"ray.io/node-type": "worker", "ray.io/cluster": "c"}
OPERATOR = {"app.kubernetes.io/name": "kuberay-operator"}
DNS = {"k8s-app": "kube-dns"}
INTERNET = ("elsewhere", {})


def test_a_team_reaches_its_own_pods_and_dns_and_nothing_else(plan: dict[str, Any]) -> None:
    policies = _objects(plan, "NetworkPolicy")
    for team in _teams(plan):
        assert {p["metadata"]["name"] for p in _objects(plan, "NetworkPolicy", team)} == {
            "default-deny",
            "allow-dns",
            "allow-same-namespace",
            "allow-kuberay-to-ray-head",
        }
    research, production = ("research", WORKER), ("production", WORKER)
    # NCCL bootstrap and Ray between the workers and the head of one team
    assert _connects(policies, research, ("research", HEAD), ("TCP", 6379))
    assert _connects(policies, research, ("research", {"x": "y"}), ("TCP", 41000))
    assert _connects(policies, ("research", {"job-name": "submitter"}), ("research", HEAD), ("TCP", 8265))
    assert _connects(policies, research, ("kube-system", DNS), ("UDP", 53))
    # another team's head (job API) and workers, the internet, the API server's namespace: denied
    assert not _connects(policies, production, ("research", HEAD), ("TCP", 8265))
    assert not _connects(policies, production, ("research", HEAD), ("TCP", 6379))
    assert not _connects(policies, research, production, ("TCP", 41000))
    assert not _connects(policies, research, INTERNET, ("TCP", 443))
    assert not _connects(policies, research, ("kube-system", {"component": "kube-apiserver"}), ("TCP", 6443))
    assert not _connects(policies, research, ("kube-system", DNS), ("TCP", 8080))
    # a pod outside the teams (unselected by any policy here, so its own egress is open): still refused
    assert not _connects(policies, ("default", {}), ("research", HEAD), ("TCP", 8265))


def test_only_the_kuberay_operator_reaches_the_ray_head_from_outside_and_only_its_dashboard(
    plan: dict[str, Any],
) -> None:
    policies = _objects(plan, "NetworkPolicy")
    operator = (tenancy.KUBERAY_NAMESPACE, OPERATOR)
    assert _connects(policies, operator, ("research", HEAD), ("TCP", 8265))
    assert not _connects(policies, operator, ("research", HEAD), ("TCP", 6379))
    assert not _connects(policies, operator, ("research", WORKER), ("TCP", 8265))
    # a pod that claims the operator's label in another namespace (a team's own) does not pass
    assert not _connects(policies, ("production", OPERATOR), ("research", HEAD), ("TCP", 8265))
    assert not _connects(policies, (tenancy.KUBERAY_NAMESPACE, {}), ("research", HEAD), ("TCP", 8265))


# --- storage and Ray ------------------------------------------------------------------------------


def test_each_team_mounts_only_its_own_folders_through_claims_bound_to_it(plan: dict[str, Any]) -> None:
    volumes = {v["name"] for _, _, spec in _ray_pods(plan) for v in spec.get("volumes", [])}
    pvs = _objects(plan, "PersistentVolume")
    hostpaths: dict[str, str] = {}
    for team in _teams(plan):
        claims = {c["metadata"]["name"]: c for c in _objects(plan, "PersistentVolumeClaim", team)}
        assert set(claims) == volumes - {"dshm"} and len(claims) == 5  # 3 shared paths, scratch, staging
        for name, claim in claims.items():
            (pv,) = [p for p in pvs if p["metadata"]["name"] == claim["spec"]["volumeName"]]
            assert pv["spec"]["claimRef"] == {"namespace": team, "name": name}  # no other namespace can bind it
            assert claim["spec"]["storageClassName"] == pv["spec"]["storageClassName"] == ""
            path = pv["spec"]["hostPath"]["path"]
            assert path.endswith(f"/{team}") and path not in hostpaths
            hostpaths[path] = team
    assert len(hostpaths) == 3 * 5
    mounts = {m["mountPath"] for _, _, spec in _ray_pods(plan) for m in spec["containers"][0].get("volumeMounts", [])}
    assert {f"{p.rsplit('/', 1)[0]}" for p in hostpaths} <= mounts  # mounted where the node has the path


def test_ray_uses_token_authentication_on_its_dashboard_and_job_api(plan: dict[str, Any]) -> None:
    for obj in _objects(plan, "RayJob") + _objects(plan, "RayCluster"):
        spec = obj["spec"].get("rayClusterSpec") or obj["spec"]
        assert spec["authOptions"] == {"mode": "token"}
        major, minor, _ = spec["rayVersion"].split(".")
        assert (int(major), int(minor)) >= (2, 52)  # the first Ray with RAY_AUTH_MODE=token
        assert spec["rayVersion"] in spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
