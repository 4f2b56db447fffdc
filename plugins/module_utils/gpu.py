"""Parsers of nvidia-smi output and the check of a GPU plan against the hardware.

Pure functions over the tools' text (no I/O): the gpu_facts module runs nvidia-smi and
hands the output here; tests hand recorded output (tests/data/nvidia-smi).

- ``parse_query_csv``: ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``.
  Unavailable values print as ``[N/A]`` or ``[Not Supported]`` and become ``None``.
- ``parse_temperature``: ``nvidia-smi -q -d TEMPERATURE`` in both forms (docs/sources.md §1.2): the
  absolute thresholds (``GPU Shutdown Temp : 92 C``; drivers up to R535 on Hopper/Ampere)
  and the T.Limit form of newer drivers (``GPU Shutdown T.Limit Temp : -8 C``, headroom
  below the T.Limit point). The two are not converted into each other (docs/sources.md §1.2:
  "do not convert between the two forms blindly").
- ``check_plan_against_hardware``: the plan's clock locks and power limit must lie within
  what each GPU reports; the hardware wins over the catalog (DESIGN.md).
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass
from typing import Any

QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "clocks.max.sm",
    "clocks.max.mem",
    "power.min_limit",
    "power.default_limit",
    "power.max_limit",
    "temperature.gpu",
    "ecc.errors.uncorrected.volatile.total",
)
QUERY_ARGS = ["--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"]
TEMPERATURE_ARGS = ["-q", "-d", "TEMPERATURE"]

#: What nvidia-smi prints when a host has no usable GPU (driver not loaded, no device).
NO_GPU_MESSAGES = ("No devices were found", "couldn't communicate with the NVIDIA driver")

# nvidia-smi -q labels -> GpuThermal fields; exact labels, so that "GPU Shutdown T.Limit Temp"
# is never read as "GPU Shutdown Temp".
_THERMAL_LABELS = {
    "GPU Current Temp": "current_c",
    "GPU Shutdown Temp": "shutdown_c",
    "GPU Slowdown Temp": "slowdown_c",
    "GPU Max Operating Temp": "max_operating_c",
    "Memory Current Temp": "memory_current_c",
    "Memory Max Operating Temp": "memory_max_operating_c",
    "GPU T.Limit Temp": "tlimit_headroom_c",
    "GPU Shutdown T.Limit Temp": "shutdown_tlimit_c",
    "GPU Slowdown T.Limit Temp": "slowdown_tlimit_c",
    "GPU Max Operating T.Limit Temp": "max_operating_tlimit_c",
    "Memory Max Operating T.Limit Temp": "memory_max_operating_tlimit_c",
}


class GpuParseError(ValueError):
    """Output that is not what the nvidia-smi command prints."""


@dataclass(frozen=True)
class Gpu:
    """One row of the --query-gpu CSV; ``None`` where nvidia-smi printed [N/A] or [Not Supported]."""

    index: int
    name: str
    uuid: str | None
    pci_bus_id: str | None
    max_sm_mhz: int | None
    max_mem_mhz: int | None
    power_min_w: float | None
    power_default_w: float | None
    power_max_w: float | None
    temperature_c: int | None
    ecc_uncorrected_volatile: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GpuThermal:
    """Thermal section of one GPU. Absolute thresholds in C; T.Limit values are headroom in C."""

    pci_bus_id: str
    current_c: int | None = None
    shutdown_c: int | None = None
    slowdown_c: int | None = None
    max_operating_c: int | None = None
    memory_current_c: int | None = None
    memory_max_operating_c: int | None = None
    tlimit_headroom_c: int | None = None
    shutdown_tlimit_c: int | None = None
    slowdown_tlimit_c: int | None = None
    max_operating_tlimit_c: int | None = None
    memory_max_operating_tlimit_c: int | None = None

    @property
    def form(self) -> str:
        """``absolute`` when the driver prints absolute thresholds, ``tlimit`` when only headroom ones."""
        if any(v is not None for v in (self.shutdown_c, self.slowdown_c, self.max_operating_c)):
            return "absolute"
        if any(v is not None for v in (self.shutdown_tlimit_c, self.slowdown_tlimit_c, self.max_operating_tlimit_c)):
            return "tlimit"
        return "unknown"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "form": self.form}


def _missing(value: str) -> bool:
    v = value.strip()
    return not v or (v.startswith("[") and v.endswith("]")) or v in ("N/A", "Not Supported")


def _int(value: str, what: str) -> int | None:
    if _missing(value):
        return None
    try:
        return int(float(value))
    except ValueError as exc:
        raise GpuParseError(f"{what}: {value.strip()!r} is not a number") from exc


def _float(value: str, what: str) -> float | None:
    if _missing(value):
        return None
    try:
        return float(value)
    except ValueError as exc:
        raise GpuParseError(f"{what}: {value.strip()!r} is not a number") from exc


def _text(value: str) -> str | None:
    return None if _missing(value) else value.strip()


def no_gpu_reason(output: str) -> str | None:
    """The line of nvidia-smi output that says the host has no usable GPU, if there is one."""
    for line in output.splitlines():
        if any(msg in line for msg in NO_GPU_MESSAGES):
            return line.strip()
    return None


def parse_query_csv(text: str) -> list[Gpu]:
    """GPUs from ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``."""
    gpus = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(QUERY_FIELDS):
            raise GpuParseError(
                f"expected {len(QUERY_FIELDS)} fields ({','.join(QUERY_FIELDS)}), got {len(row)}: {', '.join(row)!r}"
            )
        f = dict(zip(QUERY_FIELDS, row, strict=True))
        index = _int(f["index"], "index")
        if index is None:
            raise GpuParseError(f"GPU row without an index: {', '.join(row)!r}")
        gpus.append(
            Gpu(
                index=index,
                name=f["name"].strip(),
                uuid=_text(f["uuid"]),
                pci_bus_id=_text(f["pci.bus_id"]),
                max_sm_mhz=_int(f["clocks.max.sm"], f"GPU {index} clocks.max.sm"),
                max_mem_mhz=_int(f["clocks.max.mem"], f"GPU {index} clocks.max.mem"),
                power_min_w=_float(f["power.min_limit"], f"GPU {index} power.min_limit"),
                power_default_w=_float(f["power.default_limit"], f"GPU {index} power.default_limit"),
                power_max_w=_float(f["power.max_limit"], f"GPU {index} power.max_limit"),
                temperature_c=_int(f["temperature.gpu"], f"GPU {index} temperature.gpu"),
                ecc_uncorrected_volatile=_int(
                    f["ecc.errors.uncorrected.volatile.total"], f"GPU {index} ecc.errors.uncorrected.volatile.total"
                ),
            )
        )
    return gpus


def parse_temperature(text: str) -> tuple[str | None, list[GpuThermal]]:
    """(driver version, per-GPU thermal sections) from ``nvidia-smi -q -d TEMPERATURE``."""
    driver: str | None = None
    found: list[GpuThermal] = []
    current: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("GPU ") and ":" in line and " : " not in line:
            # a GPU header: "GPU 00000000:19:00.0" (the PCI id itself holds colons)
            if current is not None:
                found.append(GpuThermal(**current))
            current = {"pci_bus_id": line[4:].strip()}
            continue
        label, sep, value = line.partition(" : ")
        if not sep:
            continue
        label = label.strip()
        if label == "Driver Version":
            driver = value.strip()
        elif current is not None and label in _THERMAL_LABELS:
            current[_THERMAL_LABELS[label]] = _int(value.replace("C", ""), label)
    if current is not None:
        found.append(GpuThermal(**current))
    return driver, found


def merge_facts(gpus: list[Gpu], thermals: list[GpuThermal]) -> list[dict[str, Any]]:
    """One dict per GPU: the query row plus its thermal section (matched by PCI bus id)."""
    by_bus = {t.pci_bus_id.lower(): t for t in thermals}
    out = []
    for g in gpus:
        t = by_bus.get((g.pci_bus_id or "").lower())
        out.append({**g.as_dict(), "thermal": t.as_dict() if t else None})
    return out


def _plain(value: Any) -> Any:
    """700.0 -> 700, so that messages read like nvidia-smi's limits."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def check_against_hardware(plan_clocks: dict[str, Any], hw: dict[str, Any]) -> list[str]:
    """Mismatches between a clock plan and limits read from a GPU (hardware wins).

    ``hw`` holds what gpu_facts read: max_sm_mhz, max_mem_mhz, power_min_w, power_max_w.
    """
    problems = []
    lock = plan_clocks.get("lock_gpu_clocks")
    if lock and hw.get("max_sm_mhz") is not None and lock[1] > hw["max_sm_mhz"]:
        problems.append(f"planned SM clock lock {lock[1]} MHz is above the GPU's clocks.max.sm {hw['max_sm_mhz']} MHz")
    mem = plan_clocks.get("lock_memory_clocks")
    if mem and hw.get("max_mem_mhz") is not None and mem[1] > hw["max_mem_mhz"]:
        problems.append(
            f"planned memory clock lock {mem[1]} MHz is above the GPU's clocks.max.mem {hw['max_mem_mhz']} MHz"
        )
    power = plan_clocks.get("power_limit_w")
    if power is not None:
        if hw.get("power_max_w") is not None and power > hw["power_max_w"]:
            problems.append(f"planned power limit {power} W is above the GPU's power.max_limit {hw['power_max_w']} W")
        if hw.get("power_min_w") is not None and power < hw["power_min_w"]:
            problems.append(f"planned power limit {power} W is below the GPU's power.min_limit {hw['power_min_w']} W")
    return problems


def check_plan_against_hardware(plan_gpu: dict[str, Any], gpus: list[dict[str, Any]]) -> list[str]:
    """Messages for every GPU whose limits the plan's clock lock or power limit exceeds.

    ``plan_gpu`` is the plan's ``gpu`` section (its ``clocks`` come from clocks.gpu_clocks);
    ``gpus`` are GPU dicts as gpu_facts returns them (``Gpu.as_dict``).
    """
    problems = []
    for g in gpus:
        hw = {k: _plain(g.get(k)) for k in ("max_sm_mhz", "max_mem_mhz", "power_min_w", "power_max_w")}
        for msg in check_against_hardware(plan_gpu.get("clocks") or {}, hw):
            problems.append(f"GPU {g['index']} ({g.get('name')}): {msg}")
    return problems
