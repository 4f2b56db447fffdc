#!/usr/bin/env python3
"""Install exactly the declared Ansible collections, offline-safe, from the pinned `ansible` release.

    python tools/setup/install_collections.py galaxy.yml --dest .collections/runtime
    python tools/setup/install_collections.py lab/requirements.yml --dest .collections/lab

The list is galaxy.yml's ``dependencies`` (name: range) or a requirements file's ``collections``
(name, version). Galaxy is not reachable from every CI machine; PyPI is. The `ansible` package
on PyPI carries these collections as ``ansible_collections/<ns>/<name>/`` folders (with their
MANIFEST.json), so the wheel of one pinned release is downloaded once into ``--cache``
(``pip download ansible==<release> --no-deps``) and only the declared folders are copied out
of it into ``<dest>/ansible_collections/``. Collections in ``dest`` that are no longer declared
are removed, so a call the lists do not declare fails (ansible.cfg searches only these paths
and sets collections_scan_sys_path = false).

A second run with nothing changed reads the installed MANIFEST.json files and returns without
opening the wheel. Each collection's version must meet its declared range, and its own
dependencies must be declared too (``--also`` names lists that are installed next to it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from ansible.galaxy.dependency_resolution.versioning import meets_requirements

# The `ansible` release whose collections we install: ansible 12.x is the series built on
# ansible-core 2.19 (pyproject.toml); 12.3.0 is the release the toolchain ran with while it still
# installed the whole bundle (https://pypi.org/project/ansible/12.3.0/). galaxy.yml's ranges admit
# the versions it ships; to move, change this and check them (make setup fails when they do not).
ANSIBLE_RELEASE = "12.3.0"
STAMP = ".installed-from"


class SetupError(Exception):
    """A declaration or the release does not fit; the message says which and how to fix it."""


@dataclass(frozen=True)
class Wanted:
    """One declared collection: ``namespace.name`` and its version range."""

    fqcn: str
    spec: str

    @property
    def folder(self) -> str:
        return "ansible_collections/" + self.fqcn.replace(".", "/")


def declared(path: Path) -> list[Wanted]:
    """The collections ``path`` declares: galaxy.yml dependencies or a requirements file's list."""
    data = yaml.safe_load(path.read_text()) or {}
    if "dependencies" in data or "namespace" in data:  # galaxy.yml
        return [Wanted(str(k), str(v or "*")) for k, v in sorted((data.get("dependencies") or {}).items())]
    out = []
    for entry in data.get("collections") or []:
        if isinstance(entry, str):
            entry = {"name": entry}
        if entry.get("type", "galaxy") != "galaxy":
            continue  # a tarball or a git URL: not from the release (ee-requirements.yml's own tarball)
        out.append(Wanted(str(entry["name"]), str(entry.get("version", "*"))))
    return sorted(out, key=lambda w: w.fqcn)


def installed_version(dest: Path, want: Wanted) -> str | None:
    manifest = dest / want.folder / "MANIFEST.json"
    if not manifest.is_file():
        return None
    return json.loads(manifest.read_text())["collection_info"]["version"]


def fetch(release: str, cache: Path) -> Path:
    """The wheel of ``ansible==release`` in ``cache``, downloaded (once) with pip from the package index."""
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob(f"ansible-{release}-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
        cmd += ["--dest", str(cache), f"ansible=={release}"]
        print(f"collections: downloading ansible=={release} once into {cache}", file=sys.stderr)
        if subprocess.run(cmd, check=False).returncode != 0:
            raise SetupError(f"pip could not download ansible=={release}: is the package index reachable?")
        wheels = sorted(cache.glob(f"ansible-{release}-*.whl"))
    if not wheels:
        raise SetupError(f"no wheel of ansible=={release} in {cache} after pip download")
    return wheels[-1]


def extract(wheel: Path, wants: list[Wanted], dest: Path) -> None:
    """Copy the declared collection folders out of ``wheel`` into ``dest`` (replacing older copies)."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        for want in wants:
            prefix = want.folder + "/"
            members = [n for n in names if n.startswith(prefix) and not n.endswith("/")]
            if not members:
                raise SetupError(f"{want.fqcn} is not in {wheel.name}: declare it from elsewhere or drop it")
            target = dest / want.folder
            shutil.rmtree(target, ignore_errors=True)
            for name in members:
                out = dest / name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(zf.read(name))


def prune(dest: Path, wants: list[Wanted]) -> list[str]:
    """Remove collections under ``dest`` that are not declared; return their names."""
    keep = {w.fqcn for w in wants}
    removed = []
    for manifest in sorted((dest / "ansible_collections").glob("*/*/MANIFEST.json")):
        fqcn = f"{manifest.parent.parent.name}.{manifest.parent.name}"
        if fqcn not in keep:
            shutil.rmtree(manifest.parent)
            removed.append(fqcn)
    return removed


def check(dest: Path, wants: list[Wanted], others: set[str]) -> None:
    """Every collection meets its range and its own dependencies are declared too."""
    problems = []
    names = {w.fqcn for w in wants} | others
    for want in wants:
        version = installed_version(dest, want)
        if version is None or not meets_requirements(version, want.spec):
            problems.append(f"{want.fqcn} {version} does not meet the declared range {want.spec!r}")
            continue
        info = json.loads((dest / want.folder / "MANIFEST.json").read_text())["collection_info"]
        for dep in info.get("dependencies") or {}:
            if dep not in names:
                problems.append(f"{want.fqcn} needs {dep}: declare it next to {want.fqcn}")
    if problems:
        raise SetupError("; ".join(problems))


def install(listing: Path, dest: Path, *, release: str, cache: Path, also: list[Path]) -> str:
    """Make ``dest`` hold exactly the collections ``listing`` declares; return a one-line summary."""
    wants = declared(listing)
    others = {w.fqcn for path in also for w in declared(path)}
    dest.mkdir(parents=True, exist_ok=True)
    removed = prune(dest, wants)
    stamp = dest / STAMP
    current = stamp.is_file() and stamp.read_text().strip() == f"ansible=={release}"
    missing = [w for w in wants if not current or installed_version(dest, w) is None]
    if missing:
        extract(fetch(release, cache), missing, dest)
        stamp.write_text(f"ansible=={release}\n")
    check(dest, wants, others)
    listed = ", ".join(f"{w.fqcn} {installed_version(dest, w)}" for w in wants) or "none"
    summary = f"{listing}: {listed} in {dest}"
    if missing:
        summary += f" (copied {len(missing)} from ansible=={release})"
    if removed:
        summary += f" (removed undeclared {', '.join(removed)})"
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("listing", type=Path, help="galaxy.yml or a requirements.yml")
    parser.add_argument("--dest", type=Path, required=True, help="collections path to fill")
    parser.add_argument("--release", default=ANSIBLE_RELEASE, help="the `ansible` release to take them from")
    parser.add_argument("--cache", type=Path, default=Path(".cache/ansible-release"), help="where its wheel is kept")
    parser.add_argument("--also", type=Path, action="append", default=[], help="lists installed alongside")
    args = parser.parse_args(argv)
    try:
        print(install(args.listing, args.dest, release=args.release, cache=args.cache, also=args.also))
    except SetupError as exc:
        print(f"collections: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
