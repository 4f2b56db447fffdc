"""Every Kubernetes manifest the plan renders is schema-valid, and the validator catches what it should.

The validator is tools/k8s/validate_manifests.py (also `make k8s-validate`): custom resources against
the repository's CRD schema catalog tools/k8s/crd_schemas/ (extracted from the upstream CRD files by
tools/k8s/extract_crd_schemas.py; patterns in RE2 with google-re2),
built-in kinds against kubernetes-validate's strict schemas at the pinned Kubernetes release.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory


def _load_tool(name: str = "validate_manifests") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "k8s" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


vm = _load_tool()
ex = _load_tool("extract_crd_schemas")


def kubernetes_inventories() -> list[str]:
    """The inventories/ folders whose cluster uses the Kubernetes scheduler."""
    names = []
    for inv in sorted((ROOT / "inventories").iterdir()):
        site, _ = load_inventory(inv.name) if (inv / "hosts.yml").is_file() else ({}, {})
        if (site.get("gpucluster_cluster") or {}).get("scheduler") == "kubernetes":
            names.append(inv.name)
    return names


@pytest.fixture(scope="module")
def validator() -> Any:
    return vm.ManifestValidator()


def problems(validator: Any, obj: dict[str, Any]) -> list[str]:
    return [str(p) for p in validator.validate(obj).problems]


# --- hand-written objects, valid, in the shapes the Kubernetes path renders -------------------

META = {"name": "h100-sxm", "labels": {"app.kubernetes.io/managed-by": "gpucluster.tiers"}}

CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "research"},
    "spec": {
        "cohortName": "tier4",
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "h100-sxm",
                        "resources": [
                            {"name": "cpu", "nominalQuota": 448},
                            {"name": "memory", "nominalQuota": "4096Gi"},
                            {"name": "nvidia.com/gpu", "nominalQuota": 32, "borrowingLimit": "16"},
                        ],
                    }
                ],
            }
        ],
    },
}

RESOURCE_FLAVOR = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": META,
    "spec": {
        "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "topologyName": "tier4",
    },
}

LOCAL_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "LocalQueue",
    "metadata": {"name": "research", "namespace": "research"},
    "spec": {"clusterQueue": "research"},
}

TOPOLOGY = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Topology",
    "metadata": {"name": "tier4"},
    "spec": {"levels": [{"nodeLabel": "gpucluster.tiers/leaf"}, {"nodeLabel": "kubernetes.io/hostname"}]},
}

POD_TEMPLATE = {
    "metadata": {"labels": {"app": "ray-worker"}},
    "spec": {
        "containers": [
            {
                "name": "ray-worker",
                "image": "rayproject/ray:2.40.0-gpu",
                "env": [{"name": "NCCL_IB_HCA", "value": "mlx5_0,mlx5_1"}],
                "resources": {
                    "limits": {"nvidia.com/gpu": 8, "rdma/rdma_shared_device_a": 1},
                    "requests": {"cpu": "100", "memory": "1800Gi"},
                },
            }
        ],
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    },
}

RAY_CLUSTER = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "train", "namespace": "research", "labels": {"kueue.x-k8s.io/queue-name": "research"}},
    "spec": {
        "rayVersion": "2.40.0",
        "headGroupSpec": {"rayStartParams": {"num-gpus": "0"}, "template": copy.deepcopy(POD_TEMPLATE)},
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": 8,
                "minReplicas": 8,
                "maxReplicas": 8,
                "rayStartParams": {},
                "template": copy.deepcopy(POD_TEMPLATE),
            }
        ],
    },
}

CLUSTER_POLICY = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "cluster-policy"},
    "spec": {
        "operator": {"defaultRuntime": "containerd"},
        "daemonsets": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
        "driver": {"enabled": False},
        "toolkit": {"enabled": True},
        "devicePlugin": {"enabled": True},
        "dcgm": {"enabled": False},
        "dcgmExporter": {"enabled": True},
        "gfd": {"enabled": True},
        "nodeStatusExporter": {"enabled": False},
        "mig": {"strategy": "single"},
    },
}

NIC_CLUSTER_POLICY = {
    "apiVersion": "mellanox.com/v1alpha1",
    "kind": "NicClusterPolicy",
    "metadata": {"name": "nic-cluster-policy"},
    "spec": {
        "rdmaSharedDevicePlugin": {
            "image": "k8s-rdma-shared-dev-plugin",
            "repository": "nvcr.io/nvidia/mellanox",
            "version": "network-operator-v26.4.1",
            "config": json.dumps(
                {"configList": [{"resourceName": "rdma_shared_device_a", "selectors": {"ifNames": ["ibp24s0"]}}]}
            ),
        }
    },
}

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "research"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
        },
    },
}

CONFIG_MAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "nccl-env", "namespace": "research"},
    "data": {"NCCL_IB_HCA": "mlx5_0,mlx5_1"},
}

ADMISSION_CHECK = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "AdmissionCheck",
    "metadata": {"name": "prov"},
    "spec": {
        "controllerName": "kueue.x-k8s.io/provisioning-request",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prov"},
    },
}

SAMPLES = {
    o["kind"]: o
    for o in (
        CLUSTER_QUEUE,
        RESOURCE_FLAVOR,
        LOCAL_QUEUE,
        TOPOLOGY,
        RAY_CLUSTER,
        CLUSTER_POLICY,
        NIC_CLUSTER_POLICY,
        DEPLOYMENT,
        CONFIG_MAP,
        ADMISSION_CHECK,
    )
}


def changed(obj: dict[str, Any], path: str, value: Any = None, *, delete: bool = False) -> dict[str, Any]:
    """A deep copy of obj with the dotted path (list indexes as numbers) set to value or deleted."""
    out = copy.deepcopy(obj)
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
    node = out
    for k in keys[:-1]:
        node = node[k]
    if delete:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return out


# --- the reference data -----------------------------------------------------------------------


def test_every_crd_version_in_the_reference_folder_is_indexed(validator: Any) -> None:
    catalog = json.loads((validator.crd_dir / "catalog.json").read_text())
    assert len(catalog["crds"]) >= 16
    assert len(validator.crds) == sum(len(c["versions"]) for c in catalog["crds"])
    kinds = {k for _, _, k in validator.crds}
    for kind in ("ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "RayCluster", "RayJob"):
        assert kind in kinds
    assert ("kueue.x-k8s.io", "v1beta2", "ClusterQueue") in validator.crds
    assert ("kueue.x-k8s.io", "v1beta1", "ClusterQueue") in validator.crds
    assert ("nvidia.com", "v1", "ClusterPolicy") in validator.crds
    assert ("mellanox.com", "v1alpha1", "NicClusterPolicy") in validator.crds


def test_the_kubernetes_release_is_pinned_and_shipped_by_kubernetes_validate(validator: Any) -> None:
    kv = pytest.importorskip("kubernetes_validate.utils")
    assert re.fullmatch(r"1\.\d+", vm.KUBERNETES_VERSION)
    assert validator.kubernetes_version == vm.KUBERNETES_VERSION
    assert any(v.startswith(vm.KUBERNETES_VERSION + ".") for v in kv.all_versions())


# --- the plan's manifests ---------------------------------------------------------------------


def test_there_is_a_kubernetes_inventory() -> None:
    assert "tier4-k8s" in kubernetes_inventories()


@pytest.mark.parametrize("inventory", kubernetes_inventories())
def test_every_manifest_of_a_kubernetes_plan_validates(validator: Any, inventory: str) -> None:
    plan = cluster_plan(*load_inventory(inventory))
    items = vm.objects_in_plan(plan)
    kinds = {obj["kind"] for _, obj in items}
    # the four CRD families and the built-in kinds are all there, so every checker ran
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "RayCluster", "ClusterPolicy", "Namespace"} <= kinds
    results = validator.validate_all(items)
    assert [str(r) for r in results if not r.ok] == []
    assert {r.schema.split()[0] for r in results} == {"CRD", "Kubernetes"}


def test_the_manifests_also_validate_at_the_newest_kubernetes_release(validator: Any) -> None:
    """Pinned at the oldest maintained release; the newest one kubernetes-validate knows accepts them too."""
    kv = pytest.importorskip("kubernetes_validate.utils")
    newest = kv.major_minor(kv.latest_version())
    assert newest != vm.KUBERNETES_VERSION
    later = vm.ManifestValidator(kubernetes_version=newest)
    results = later.validate_all(vm.objects_in_plan(cluster_plan(*load_inventory("tier4-k8s"))))
    assert [str(r) for r in results if not r.ok] == []
    assert any(f"Kubernetes {newest}" in r.schema for r in results)


def test_the_rendered_files_validate_through_the_command_line(validator: Any, tmp_path: Path) -> None:
    """What `make plan` writes (one YAML file per manifest, plus kustomization.yaml) passes the CLI."""
    plan = cluster_plan(*load_inventory("tier4-k8s"))
    for path, obj in vm.objects_in_plan(plan):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(yaml.safe_dump(obj, sort_keys=False))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(plan["kubernetes"]["kustomization"]))
    assert vm.main([str(tmp_path), "--quiet"]) == 0
    # a kustomization entry naming no file: exit 1
    kustomization = dict(plan["kubernetes"]["kustomization"])
    kustomization["resources"] = [*kustomization["resources"], "kueue/absent.yaml"]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    assert vm.kustomization_problems([tmp_path]) == [
        f"{tmp_path / 'kustomization.yaml'}: resources entry 'kueue/absent.yaml' does not exist"
    ]
    assert vm.main([str(tmp_path), "--quiet"]) == 1
    # one broken file: exit 1
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(plan["kubernetes"]["kustomization"]))
    (tmp_path / "kueue" / "broken.yaml").write_text(yaml.safe_dump(changed(CLUSTER_QUEUE, "spec.cohortName", 7)))
    assert vm.main([str(tmp_path), "--quiet"]) == 1


def test_a_slurm_plan_has_no_manifests() -> None:
    assert vm.objects_in_plan(cluster_plan(*load_inventory("tier4"))) == []


# --- hand-written objects: valid ones pass ---------------------------------------------------


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_a_valid_sample_passes(validator: Any, kind: str) -> None:
    assert problems(validator, SAMPLES[kind]) == []


@pytest.mark.parametrize("quota", [64, "64", "1.5Ti", "500m"])
def test_int_or_string_quantities_accept_numbers_and_quantity_strings(validator: Any, quota: Any) -> None:
    obj = changed(CLUSTER_QUEUE, "spec.resourceGroups.0.flavors.0.resources.2.nominalQuota", quota)
    assert problems(validator, obj) == []


# --- and the validator catches errors ---------------------------------------------------------


def test_a_cluster_queue_field_of_the_wrong_type(validator: Any) -> None:
    obj = changed(CLUSTER_QUEUE, "spec.resourceGroups.0.coveredResources", "nvidia.com/gpu")
    assert problems(validator, obj) == [
        "$.spec.resourceGroups[0].coveredResources: 'nvidia.com/gpu' is not of type 'array'"
    ]
    obj = changed(CLUSTER_QUEUE, "spec.resourceGroups.0.flavors.0.resources.2.nominalQuota", True)
    assert problems(validator, obj) == [
        "$.spec.resourceGroups[0].flavors[0].resources[2].nominalQuota: True is not of type 'integer', 'string'"
    ]
    obj = changed(CLUSTER_QUEUE, "spec.resourceGroups.0.flavors.0.resources.2.nominalQuota", "8 GPUs")
    [msg] = problems(validator, obj)
    assert msg.startswith("$.spec.resourceGroups[0].flavors[0].resources[2].nominalQuota: '8 GPUs' does not match")


def test_an_unknown_field_in_a_closed_crd_object(validator: Any) -> None:
    obj = changed(RESOURCE_FLAVOR, "spec.nodeLabel", {"a": "b"})  # the field is nodeLabels
    assert problems(validator, obj) == ["$.spec: Additional properties are not allowed ('nodeLabel' was unexpected)"]
    obj = changed(CLUSTER_QUEUE, "spec.resourceGroups.0.flavors.0.resources.2.quota", 8)
    assert problems(validator, obj) == [
        "$.spec.resourceGroups[0].flavors[0].resources[2]: "
        "Additional properties are not allowed ('quota' was unexpected)"
    ]


def test_unknown_metadata_fields_of_a_custom_resource_are_caught(validator: Any) -> None:
    obj = changed(LOCAL_QUEUE, "metadata.label", {"team": "research"})
    assert problems(validator, obj) == ["$.metadata: Additional properties are not allowed ('label' was unexpected)"]


def test_a_ray_worker_group_without_its_required_fields(validator: Any) -> None:
    obj = changed(RAY_CLUSTER, "spec.workerGroupSpecs.0.groupName", delete=True)
    obj = changed(obj, "spec.workerGroupSpecs.0.template", delete=True)
    assert problems(validator, obj) == [
        "$.spec.workerGroupSpecs[0]: 'groupName' is a required property",
        "$.spec.workerGroupSpecs[0]: 'template' is a required property",
    ]
    # a container of the embedded pod template is checked too (its schema is in the CRD)
    obj = changed(RAY_CLUSTER, "spec.workerGroupSpecs.0.template.spec.containers.0.name", delete=True)
    assert problems(validator, obj) == [
        "$.spec.workerGroupSpecs[0].template.spec.containers[0]: 'name' is a required property"
    ]


def test_core_kinds_with_a_bad_field(validator: Any) -> None:
    assert problems(validator, changed(DEPLOYMENT, "spec.replicas", "two")) == [
        "$.spec.replicas: 'two' is not of type 'integer', 'null'"
    ]
    assert problems(validator, changed(DEPLOYMENT, "spec.template.spec.containers.0.imagePullPolicy", 3)) == [
        "$.spec.template.spec.containers[0].imagePullPolicy: 3 is not of type 'string', 'null'"
    ]
    # strict: an unknown field is an error, as kubectl's strict field validation makes it
    assert problems(validator, changed(CONFIG_MAP, "datas", {"a": "b"})) == [
        "$: Additional properties are not allowed ('datas' was unexpected)"
    ]
    assert problems(validator, changed(CONFIG_MAP, "data.NCCL_IB_GID_INDEX", 3)) == [
        "$.data.NCCL_IB_GID_INDEX: 3 is not of type 'string', 'null'"
    ]


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("kueue.x-k8s.io/v1beta2", "Workload"),  # a Kueue kind the reference folder leaves out
        ("kueue.x-k8s.io/v1alpha1", "ClusterQueue"),  # a version the CRD does not serve
        ("example.com/v1", "Widget"),
        ("v1", "Widget"),
        ("apps.example.com/v1", "Deployment"),  # not Kubernetes' apps group
    ],
)
def test_a_kind_without_a_schema_is_an_error(validator: Any, api_version: str, kind: str) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": {}}
    [msg] = problems(validator, obj)
    assert msg.startswith(f"$: no schema for {kind} {api_version}")
    if kind == "ClusterQueue":
        assert "kueue.x-k8s.io/v1beta2" in msg  # says which versions exist


def test_names_and_labels_are_checked_as_the_api_server_does(validator: Any) -> None:
    assert problems(validator, changed(RESOURCE_FLAVOR, "metadata.name", "H100 SXM")) == [
        "$.metadata.name: 'H100 SXM': not a DNS-1123 subdomain (<= 253, [a-z0-9-.])"
    ]
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team.a"}}
    assert problems(validator, ns) == [
        "$.metadata.name: 'team.a': a Namespace name is a DNS-1123 label (<= 63, [a-z0-9-])"
    ]
    bad_value = changed(RESOURCE_FLAVOR, "metadata.labels", {"gpucluster.tiers/gpu": "H100 SXM"})
    assert [p.split(": ")[0] for p in problems(validator, bad_value)] == ["$.metadata.labels['gpucluster.tiers/gpu']"]
    # labels of embedded pod templates and node selectors too
    bad_selector = changed(RAY_CLUSTER, "spec.workerGroupSpecs.0.template.spec.nodeSelector", {"a/b/c": "x"})
    [msg] = problems(validator, bad_selector)
    assert msg.startswith("$.spec.workerGroupSpecs[0].template.spec.nodeSelector['a/b/c']")
    assert problems(validator, changed(LOCAL_QUEUE, "metadata.name", delete=True)) == [
        "$.metadata.name: required: every rendered object is named"
    ]


def test_the_re2_only_pattern_of_admission_checks_is_enforced(validator: Any) -> None:
    """Kueue's AdmissionCheck parameters.kind pattern `^(?i)[a-z]...` is RE2, refused by Python re as is."""
    assert problems(validator, ADMISSION_CHECK) == []  # "ProvisioningRequestConfig": upper case, (?i)
    obj = changed(ADMISSION_CHECK, "spec.parameters.kind", "1-Config")
    [msg] = problems(validator, obj)
    assert msg.startswith("$.spec.parameters.kind: '1-Config' does not match '^(?i)[a-z]")


def test_re2_patterns_are_re2_not_python() -> None:
    """Patterns are compiled by google-re2 (Go's syntax), never translated: what Python re refuses or reads
    otherwise (a flag group after ^, [[:alpha:]]) means what it means to the API server."""
    assert vm._re2_search("^(?i)[a-z]+$", "Kueue")
    assert vm._re2_search("^[[:alpha:]]+$", "Kueue")
    assert not vm._re2_search("^[[:alpha:]]+$", "a:b")  # Python re would read [[:alpha:]] as characters
    with pytest.raises(jsonschema.SchemaError):
        vm.CrdValidator.check_schema({"pattern": "^a(b$"}, format_checker=vm._RE2_FORMATS)


def test_the_catalog_is_in_the_repository_and_names_its_sources() -> None:
    """make k8s-validate needs nothing outside the repository: the default catalog is in it, and every
    CRD in it names its upstream project, release tag, commit and file hash."""
    assert vm.crd_dir() == ROOT / "tools" / "k8s" / "crd_schemas" or os.environ.get(vm.CRD_DIR_ENV)
    catalog = json.loads((ROOT / "tools" / "k8s" / "crd_schemas" / "catalog.json").read_text())
    assert len(catalog["crds"]) == 16
    for crd in catalog["crds"]:
        up = crd["upstream"]
        assert up["repository"].startswith("https://github.com/"), crd["kind"]
        assert re.fullmatch(r"v\d+\.\d+\.\d+", up["tag"]) and re.fullmatch(r"[0-9a-f]{40}", up["commit"])
        assert re.fullmatch(r"[0-9a-f]{64}", up["sha256"])
        for ver in crd["versions"]:
            assert ver["schema"] == f"{crd['group']}/{crd['kind'].lower()}_{ver['version']}.json"


def test_the_catalog_is_the_extraction_of_the_upstream_files() -> None:
    """Where the upstream CRD files are at hand (../shared/reference/k8s-crds), the catalog is exactly
    what tools/k8s/extract_crd_schemas.py makes of them (SHA-256 of each upstream file included)."""
    # a clone has shared/ beside it; a worktree one level further up
    found = [p / "shared" / "reference" / "k8s-crds" for p in (ROOT.parent, ROOT.parent.parent)]
    upstream = next((p for p in found if p.is_dir()), None)
    if upstream is None:
        pytest.skip(f"{found[0]} absent: nothing to compare the catalog with")
    assert ex.main(["--crds", str(upstream), "--check"]) == 0


def test_openapi_extensions_become_json_schema() -> None:
    schema = ex.openapi_to_jsonschema(
        {
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "properties": {
                        "size": {
                            "x-kubernetes-int-or-string": True,
                            "anyOf": [{"type": "integer"}, {"type": "string"}],
                        },
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}},
                        "map": {"type": "object", "additionalProperties": {"type": "string"}},
                        "when": {"type": "string", "nullable": True},
                        "pod": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {}},
                        "bare": {"type": "object"},
                        "either": {"anyOf": [{"properties": {"a": {"type": "string"}}}]},
                    },
                    "x-kubernetes-validations": [{"rule": "self.size > 0"}],
                },
            },
        }
    )
    spec = schema["properties"]["spec"]
    assert spec["additionalProperties"] is False
    assert "x-kubernetes-validations" not in spec
    assert spec["properties"]["size"]["type"] == ["integer", "string"]
    assert "additionalProperties" not in spec["properties"]["free"]
    assert spec["properties"]["map"]["additionalProperties"] == {"type": "string"}
    assert spec["properties"]["when"]["type"] == ["string", "null"]
    assert set(spec["properties"]["pod"]["properties"]) == {"apiVersion", "kind", "metadata"}
    assert spec["properties"]["pod"]["additionalProperties"] is False
    assert spec["properties"]["bare"] == {"type": "object", "additionalProperties": False}  # pruned to {}
    assert "additionalProperties" not in spec["properties"]["either"]["anyOf"][0]
    assert schema["properties"]["metadata"] == {"type": "object"}  # checked against ObjectMeta separately


def test_a_missing_catalog_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=vm.CRD_DIR_ENV):
        vm.load_crds(tmp_path / "absent")


def test_the_cli_finds_the_plan_folder_from_the_inventory(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert vm.cluster_name(ROOT / "inventories" / "tier4-k8s") == "tier4-k8s"
    assert vm.main(["--inventory", str(ROOT / "inventories" / "tier4-k8s"), "--plan-root", str(tmp_path)]) == 2
    assert f"{tmp_path / 'tier4-k8s' / 'kubernetes'} does not exist" in capsys.readouterr().err
    # a Slurm inventory has nothing to check: said so, not "valid"
    assert vm.main(["--inventory", str(ROOT / "inventories" / "tier3"), "--plan-root", str(tmp_path)]) == 2
    assert "gpucluster_cluster.scheduler is 'slurm'" in capsys.readouterr().err


def test_make_k8s_validate_renders_the_plan_then_checks_its_folder() -> None:
    run = subprocess.run(
        ["make", "-n", "k8s-validate", "INVENTORY=inventories/tier4-k8s", "K8S_CRDS=/crds"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    plan = next(i for i, line in enumerate(lines) if "playbooks/plan.yml" in line)
    check = next(i for i, line in enumerate(lines) if "tools/k8s/validate_manifests.py" in line)
    assert plan < check
    assert "--inventory inventories/tier4-k8s" in lines[check]
    assert "--crds /crds" in lines[check]


def test_an_unsupported_kubernetes_release_is_refused(
    validator: Any, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(CONFIG_MAP))
    assert vm.main([str(tmp_path / "cm.yaml"), "--kubernetes-version", "1.20"]) == 2
    assert "Kubernetes 1.20: kubernetes-validate has no schemas for it" in capsys.readouterr().err
