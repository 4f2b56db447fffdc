#!/usr/bin/env python3
"""Extract the CRD schemas the collection targets into the repository's catalog (tools/k8s/crd_schemas/).

The catalog follows kubeconform's layout (``{group}/{kind}_{version}.json``, kind in lower case,
https://github.com/yannh/kubeconform#overriding-schemas-location), one strict JSON Schema (Draft 4)
per served CRD version, so that ``make k8s-validate`` needs nothing outside the repository. Each
file is the version's ``openAPIV3Schema`` as the API server reads it (:func:`openapi_to_jsonschema`),
without ``description`` texts (they do not validate anything and are most of the bytes). ``pattern``
is kept verbatim (Go RE2 syntax): the validator compiles it with google-re2, never translated.

``catalog.json`` beside the schemas names, for every upstream CRD file, its project, tag, commit,
path and SHA-256: :data:`SOURCES`. Update: put the new release's CRD files in a folder laid out as
``<dir>/<file>.yaml`` (the dir names below), update :data:`SOURCES`, then::

    tools/k8s/extract_crd_schemas.py --crds /path/to/k8s-crds           # rewrite the catalog
    tools/k8s/extract_crd_schemas.py --crds /path/to/k8s-crds --check   # exit 1 if it differs
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "tools" / "k8s" / "crd_schemas"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Upstream of each CRD folder: repository, path of the files in it, release tag and its commit.
#: The newest released (non-rc, non-devel) tag when the files were copied (2026-08).
SOURCES: dict[str, dict[str, str]] = {
    "kueue": {
        "repository": "https://github.com/kubernetes-sigs/kueue",
        "path": "config/components/crd/bases/",
        "tag": "v0.19.2",
        "commit": "8eab68778fc1b52affe165fdf5af29d1e9b4f3cb",
    },
    "kuberay": {
        "repository": "https://github.com/ray-project/kuberay",
        "path": "ray-operator/config/crd/bases/",
        "tag": "v1.7.0",
        "commit": "59d663aeec13760646da3db9c1cf8cfe883e30b7",
    },
    "gpu-operator": {
        "repository": "https://github.com/NVIDIA/gpu-operator",
        "path": "config/crd/bases/",
        "tag": "v26.7.0",
        "commit": "10ee5b3638b89e11e949412aafa5ba99279c3721",
    },
    "network-operator": {
        "repository": "https://github.com/Mellanox/network-operator",
        "path": "config/crd/bases/",
        "tag": "v26.4.1",
        "commit": "85afd6d9c6978eb871a3292b9897f49746cc43cd",
    },
    "mpi-operator": {
        "repository": "https://github.com/kubeflow/mpi-operator",
        "path": "manifests/base/",
        "tag": "v0.8.0",  # the MPIJob CRD is byte-identical at v0.8.2
        "commit": "101db144e019e1de65aaded07745e9d805c2852a",
    },
    "training-operator": {
        "repository": "https://github.com/kubeflow/trainer",  # renamed from kubeflow/training-operator
        "path": "manifests/base/crds/",
        "tag": "v1.9.4",
        "commit": "4445c12aa62e4345b0c2c6ac9b215a70eca46ed7",
    },
}

_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def openapi_to_jsonschema(schema: dict[str, Any], *, root: bool = True, branch: bool = False) -> dict[str, Any]:
    """A CRD version's ``openAPIV3Schema`` as a Draft 4 JSON Schema with the API server's meaning.

    Kubernetes' extensions (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/
    custom-resource-definitions/#specifying-a-structural-schema and the sections after it), read as
    kubeconform's openapi2jsonschema does in its strict mode:

    - unknown fields: the API server prunes fields a structural schema does not name, and rejects
      them under strict field validation (kubectl's default since 1.25). So an object schema
      (``type: object`` or ``properties``) becomes closed (``additionalProperties: false``) unless it
      has ``x-kubernetes-preserve-unknown-fields: true`` or its own ``additionalProperties`` (a map).
      Branches of allOf/anyOf/oneOf/not stay open: structural schemas name every field at the level
      above them too;
    - ``x-kubernetes-int-or-string: true``: integer or string;
    - ``x-kubernetes-embedded-resource: true``: an object with apiVersion, kind and metadata;
    - ``nullable: true``: ``null`` is accepted too;
    - the root's ``metadata`` is left open: the validator checks it against ObjectMeta;
    - ``pattern``: kept verbatim (RE2; the validator uses google-re2);
    - ``x-kubernetes-validations`` (CEL), list and map types, descriptions, defaults: dropped.
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


def schema_file(group: str, kind: str, version: str) -> str:
    """kubeconform's name for a custom resource's schema: {group}/{kind}_{version}.json."""
    return f"{group}/{kind.lower()}_{version}.json"


def extract(crds: Path) -> dict[str, str]:
    """Relative path -> file text of the whole catalog (schemas and catalog.json) from the CRD folder."""
    files: dict[str, str] = {}
    entries = []
    for path in sorted(crds.rglob("*.yaml")):
        rel = path.relative_to(crds)
        source = SOURCES.get(rel.parts[0])
        if source is None:
            raise ValueError(f"{rel}: its folder {rel.parts[0]!r} has no entry in SOURCES (extract_crd_schemas.py)")
        raw = path.read_bytes()
        for doc in yaml.load_all(raw, Loader=_LOADER):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            versions = []
            for ver in spec["versions"]:
                if not ver.get("served", True):
                    continue
                name = schema_file(spec["group"], spec["names"]["kind"], ver["name"])
                schema = openapi_to_jsonschema(ver["schema"]["openAPIV3Schema"])
                files[name] = json.dumps(schema, indent=1, sort_keys=True) + "\n"
                versions.append({"version": ver["name"], "storage": bool(ver.get("storage")), "schema": name})
            entries.append(
                {
                    "group": spec["group"],
                    "kind": spec["names"]["kind"],
                    "scope": spec.get("scope", ""),
                    "versions": versions,
                    "upstream": {
                        **source,
                        "path": source["path"] + path.name,
                        "sha256": hashlib.sha256(raw).hexdigest(),
                    },
                }
            )
    files["catalog.json"] = json.dumps({"crds": entries}, indent=1, sort_keys=True) + "\n"
    return files


def _same(path: Path, text: str) -> bool:
    return path.is_file() and path.read_text() == text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crds", type=Path, required=True, help="folder of the upstream CRD files (<dir>/<file>.yaml)")
    parser.add_argument("--dest", type=Path, default=CATALOG, help=f"the catalog ({CATALOG.relative_to(ROOT)})")
    parser.add_argument("--check", action="store_true", help="exit 1 when the catalog differs; write nothing")
    args = parser.parse_args(argv)
    files = extract(args.crds)
    present = {str(p.relative_to(args.dest)) for p in args.dest.rglob("*.json")} if args.dest.is_dir() else set()
    differ = sorted(n for n, text in files.items() if not _same(args.dest / n, text))
    extra = sorted(present - set(files))
    if args.check:
        for name in differ + extra:
            print(f"{args.dest / name}: differs from the extraction of {args.crds}", file=sys.stderr)
        return 1 if differ or extra else 0
    for name in extra:
        (args.dest / name).unlink()
    for name in differ:
        (args.dest / name).parent.mkdir(parents=True, exist_ok=True)
        (args.dest / name).write_text(files[name])
    print(f"{args.dest}: {len(files)} files, {len(differ)} written, {len(extra)} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
