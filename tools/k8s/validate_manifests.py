#!/usr/bin/env python3
"""Check rendered Kubernetes manifests against their schemas, without a cluster.

Every object must have a schema; an object whose kind has none is an error, not a pass:

- custom resources (Kueue, KubeRay, GPU Operator, Network Operator, ...): the JSON Schema of the
  matching version in the repository's catalog ``tools/k8s/crd_schemas/`` (kubeconform's layout
  ``{group}/{kind}_{version}.json``; ``catalog.json`` names each upstream file's project, tag,
  commit and SHA-256; tools/k8s/extract_crd_schemas.py writes it from the upstream CRD files;
  ``--crds`` or ``GPUCLUSTER_K8S_CRDS`` point to another catalog), checked with ``jsonschema``'s
  Draft 4 validator whose ``pattern`` and ``format: regex`` are Go RE2 (google-re2), as the API
  server reads them;
- built-in kinds (``v1``, ``apps/v1``, ``*.k8s.io/*``): the strict schemas (unknown fields are
  errors) shipped in the ``kubernetes-validate`` package, for the pinned Kubernetes release
  :data:`KUBERNETES_VERSION`;
- every object's ``metadata`` (custom resources included): the strict ObjectMeta schema of that
  release, the name syntax and the label syntax the API server enforces.

Pod Security (tools/k8s/pod_security.py, what Pod Security Admission would do): every Namespace enforces
``baseline`` or ``restricted`` (``pod-security.kubernetes.io/enforce``), and every pod template of an
object in one of the namespaces (the Ray templates' head and workers) satisfies that namespace's level.

Not checked (an API server would): CEL rules (``x-kubernetes-validations``), admission webhooks,
list-map key uniqueness, defaults. Passing means "schema-valid for that API version" and "admitted by
the namespace's Pod Security level".

Usage::

    validate_manifests.py build/plan/tier4-k8s/kubernetes        # files or folders of *.yaml
    validate_manifests.py --inventory inventories/tier4-k8s       # build/plan/<its cluster name>/kubernetes
    validate_manifests.py --plan build/plan/tier4-k8s/plan.json   # plan["kubernetes"]["manifests"]

Exit status: 0 all valid, 1 an object is invalid or has no schema, 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from referencing import Registry, Resource

try:
    from kubernetes_validate import utils as _kv
except ImportError:  # pragma: no cover - a declared dependency (pyproject.toml); named in the error below
    _kv = None
try:
    import re2  # google-re2: Go RE2 semantics for CRD patterns
except ImportError:  # pragma: no cover - a declared dependency (pyproject.toml); named in the error below
    re2 = None

ROOT = Path(__file__).resolve().parents[2]


def _sibling(name: str) -> Any:
    """A module of this folder, whether this file runs as a script or is loaded by path (the tests)."""
    spec = importlib.util.spec_from_file_location(f"gpucluster_k8s_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pod_security = _sibling("pod_security")
#: the CRD schemas the collection targets, in the repository (tools/k8s/extract_crd_schemas.py)
CATALOG = ROOT / "tools" / "k8s" / "crd_schemas"

#: The Kubernetes release the built-in kinds and ObjectMeta are checked against: the oldest minor
#: release upstream still maintains (it keeps the three newest minors: 1.35, 1.36, 1.37 at the time
#: of writing; https://kubernetes.io/releases/ "Release history" and
#: https://kubernetes.io/releases/version-skew-policy/#supported-versions). A field accepted there
#: is accepted by every supported cluster. Override with --kubernetes-version or
#: GPUCLUSTER_K8S_VERSION; kubernetes-validate 1.37.0 ships schemas up to 1.37.
KUBERNETES_VERSION = "1.35"

CRD_DIR_ENV = "GPUCLUSTER_K8S_CRDS"
VERSION_ENV = "GPUCLUSTER_K8S_VERSION"

#: kustomize's own files are not API objects (https://kubectl.docs.kubernetes.io/references/kustomize/kustomization/)
KUSTOMIZE_FILES = frozenset({"kustomization.yaml", "kustomization.yml", "Kustomization"})

_OBJECT_META = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# Names and labels, as k8s.io/apimachinery/pkg/util/validation checks them
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/ and
# https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set):
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"^{_DNS1123_LABEL}$")  # <= 63 characters
DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")  # <= 253 characters
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")  # <= 63 characters
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")  # <= 63 characters
#: built-in kinds whose names must be DNS-1123 labels, not subdomains (the names page above)
LABEL_NAMED_KINDS = frozenset({("", "Namespace"), ("", "Service")})


@dataclass(frozen=True)
class Problem:
    """One reason an object is not valid: where in it (a JSON path) and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class Result:
    """The outcome for one object: what it is, which schema checked it and what is wrong."""

    source: str
    api_version: str
    kind: str
    name: str
    schema: str = ""
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        head = f"{self.source}: {self.kind} {self.api_version} {self.name!r}"
        if self.ok:
            return f"OK    {head} ({self.schema})"
        return "\n".join([f"ERROR {head} ({self.schema or 'no schema'})"] + [f"      {p}" for p in self.problems])


# ---------------------------------------------------------------------------------------------
# Schemas: the repository's CRD catalog and kubernetes-validate
# ---------------------------------------------------------------------------------------------


def _re2_search(pattern: str, text: str) -> bool:
    """``pattern`` (Go RE2 syntax, as the API server compiles it) found in text, with google-re2."""
    return _compile_re2(pattern).search(text) is not None


@cache
def _compile_re2(pattern: str) -> Any:
    if re2 is None:
        raise RuntimeError("google-re2 is not installed: run `make setup` (pyproject.toml pins it)")
    options = re2.Options()
    options.log_errors = False  # a bad pattern is reported as a SchemaError, not logged to stderr
    return re2.compile(pattern, options)


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    """Draft 4 ``pattern`` with RE2 semantics (jsonschema's own uses Python ``re``)."""
    if validator.is_type(instance, "string") and not _re2_search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_RE2_FORMATS = jsonschema.FormatChecker(formats=())


@_RE2_FORMATS.checks("regex", raises=Exception)
def _is_re2(text: object) -> bool:
    """``format: regex`` (the metaschema's check of every ``pattern``): a valid RE2 expression."""
    return not isinstance(text, str) or _compile_re2(text) is not None


#: Draft 4 with RE2 patterns: what the API server accepts for a CRD's ``pattern``
CrdValidator = jsonschema.validators.extend(
    jsonschema.Draft4Validator, validators={"pattern": _pattern}, format_checker=_RE2_FORMATS
)


def crd_dir(explicit: str | Path | None = None) -> Path:
    """The CRD schema catalog: explicit, else $GPUCLUSTER_K8S_CRDS, else the repository's tools/k8s/crd_schemas."""
    if explicit:
        return Path(explicit)
    if os.environ.get(CRD_DIR_ENV):
        return Path(os.environ[CRD_DIR_ENV])
    return CATALOG


@dataclass(frozen=True)
class CrdVersion:
    """One served version of a CRD: its schema and where it came from."""

    group: str
    version: str
    kind: str
    source: str  # the upstream file and release (catalog.json)
    schema: dict[str, Any]


@cache
def load_crds(directory: Path) -> dict[tuple[str, str, str], CrdVersion]:
    """(group, version, kind) -> CrdVersion for every version catalog.json lists in directory."""
    index_file = directory / "catalog.json"
    if not index_file.is_file():
        raise FileNotFoundError(
            f"CRD schema catalog {index_file} not found (pass --crds or set {CRD_DIR_ENV} to a folder "
            "written by tools/k8s/extract_crd_schemas.py; the repository's is tools/k8s/crd_schemas)"
        )
    index: dict[tuple[str, str, str], CrdVersion] = {}
    for crd in json.loads(index_file.read_text())["crds"]:
        upstream = crd["upstream"]
        source = f"{upstream['repository'].rsplit('/', 1)[-1]} {upstream['tag']} {upstream['path'].rsplit('/', 1)[-1]}"
        for ver in crd["versions"]:
            schema = json.loads((directory / ver["schema"]).read_text())
            CrdValidator.check_schema(schema, format_checker=_RE2_FORMATS)
            key = (crd["group"], ver["version"], crd["kind"])
            index[key] = CrdVersion(*key, source=source, schema=schema)
    return index


def _require_kv() -> Any:
    if _kv is None:
        raise RuntimeError("kubernetes-validate is not installed: run `make setup` (pyproject.toml pins it)")
    return _kv


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


@cache
def _core_registry(version: str) -> tuple[str, Registry]:
    """(schema folder, registry with _definitions.json) of kubernetes-validate for a release."""
    kv = _require_kv()
    wanted = kv.major_minor(version)
    known = [v for v in kv.all_versions() if kv.major_minor(v) == wanted]
    if not known:
        raise ValueError(
            f"Kubernetes {version}: kubernetes-validate has no schemas for it "
            f"(it has {', '.join(sorted({kv.major_minor(v) for v in kv.all_versions()}, key=_release_key))})"
        )
    folder = f"kubernetes-json-schema/v{known[-1]}-local-strict"
    definitions = kv.schema_contents(f"{folder}/_definitions.json", version)
    return folder, Resource.from_contents(definitions) @ Registry()


def is_builtin_group(group: str) -> bool:
    """Kubernetes' own API groups: the core group, unqualified ones (apps, batch, ...) and *.k8s.io.

    https://kubernetes.io/docs/reference/using-api/#api-groups
    """
    return "." not in group or group.endswith(".k8s.io")


@cache
def core_schema(group: str, version: str, kind: str, k8s_version: str) -> dict[str, Any] | None:
    """kubernetes-validate's strict schema of a built-in kind at a Kubernetes release, or None."""
    kv = _require_kv()
    folder, _ = _core_registry(k8s_version)
    short = group.split(".")[0] + "-" if group else ""
    try:
        return kv.schema_contents(f"{folder}/{kind.lower()}-{short}{version}.json", k8s_version)
    except FileNotFoundError:
        return None


def _errors(validator: jsonschema.protocols.Validator, instance: Any, prefix: str = "$") -> list[Problem]:
    problems = []
    for err in validator.iter_errors(instance):
        path = prefix + err.json_path[1:]
        problems.append(Problem(path, err.message))
    return sorted(problems, key=lambda p: (p.path, p.message))


# ---------------------------------------------------------------------------------------------
# Checking objects
# ---------------------------------------------------------------------------------------------


def _label_problems(labels: Any, path: str) -> list[Problem]:
    """Label keys ([prefix/]name) and values as the API server checks them."""
    if not isinstance(labels, dict):
        return []  # the schema reports the type
    problems = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/") if "/" in key else ("", "", key)
        if "/" in key and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
            problems.append(Problem(f"{path}[{key!r}]", f"label key prefix {prefix!r} is not a DNS-1123 subdomain"))
        if len(name) > 63 or not LABEL_NAME.match(name):
            problems.append(
                Problem(
                    f"{path}[{key!r}]",
                    f"label key name {name!r}: at most 63 of [A-Za-z0-9-_.], beginning and ending alphanumeric",
                )
            )
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            problems.append(
                Problem(
                    f"{path}[{key!r}]",
                    f"label value {value!r}: a string of at most 63 of [A-Za-z0-9-_.], "
                    "empty or beginning and ending alphanumeric",
                )
            )
    return problems


def _nested_label_problems(obj: Any, path: str) -> Iterator[Problem]:
    """Labels of embedded metadata (pod templates, ...) and node selectors anywhere in an object."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            sub = f"{path}.{key}"
            if key == "metadata" and isinstance(value, dict) and path != "$":
                yield from _label_problems(value.get("labels"), f"{sub}.labels")
            elif key == "nodeSelector" and isinstance(value, dict):
                yield from _label_problems(value, sub)
            yield from _nested_label_problems(value, sub)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _nested_label_problems(value, f"{path}[{i}]")


def _metadata_problems(obj: dict[str, Any], group: str, kind: str, k8s_version: str, schema: bool) -> list[Problem]:
    """metadata: the name and label syntax; with schema, also the strict ObjectMeta schema (CRDs)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [Problem("$.metadata", "required: an object with at least a name")]
    problems = []
    if schema:
        _, registry = _core_registry(k8s_version)
        meta_validator = jsonschema.Draft202012Validator({"$ref": _OBJECT_META}, registry=registry)
        problems += _errors(meta_validator, meta, "$.metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        problems.append(Problem("$.metadata.name", "required: every rendered object is named"))
    elif (group, kind) in LABEL_NAMED_KINDS:
        if len(name) > 63 or not DNS1123_LABEL.match(name):
            problems.append(
                Problem("$.metadata.name", f"{name!r}: a {kind} name is a DNS-1123 label (<= 63, [a-z0-9-])")
            )
    elif len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        problems.append(Problem("$.metadata.name", f"{name!r}: not a DNS-1123 subdomain (<= 253, [a-z0-9-.])"))
    namespace = meta.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not DNS1123_LABEL.match(namespace)):
        problems.append(Problem("$.metadata.namespace", f"{namespace!r}: not a DNS-1123 label"))
    problems += _label_problems(meta.get("labels"), "$.metadata.labels")
    return problems


class ManifestValidator:
    """Validates Kubernetes objects: CRDs from the schema catalog, built-in kinds from kubernetes-validate."""

    def __init__(self, crds: str | Path | None = None, kubernetes_version: str | None = None) -> None:
        self.crd_dir = crd_dir(crds)
        self.kubernetes_version = kubernetes_version or os.environ.get(VERSION_ENV) or KUBERNETES_VERSION
        _core_registry(self.kubernetes_version)  # fail early on an unsupported release
        self.crds = load_crds(self.crd_dir.resolve())

    def validate(self, obj: Any, source: str = "<object>") -> Result:
        """Every problem of one object (an empty list: valid)."""
        if not isinstance(obj, dict):
            return Result(source, "", "", "", problems=[Problem("$", f"not a mapping: {type(obj).__name__}")])
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        name = str((obj.get("metadata") or {}).get("name", "")) if isinstance(obj.get("metadata"), dict) else ""
        result = Result(source, str(api_version or ""), str(kind or ""), name)
        if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
            result.problems.append(Problem("$", "apiVersion and kind are required strings"))
            return result
        group, _, version = api_version.rpartition("/")

        crd = self.crds.get((group, version, kind))
        if crd is not None:
            result.schema = f"CRD {crd.source} {version}"
            validator = CrdValidator(crd.schema)
            result.problems += _errors(validator, obj)
        elif is_builtin_group(group) and (schema := core_schema(group, version, kind, self.kubernetes_version)):
            result.schema = f"Kubernetes {self.kubernetes_version} (kubernetes-validate, strict)"
            _, registry = _core_registry(self.kubernetes_version)
            result.problems += _errors(jsonschema.Draft202012Validator(schema, registry=registry), obj)
        else:
            served = sorted(f"{g}/{v}" for g, v, k in self.crds if k == kind)
            hint = f"; {kind} is known as {', '.join(served)}" if served else ""
            result.problems.append(
                Problem(
                    "$",
                    f"no schema for {kind} {api_version}: neither a CRD version in {self.crd_dir} nor a built-in "
                    f"kind of Kubernetes {self.kubernetes_version}{hint}",
                )
            )
            return result
        result.problems += _metadata_problems(obj, group, kind, self.kubernetes_version, schema=crd is not None)
        result.problems += _nested_label_problems({k: v for k, v in obj.items() if k != "metadata"}, "$")
        return result

    def validate_all(self, items: Iterable[tuple[str, Any]]) -> list[Result]:
        return [self.validate(obj, source) for source, obj in items]


# ---------------------------------------------------------------------------------------------
# Inputs: files, folders, a plan
# ---------------------------------------------------------------------------------------------


def objects_in_files(paths: Iterable[Path]) -> Iterator[tuple[str, Any]]:
    """(file[#document], object) for every YAML document in the files and folders (recursively)."""
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml")) if path.is_dir() else [path]
        for f in files:
            if f.name in KUSTOMIZE_FILES:
                continue
            docs = [d for d in yaml.safe_load_all(f.read_text()) if d is not None]
            for i, doc in enumerate(docs):
                yield (f"{f}#{i}" if len(docs) > 1 else str(f)), doc


def kustomization_problems(paths: Iterable[Path]) -> list[str]:
    """Entries of a kustomization's ``resources`` that name no file or folder beside it (kustomize would fail)."""
    out = []
    for path in paths:
        files = [p for p in path.rglob("*") if p.name in KUSTOMIZE_FILES] if path.is_dir() else []
        for f in sorted(files):
            doc = yaml.safe_load(f.read_text()) or {}
            for entry in doc.get("resources") or []:
                if "://" not in str(entry) and not (f.parent / str(entry)).exists():
                    out.append(f"{f}: resources entry {entry!r} does not exist")
    return out


def objects_in_plan(plan: dict[str, Any]) -> list[tuple[str, Any]]:
    """(path, object) of plan["kubernetes"]["manifests"] (empty for a Slurm plan)."""
    return [(m["path"], m["object"]) for m in (plan.get("kubernetes") or {}).get("manifests", [])]


def cluster_name(inventory: Path) -> str:
    """gpucluster_cluster.name of a Kubernetes inventory (group_vars/all: a file or a folder of files).

    Raises ValueError when the inventory names no cluster or its scheduler is not kubernetes.
    """
    files = [inventory / "group_vars" / "all.yml", *sorted((inventory / "group_vars" / "all").glob("*.yml"))]
    cluster: dict[str, Any] = {}
    for f in files:
        if f.is_file():
            cluster.update((yaml.safe_load(f.read_text()) or {}).get("gpucluster_cluster") or {})
    if not cluster.get("name"):
        raise ValueError(f"{inventory}: no gpucluster_cluster.name in group_vars/all")
    scheduler = cluster.get("scheduler", "slurm")
    if scheduler != "kubernetes":
        raise ValueError(
            f"{inventory}: gpucluster_cluster.scheduler is {scheduler!r}, so its plan has no Kubernetes "
            "manifests (give an inventory with scheduler: kubernetes, e.g. inventories/tier4-k8s)"
        )
    return str(cluster["name"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="manifest files or folders (*.yaml, multi-document)")
    parser.add_argument("--inventory", type=Path, help="validate build/plan/<cluster name>/kubernetes of it")
    parser.add_argument("--plan-root", type=Path, default=Path("build/plan"), help="with --inventory (build/plan)")
    parser.add_argument("--plan", type=Path, help="a plan.json: validate its kubernetes.manifests")
    parser.add_argument("--crds", help=f"CRD schema catalog (${CRD_DIR_ENV}; default tools/k8s/crd_schemas)")
    parser.add_argument("--kubernetes-version", help=f"built-in kinds' release (${VERSION_ENV}; {KUBERNETES_VERSION})")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the invalid objects")
    args = parser.parse_args(argv)

    items: list[tuple[str, Any]] = []
    try:
        paths = list(args.paths)
        if args.inventory:
            paths.append(args.plan_root / cluster_name(args.inventory) / "kubernetes")
        for p in paths:
            if not p.exists():
                raise FileNotFoundError(f"{p} does not exist (run `make plan` for a kubernetes inventory first)")
        items += objects_in_files(paths)
        if args.plan:
            items += objects_in_plan(json.loads(args.plan.read_text()))
        if not items:
            raise ValueError("no manifests found: give files, folders, --inventory or --plan")
        validator = ManifestValidator(args.crds, args.kubernetes_version)
    except (OSError, ValueError, RuntimeError, yaml.YAMLError) as exc:
        print(f"validate_manifests: {exc}", file=sys.stderr)
        return 2

    results = validator.validate_all(items)
    bad = [r for r in results if not r.ok]
    for r in results:
        if not r.ok or not args.quiet:
            print(r)
    dangling = kustomization_problems(paths)
    for line in dangling:
        print(f"ERROR {line}")
    admission = pod_security.check_manifests(items)
    for line in admission:
        print(f"ERROR {line}")
    print(
        f"{len(results) - len(bad)} of {len(results)} objects valid (CRDs: {validator.crd_dir}; "
        f"built-in kinds: Kubernetes {validator.kubernetes_version})"
    )
    if not admission:
        print("Pod Security: every Namespace enforces baseline or restricted and admits the pod templates in it")
    return 1 if bad or dangling or admission else 0


if __name__ == "__main__":
    sys.exit(main())
