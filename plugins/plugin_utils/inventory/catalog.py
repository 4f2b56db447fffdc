"""Hardware catalog: what each GPU model can do, with the source of every number.

The numbers live in catalog.yml beside this file, each model with its ``source`` per field
(tags such as [S1] are entries of docs/sources.md). Loading it at import is the engine's one
read of static data (package data, read with pkgutil so it works from an installed collection
too); everything else in the engine is a pure function of its arguments.

Where the sources found no value the field is None, and the engine refuses to plan anything
that needs it unless the inventory (or gpu_facts, read from the hardware at run time)
supplies it: the hardware wins over this table.
"""

from __future__ import annotations

import pkgutil
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import yaml

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError


@dataclass(frozen=True)
class GpuModel:
    key: str
    name: str  # nvidia-smi product name
    form_factor: str  # sxm | pcie
    max_sm_mhz: int | None  # nvidia-smi clocks.max.sm: the upper bound of -lgc
    max_mem_mhz: int | None  # nvidia-smi clocks.max.mem: the upper bound of -lmc
    power_min_w: int | None
    power_default_w: int | None
    power_max_w: int | None
    memory_gb: float
    memory_bw_tbs: float | None
    nvlink_gen: int | None
    nvlink_gbs: int | None  # per GPU, bidirectional
    temp_max_operating_c: int | None
    temp_slowdown_c: int | None
    temp_shutdown_c: int | None
    memory_clock_lock: (
        bool  # nvidia-smi -lmc: NVML says Ampere or newer fully supported devices (docs/sources.md [S26])
    )
    #: MIG table (compute_slices, memory_slices, profiles: compute, memory, max, starts) or None: no MIG
    #: (docs/sources.md [G1] [G2] [G3]; compute/mig.py reads it)
    mig: dict[str, Any] | None = None
    #: the GPUs of a node sit on an NVSwitch board (HGX/DGX SXM): Fabric Manager must run, matched to the
    #: driver branch, before CUDA initialises (docs/sources.md [F1] [F3]; compute/bringup.py)
    nvswitch: bool = False
    #: NVLink links per GPU on an NVSwitch board: the health check drains a node with fewer active
    #: (docs/sources.md [S17] [S18] [F9]); None: not counted (no NVLink, or bridge pairs only)
    nvlink_links: int | None = None
    #: NVLink5 NVSwitch boards (HGX/DGX B200, B100): Fabric Manager needs the NVLink Subnet Manager (NVLSM)
    #: and the ib_umad module (docs/sources.md [F20] [F21]; compute/bringup.py)
    nvlsm: bool = False
    #: GPUs in one NVLink domain: 8 on an HGX board (one node), 72 in a GB200 NVL72 rack (18 nodes of 4);
    #: None: no NVSwitch domain. A domain larger than a node needs Slurm's topology/block (slurm/topology.py)
    nvlink_domain_gpus: int | None = None
    sources: dict[str, str] = field(default_factory=dict)


def _load(text: bytes) -> tuple[dict[str, GpuModel], dict[str, dict[str, str]]]:
    """GPUS and SOURCE from catalog.yml; ValueError naming the entry and the key when the file does not
    match GpuModel (a fault of the collection, not of the inventory)."""
    data = yaml.safe_load(text)
    data.pop("switches", None)  # the fabric switches: _load_switches
    names = {f.name for f in fields(GpuModel)} - {"key"}
    gpus: dict[str, GpuModel] = {}
    source: dict[str, dict[str, str]] = {}
    for key, entry in data.items():
        entry = dict(entry)
        source[key] = entry.pop("source", None) or {}
        if not source[key]:
            raise ValueError(f"catalog.yml: {key} has no source")
        if set(entry) != names:
            raise ValueError(
                f"catalog.yml: {key}: missing {sorted(names - set(entry))}, unknown {sorted(set(entry) - names)}"
            )
        gpus[key] = GpuModel(key=key, **entry)
    return gpus, source


@dataclass(frozen=True)
class SwitchModel:
    """A fabric switch: its port count (the radix) at each link rate (catalog.yml ``switches``)."""

    key: str
    name: str
    fabric: str  # infiniband | roce
    ports: dict[int, int]  # link rate in Gb/s -> ports at that rate
    default_for: tuple[int, ...]  # link rates at which it is the fabric type's default switch
    source: dict[str, str] = field(default_factory=dict)


def _load_switches(text: bytes) -> dict[str, SwitchModel]:
    out: dict[str, SwitchModel] = {}
    for key, entry in (yaml.safe_load(text).get("switches") or {}).items():
        if not entry.get("source"):
            raise ValueError(f"catalog.yml: switches.{key} has no source")
        out[key] = SwitchModel(
            key=key,
            name=entry["name"],
            fabric=entry["fabric"],
            ports={int(rate): int(n) for rate, n in entry["ports"].items()},
            default_for=tuple(int(r) for r in entry["default_for"]),
            source=dict(entry["source"]),
        )
    return out


_CATALOG = pkgutil.get_data(__name__.rpartition(".")[0], "catalog.yml") or b""
#: The catalog, by model key; SOURCE[key][field]: where that number comes from (catalog.yml ``source``).
GPUS, SOURCE = _load(_CATALOG)
#: Fabric switches, by key (catalog.yml ``switches``).
SWITCHES = _load_switches(_CATALOG)


def switch_radix(
    fabric_type: str, link_rate_gbps: float, model: str | None = None, field: str = "gpucluster_fabric"
) -> int:
    """Ports per switch at ``link_rate_gbps``: the named ``model``'s, else the fabric type's default switch's."""
    rate = int(link_rate_gbps)
    if model is not None:
        if model not in SWITCHES:
            raise PlanError(f"{field}.switch_model", model, "one of " + ", ".join(sorted(SWITCHES)))
        sw = SWITCHES[model]
        if rate not in sw.ports:
            raise PlanError(
                f"{field}.link_rate_gbps",
                link_rate_gbps,
                f"a link rate {sw.key} has ports for: {', '.join(str(r) for r in sorted(sw.ports))} Gb/s",
            )
        return sw.ports[rate]
    for sw in SWITCHES.values():
        if sw.fabric == fabric_type and rate in sw.default_for and rate in sw.ports:
            return sw.ports[rate]
    raise PlanError(
        f"{field}.switch_radix",
        None,
        f"a port count (switch_radix) or a switch_model for a {fabric_type} switch at {link_rate_gbps:g} Gb/s:"
        " the catalog has no default switch for it",
    )


def gpu_model(key: str, field: str = "gpucluster_node.gpu_model") -> GpuModel:
    """The catalog entry for ``key``; PlanError listing the known models otherwise."""
    if key not in GPUS:
        raise PlanError(field, key, "one of " + ", ".join(sorted(GPUS)))
    return GPUS[key]


def gpu_model_as_dict(model: GpuModel) -> dict[str, Any]:
    return asdict(model)
