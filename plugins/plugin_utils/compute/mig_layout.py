"""MIG layouts: a model's MIG table (catalog.yml ``mig``) and whether a profile mix fits one GPU.

The model's MIG table comes from the catalog (catalog.yml ``mig``, docs/sources.md [G1] [G3]): per profile its
compute slices, memory slices, instance count and the memory slices a GPU instance may start at.

A mix is legal when every profile is within its instance count, its compute slices fit (sum <= the
model's 7, or 4 on the RTX PRO 6000) and every GPU instance has a start of its own on the memory-slice
axis without overlapping another (``nvidia-smi mig -lgipp`` lists the starts, docs/sources.md [G3]):
a placement search, not only sums. Order matters: created in the order ``1g.10gb, 4g.40gb`` the 1g
takes slice 0 and the 4g (which may start only at 0) no longer fits, so the plan lists the placement
it found (biggest first) for whoever creates instances by hand. A compute-only count ("7 slices")
accepts ``3g.40gb, 3g.40gb, 1g.10gb`` (7 compute slices), which needs 9 of the 8 memory slices. For the
catalog's tables a mix within the counts and both sums always has a placement (the unit tests check
every mix); the search is what holds when a table's starts are narrower.

Media-extension variants (``+me``, ``+gfx``, ``-me``) are in the catalog where a real GPU lists them
(H100 80GB ``1g.10gb+me``, ``nvidia-smi mig -lgip`` of a real H100, docs/sources.md [G20];
:func:`parse_lgip` reads that output and a unit test compares it with the catalog), but are not offered
in a mix: a training cluster does not use the media engines, and how Slurm names their types is
unconfirmed. No I/O; the planning (compute/mig.py) and the checks of a site's entries use these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import LgipProfile
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS, GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, require

FIELD = "gpucluster_gpu_policy.mig"
#: media-extension profiles (``1g.10gb+me``, ``+gfx``, ``-me``): catalogued, never offered in a mix
MEDIA_VARIANT = re.compile(r"[+-](?:me|gfx)$")
#: one profile row of ``nvidia-smi mig -lgip``: GPU, "MIG <name>", ID, Free/Total instances, memory GiB
_LGIP_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([0-9.]+)\s")


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile: its slices and where it may start (catalog.yml ``mig.profiles``)."""

    name: str
    compute: int  # compute slices (the "Ng" of the name)
    memory: int  # memory slices it occupies, from its start
    max_instances: int  # per GPU, NVIDIA's "Number of Instances Available"
    starts: tuple[int, ...]  # the memory slices a GPU instance of it may start at


@dataclass(frozen=True)
class MigGeometry:
    """A MIG-capable model: its slices and profiles."""

    model: str
    compute_slices: int
    memory_slices: int
    profiles: dict[str, MigProfile]


@dataclass(frozen=True)
class Placement:
    profile: str
    start: int  # first memory slice


def mig_models() -> list[str]:
    """Catalog keys of the models that support MIG."""
    return sorted(k for k, m in GPUS.items() if m.mig)


def geometry(model: GpuModel, field: str = FIELD) -> MigGeometry:
    """The model's MIG table; PlanError naming ``field`` for a model without MIG (L40S)."""
    if not model.mig:
        raise PlanError(
            field,
            model.key,
            f"no MIG entry: {model.name} does not support MIG (NVIDIA's MIG GPUs, docs/sources.md [G2]); "
            f"MIG models: {', '.join(mig_models())}",
        )
    table = model.mig
    profiles = {
        name: MigProfile(name, int(p["compute"]), int(p["memory"]), int(p["max"]), tuple(int(s) for s in p["starts"]))
        for name, p in table["profiles"].items()
    }
    return MigGeometry(model.key, int(table["compute_slices"]), int(table["memory_slices"]), profiles)


def place(geo: MigGeometry, names: list[str]) -> list[Placement] | None:
    """A placement of every instance on the memory slices without overlap, or None if there is none.

    Depth-first over the instances, biggest first (fewest starts first among equals); the same
    profile's instances take increasing starts, so no arrangement is tried twice.
    """
    order = sorted(names, key=lambda n: (-geo.profiles[n].memory, len(geo.profiles[n].starts), n))

    def search(i: int, used: int, last: dict[str, int]) -> list[Placement] | None:
        if i == len(order):
            return []
        prof = geo.profiles[order[i]]
        for start in prof.starts:
            if start < last.get(prof.name, -1):
                continue
            mask = ((1 << prof.memory) - 1) << start
            if start + prof.memory > geo.memory_slices or used & mask:
                continue
            rest = search(i + 1, used | mask, {**last, prof.name: start + 1})
            if rest is not None:
                return [Placement(prof.name, start), *rest]
        return None

    return search(0, 0, {})


def offered(geo: MigGeometry) -> list[str]:
    """The profiles a mix may use: the catalog's, less the media-extension variants."""
    return [name for name in geo.profiles if not MEDIA_VARIANT.search(name)]


def parse_lgip(text: str) -> dict[str, LgipProfile]:
    """``nvidia-smi mig -lgip`` as {profile: {id, instances (the total), memory_gib}}, first GPU's rows."""
    out: dict[str, LgipProfile] = {}
    for line in text.splitlines():
        m = _LGIP_ROW.match(line.strip())
        if m and m.group(2) not in out:
            out[m.group(2)] = {"id": int(m.group(3)), "instances": int(m.group(5)), "memory_gib": float(m.group(6))}
    return out


def check_mix(geo: MigGeometry, profiles: object, field: str) -> list[Placement]:
    """The placement of one GPU's mix; PlanError naming ``field`` when the GPU cannot hold it."""
    known = ", ".join(offered(geo))
    require(
        isinstance(profiles, list) and bool(profiles),
        field,
        profiles,
        f"a list of MIG profiles for one {geo.model} GPU, each one of {known}",
    )
    if not isinstance(profiles, list):  # narrowed by the require above
        raise AssertionError(profiles)
    for j, name in enumerate(profiles):
        require(
            not (isinstance(name, str) and MEDIA_VARIANT.search(name) and name in geo.profiles),
            f"{field}[{j}]",
            name,
            f"one of {known}: media-extension profiles (the GPU's media engines) are not planned (compute/mig.py)",
        )
        require(name in geo.profiles, f"{field}[{j}]", name, f"one of {known} ({geo.model}, docs/sources.md [G1])")
    names = [str(n) for n in profiles]  # each a profile name of the table (checked above)
    for name in sorted(set(names)):
        prof, count = geo.profiles[name], names.count(name)
        require(count <= prof.max_instances, field, profiles, f"at most {prof.max_instances} x {name} per GPU")
    compute = sum(geo.profiles[n].compute for n in names)
    require(
        compute <= geo.compute_slices,
        field,
        profiles,
        f"profiles whose compute slices sum to at most {geo.compute_slices} (these sum to {compute})",
    )
    memory = sum(geo.profiles[n].memory for n in names)
    require(
        memory <= geo.memory_slices,
        field,
        profiles,
        f"profiles whose memory slices sum to at most {geo.memory_slices} (these sum to {memory})",
    )
    placed = place(geo, names)
    starts = "; ".join(f"{n} at {list(geo.profiles[n].starts)}" for n in sorted(set(names)))
    require(
        placed is not None,
        field,
        profiles,
        f"a mix whose GPU instances fit side by side on the {geo.memory_slices} memory slices; none does "
        f"({starts}: the starts nvidia-smi mig -lgipp lists, docs/sources.md [G3])",
    )
    return sorted(placed or [], key=lambda p: p.start)


__all__ = [
    "FIELD",
    "MEDIA_VARIANT",
    "MigGeometry",
    "MigProfile",
    "Placement",
    "check_mix",
    "geometry",
    "mig_models",
    "offered",
    "parse_lgip",
    "place",
]
