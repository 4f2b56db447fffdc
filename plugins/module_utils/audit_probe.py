"""Parsers of what the audit reads on a host (target side, Python 3.10, pure, no I/O).

The ``audit_facts`` module runs the tools and hands their output here; tests hand recorded
output. Every probe has a state: ``ok`` (read), ``absent`` (the tool is not on the host: the
lab's containers have no nvidia-smi or ibstat) or ``error`` (the tool ran and failed). An absent
tool is never a finding by itself: the controller decides what the plan expects
(plugins/plugin_utils/audit/engine.py).

- :func:`parse_gpu_applied`: ``nvidia-smi --query-gpu=<APPLIED_FIELDS> --format=csv,noheader,nounits``,
  the settings the compute role applies (power limit, persistence, MIG mode) and the versions;
- :func:`parse_nvlink_status`: ``nvidia-smi nvlink -s``, active links per GPU;
- :func:`parse_ibstat`: ``ibstat``, each HCA's firmware and its ports' state and rate;
- :func:`parse_fabricmanager_version`: ``nv-fabricmanager --version``;
- :func:`parse_scontrol_nodes`: ``scontrol -o show node``, each node's Gres, features and state.
"""

from __future__ import annotations

import csv
import re
from typing import Any

#: nvidia-smi --query-gpu fields read by the audit (nvidia-smi(1) "--query-gpu"; docs/sources.md [AU1]).
APPLIED_FIELDS = (
    "index",
    "pci.bus_id",
    "name",
    "power.limit",
    "persistence_mode",
    "mig.mode.current",
    "driver_version",
    "vbios_version",
)
APPLIED_ARGS = ["--query-gpu=" + ",".join(APPLIED_FIELDS), "--format=csv,noheader,nounits"]
NVLINK_ARGS = ["nvlink", "-s"]


class ProbeParseError(ValueError):
    """Output that is not what the tool prints."""


def _missing(value: str) -> bool:
    v = value.strip()
    return not v or (v.startswith("[") and v.endswith("]")) or v in ("N/A", "Not Supported")


def _enabled(value: str) -> bool | None:
    v = value.strip().lower()
    if _missing(value):
        return None
    if v in ("enabled", "on", "1"):
        return True
    if v in ("disabled", "off", "0"):
        return False
    raise ProbeParseError(f"not Enabled/Disabled: {value.strip()!r}")


def parse_gpu_applied(text: str) -> list[dict[str, Any]]:
    """One dict per GPU: index, pci_bus_id, name, power_limit_w, persistence, mig, driver_version, vbios_version."""
    out = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(APPLIED_FIELDS):
            raise ProbeParseError(f"expected {len(APPLIED_FIELDS)} fields ({','.join(APPLIED_FIELDS)}), got {len(row)}")
        f = dict(zip(APPLIED_FIELDS, (c.strip() for c in row), strict=True))
        try:
            index = int(f["index"])
            power = None if _missing(f["power.limit"]) else float(f["power.limit"])
        except ValueError as exc:
            raise ProbeParseError(f"GPU row {', '.join(row)!r}: {exc}") from exc
        out.append(
            {
                "index": index,
                "pci_bus_id": None if _missing(f["pci.bus_id"]) else f["pci.bus_id"],
                "name": f["name"],
                "power_limit_w": int(power) if power is not None and power.is_integer() else power,
                "persistence": _enabled(f["persistence_mode"]),
                "mig": _enabled(f["mig.mode.current"]),
                "driver_version": None if _missing(f["driver_version"]) else f["driver_version"],
                "vbios_version": None if _missing(f["vbios_version"]) else f["vbios_version"],
            }
        )
    return out


_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+):\s*(.*)$")


def parse_nvlink_status(text: str) -> dict[int, dict[str, int]]:
    """{GPU index: {"links": n, "active": m}} from ``nvidia-smi nvlink -s`` (docs/sources.md [AU1]).

    An active link prints its speed (``Link 3: 26.562 GB/s``); an inactive one ``<inactive>``.
    """
    out: dict[int, dict[str, int]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        m = _NVLINK_GPU.match(line.strip())
        if m:
            gpu = int(m.group(1))
            out[gpu] = {"links": 0, "active": 0}
            continue
        link = _NVLINK_LINK.match(line)
        if link and gpu is not None:
            out[gpu]["links"] += 1
            if "inactive" not in link.group(2).lower() and re.search(r"\d", link.group(2)):
                out[gpu]["active"] += 1
    return out


def parse_ibstat(text: str) -> list[dict[str, Any]]:
    """One dict per HCA port of ``ibstat``: ca, port, state, physical_state, rate_gbps, firmware, port_guid.

    ibstat(8) prints one ``CA '<name>'`` block per HCA, its ``Firmware version``, then per port
    ``State``, ``Physical state``, ``Rate`` (Gb/s) and ``Port GUID`` (docs/sources.md [AU2])."""
    out: list[dict[str, Any]] = []
    ca: dict[str, Any] = {}
    port: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        m = re.match(r"^CA '([^']+)'", line)
        if m:
            ca = {"ca": m.group(1), "firmware": None}
            port = None
            continue
        m = re.match(r"^Port (\d+):$", line)
        if m and ca:
            port = {"ca": ca["ca"], "port": int(m.group(1)), "firmware": ca.get("firmware")}
            out.append(port)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if port is None:
            if key == "Firmware version":
                ca["firmware"] = value
            continue
        if key == "State":
            port["state"] = value
        elif key == "Physical state":
            port["physical_state"] = value
        elif key == "Rate":
            try:
                port["rate_gbps"] = float(value)
            except ValueError as exc:
                raise ProbeParseError(f"{ca['ca']} port {port['port']}: Rate {value!r} is not a number") from exc
        elif key == "Port GUID":
            port["port_guid"] = value
    return out


def parse_fabricmanager_version(text: str) -> str | None:
    """``Fabric Manager version is : 535.104.05`` -> ``535.104.05``."""
    m = re.search(r"version\s+is\s*:\s*(\S+)", text, re.IGNORECASE)
    return m.group(1) if m else None


def parse_scontrol_nodes(text: str) -> dict[str, dict[str, Any]]:
    """{node: {gres, features, state, reason}} from ``scontrol -o show node`` (one line per node;
    docs/sources.md [AU3]). ``Reason=`` runs to the end of its line, without its ``[user@time]``."""
    out: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        m = re.match(r"^NodeName=(\S+)", line.strip())
        if not m:
            continue

        def field(name: str, text: str = line) -> str | None:
            # Reason= runs to the end of the line (it may hold spaces); the others are one token
            if name == "Reason":
                r = re.search(r"\bReason=(.*?)(?:\s+\[[^\]]*\])?\s*$", text)
            else:
                r = re.search(rf"\b{name}=(\S*)", text)
            v = r.group(1).strip() if r else None
            return None if v in (None, "", "(null)") else v

        out[m.group(1)] = {
            "gres": field("Gres"),
            "features": field("AvailableFeatures"),
            "state": field("State"),
            "reason": field("Reason"),
        }
    return out
