#!/usr/bin/env python3
"""Check rendered Kubernetes manifests against their schemas, without a cluster.

Every object must have a schema; an object whose kind has none is an error, not a pass:

- custom resources (Kueue, KubeRay, GPU Operator, Network Operator, ...): the ``openAPIV3Schema``
  of the matching version in the upstream CRD files under ``../shared/reference/k8s-crds/``
  (beside the repository; ``GPUCLUSTER_K8S_CRDS`` overrides it; its README names each file's
  release and source). The OpenAPI v3 structural schema is turned into JSON Schema (see
  :func:`openapi_to_jsonschema`) and checked with ``jsonschema``'s Draft 4 validator;
- built-in kinds (``v1``, ``apps/v1``, ``*.k8s.io/*``): the strict schemas (unknown fields are
  errors) shipped in the ``kubernetes-validate`` package, for the pinned Kubernetes release
  :data:`KUBERNETES_VERSION`;
- every object's ``metadata`` (custom resources included): the strict ObjectMeta schema of that
  release, the name syntax and the label syntax the API server enforces.

Not checked (an API server would): CEL rules (``x-kubernetes-validations``), admission webhooks,
list-map key uniqueness, defaults. Passing means "schema-valid for that API version".

Usage::

    validate_manifests.py build/plan/tier4-k8s/kubernetes        # files or folders of *.yaml
    validate_manifests.py --inventory inventories/tier4-k8s       # build/plan/<its cluster name>/kubernetes
    validate_manifests.py --plan build/plan/tier4-k8s/plan.json   # plan["kubernetes"]["manifests"]

Exit status: 0 all valid, 1 an object is invalid or has no schema, 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import copy
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

ROOT = Path(__file__).resolve().parents[2]
# libyaml when PyYAML has it: the CRD files are ~4 MB of YAML
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

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
# RE2 patterns in Python
# ---------------------------------------------------------------------------------------------

_INLINE_FLAGS = re.compile(r"\(\?([imsU]+)\)")
#: RE2's ASCII classes inside brackets (https://github.com/google/re2/wiki/Syntax, "ASCII character
#: classes"); Python reads ``[[:alpha:]]`` as a set of the characters ``[:alph`` and a literal ``]``
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7F",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1F\\x7F",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_POSIX_CLASS = re.compile(r"\[:(\^?)([a-z]+):\]")


def _char_class(pattern: str, start: int) -> tuple[str, int]:
    """The bracket expression starting at pattern[start] ("["), in Python syntax, and the index after it."""
    out = ["["]
    j = start + 1
    if pattern.startswith("^", j):
        out.append("^")
        j += 1
    if pattern.startswith("]", j):
        out.append("\\]")
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        m = _POSIX_CLASS.match(pattern, j)
        if m:
            if m.group(1) or m.group(2) not in _POSIX_CLASSES:
                raise ValueError(f"pattern {pattern!r}: RE2 class {m.group(0)} is not translated")
            out.append(_POSIX_CLASSES[m.group(2)])
            j = m.end()
        elif pattern[j] == "\\":
            out.append(pattern[j : j + 2])
            j += 2
        else:
            out.append("\\[" if pattern[j] == "[" else pattern[j])  # a literal [ (Python warns on it)
            j += 1
    return "".join(out) + "]", j + 1


def re2_to_python(pattern: str) -> str:
    """A Kubernetes (Go RE2) ``pattern`` as an equivalent Python ``re`` pattern.

    The API server compiles CRD patterns with Go's regexp (RE2 syntax,
    https://github.com/google/re2/wiki/Syntax). Python differs in what these files use or may use:

    - an inline flag group such as ``(?i)`` after the start (``^(?i)[a-z]...`` in Kueue's
      AdmissionCheck ``spec.parameters.kind``): RE2 applies it from there on; Python 3.11 refuses
      it ("global flags not at the start of the expression"). A flag group at the top level is
      moved to the front: equal in meaning when only anchors or flag-free atoms precede it (as
      ``^`` here), and otherwise applied to the whole pattern, which can only accept more;
    - ``\\z`` (end of text) is Python's ``\\Z``; ``[[:alpha:]]`` and the other ASCII classes are
      spelled out (Python would read them as plain characters); RE2's ``(?U)`` (ungreedy) has no
      Python equivalent and is refused; what else Python does not know (``\\pL``, ``\\Q..\\E``)
      fails to compile and is refused too, never silently skipped.

    Raises ValueError when the result does not compile in Python.
    """
    flags = ""
    depth = 0
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            pair = pattern[i : i + 2]
            out.append("\\Z" if pair == "\\z" else pair)
            i += 2
            continue
        if ch == "[":
            text, i = _char_class(pattern, i)
            out.append(text)
            continue
        m = _INLINE_FLAGS.match(pattern, i)
        if m and "U" in m.group(1):
            raise ValueError(f"pattern {pattern!r}: RE2's ungreedy flag (?U) has no Python equivalent")
        if m and depth == 0 and i > 0:
            flags += "".join(f for f in m.group(1) if f not in flags)
            i = m.end()
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        out.append(ch)
        i += 1
    translated = (f"(?{flags})" if flags else "") + "".join(out)
    try:
        re.compile(translated)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} (as {translated!r}) does not compile in Python: {exc}") from exc
    return translated


# ---------------------------------------------------------------------------------------------
# OpenAPI v3 (structural, Kubernetes) -> JSON Schema
# ---------------------------------------------------------------------------------------------

_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def openapi_to_jsonschema(schema: dict[str, Any], *, root: bool = True, branch: bool = False) -> dict[str, Any]:
    """A CRD version's ``openAPIV3Schema`` as a Draft 4 JSON Schema with the API server's meaning.

    Kubernetes' extensions (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/
    custom-resource-definitions/#specifying-a-structural-schema and the sections after it):

    - unknown fields: the API server prunes fields a structural schema does not name, and
      rejects them under strict field validation (kubectl's default since 1.25,
      https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation). So an object
      schema (``type: object`` or ``properties``) becomes closed (``additionalProperties: false``)
      unless it has ``x-kubernetes-preserve-unknown-fields: true`` or its own
      ``additionalProperties`` (a map). A bare ``type: object`` thus accepts only ``{}``, as the
      API server keeps nothing of it. Branches of allOf/anyOf/oneOf/not stay open: structural
      schemas name every field at the level above them too;
    - ``x-kubernetes-int-or-string: true``: integer or string (these schemas carry no ``type``);
    - ``x-kubernetes-embedded-resource: true``: an object with apiVersion, kind and metadata
      (those three are allowed even when not listed);
    - ``nullable: true``: ``null`` is accepted too;
    - the root's ``metadata`` (only ``type: object`` in CRDs) is left open here: the caller checks
      it against ObjectMeta;
    - ``pattern``: RE2 translated to Python (:func:`re2_to_python`);
    - ``x-kubernetes-validations`` (CEL), list types and map types are not evaluated (dropped).
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "description", "default", "example"):
            continue
        if key == "properties":
            out[key] = {name: openapi_to_jsonschema(sub, root=False) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = openapi_to_jsonschema(value, root=False)
        elif key in _SUBSCHEMA_LISTS or key == "not":
            subs = value if isinstance(value, list) else [value]
            conv = [openapi_to_jsonschema(s, root=False, branch=True) for s in subs]
            out[key] = conv if isinstance(value, list) else conv[0]
        elif key == "pattern":
            out[key] = re2_to_python(value)
        else:
            out[key] = copy.deepcopy(value)

    if schema.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
        if out.get("anyOf") == [{"type": "integer"}, {"type": "string"}]:
            del out["anyOf"]  # controller-gen's spelling of the same: one error message, not two
    if schema.get("x-kubernetes-embedded-resource"):
        props = out.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props.setdefault("metadata", {"type": "object"})
    if schema.get("nullable") and "type" in out:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"] if "null" not in types else types
    if root:
        out.setdefault("properties", {})["metadata"] = {"type": "object"}
    if (
        not branch
        and (out.get("type") == "object" or "properties" in out)
        and "additionalProperties" not in out
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


# ---------------------------------------------------------------------------------------------
# Schemas: the CRD files and kubernetes-validate
# ---------------------------------------------------------------------------------------------


def crd_dir(explicit: str | Path | None = None) -> Path:
    """The CRD reference folder: explicit, else $GPUCLUSTER_K8S_CRDS, else ../shared/reference/k8s-crds."""
    if explicit:
        return Path(explicit)
    if os.environ.get(CRD_DIR_ENV):
        return Path(os.environ[CRD_DIR_ENV])
    return ROOT.parent / "shared" / "reference" / "k8s-crds"


@dataclass(frozen=True)
class CrdVersion:
    """One served version of a CRD file: its converted schema and where it came from."""

    group: str
    version: str
    kind: str
    source: str  # the CRD file, relative to the reference folder
    schema: dict[str, Any]


@cache
def load_crds(directory: Path) -> dict[tuple[str, str, str], CrdVersion]:
    """(group, version, kind) -> CrdVersion for every CRD version in directory/**.yaml."""
    if not directory.is_dir():
        raise FileNotFoundError(
            f"CRD reference folder {directory} not found (set {CRD_DIR_ENV} or pass --crds; "
            "it holds the upstream CRD files, see its README.md)"
        )
    index: dict[tuple[str, str, str], CrdVersion] = {}
    for path in sorted(directory.rglob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=_LOADER):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for ver in spec["versions"]:
                if not ver.get("served", True):
                    continue
                key = (spec["group"], ver["name"], spec["names"]["kind"])
                schema = openapi_to_jsonschema(ver["schema"]["openAPIV3Schema"])
                jsonschema.Draft4Validator.check_schema(schema)
                index[key] = CrdVersion(*key, source=str(path.relative_to(directory)), schema=schema)
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
    """Validates Kubernetes objects: CRDs from a reference folder, built-in kinds from kubernetes-validate."""

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
            validator = jsonschema.Draft4Validator(crd.schema)
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
    parser.add_argument("--crds", help=f"CRD reference folder (${CRD_DIR_ENV}; default ../shared/reference/k8s-crds)")
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
    print(
        f"{len(results) - len(bad)} of {len(results)} objects valid (CRDs: {validator.crd_dir}; "
        f"built-in kinds: Kubernetes {validator.kubernetes_version})"
    )
    return 1 if bad or dangling else 0


if __name__ == "__main__":
    sys.exit(main())
