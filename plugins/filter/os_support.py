"""The preflight's check of one host against the support matrix: os_support.

A pure function of the host's facts (``ansible_facts`` of a minimal ``setup``: distribution, platform,
service_mgr, systemd, python) and the plan's support matrix (``plan.support``,
plugin_utils/inventory/support.py). playbooks/preflight.yml runs it on every targeted host before any
change and stops the run with its message where a host is not supported.
Documentation: ``ansible-doc -t filter gpucluster.tiers.os_support`` (YAML beside this file).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

_MAJOR_MINOR = re.compile(r"^(\d+)\.(\d+)")


def _major_minor(text: Any) -> tuple[int, int] | None:
    m = _MAJOR_MINOR.match(str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _python(facts: Mapping[str, Any]) -> tuple[int, int] | None:
    version = (facts.get("python") or {}).get("version") or {}
    if isinstance(version, Mapping) and "major" in version and "minor" in version:
        return int(version["major"]), int(version["minor"])
    return _major_minor(facts.get("python_version"))


def _systemd(facts: Mapping[str, Any]) -> int | None:
    version = (facts.get("systemd") or {}).get("version")
    try:
        return int(version) if version is not None else None
    except (TypeError, ValueError):
        return None


def found(facts: Mapping[str, Any]) -> str:
    """What the host runs, in one line: ``Ubuntu 22.04 (jammy) x86_64, kernel 5.15.0-91-generic,
    systemd 249, Python 3.10``."""
    f = {k.removeprefix("ansible_"): v for k, v in facts.items()}
    name = f.get("distribution") or "unknown distribution"
    version = f.get("distribution_version") or f.get("distribution_major_version") or "?"
    release = f.get("distribution_release")
    systemd = _systemd(f)
    python = _python(f)
    manager = f.get("service_mgr")
    parts = [
        f"{name} {version}{f' ({release})' if release and release != 'NA' else ''} {f.get('architecture') or '?'}",
        f"kernel {f.get('kernel') or '?'}",
        f"systemd {systemd}" if systemd is not None else f"service manager {manager or '?'}",
        f"Python {python[0]}.{python[1]}" if python else "Python ?",
    ]
    return ", ".join(parts)


def problems(facts: Mapping[str, Any], support: Mapping[str, Any]) -> list[str]:
    """Why the host is not supported ([] when it is): each a short sentence naming the fact and the floor."""
    f = {k.removeprefix("ansible_"): v for k, v in facts.items()}
    out: list[str] = []
    dist, major = f.get("distribution"), str(f.get("distribution_major_version") or "")
    arch = f.get("architecture")
    systems = list(support["systems"])
    match = [s for s in systems if s["distribution"] == dist and s["major_version"] == major]
    if not match:
        release = f.get("distribution_release")
        out.append(
            f"{dist or 'an unknown distribution'} {f.get('distribution_version') or major or '?'}"
            f"{f' ({release})' if release and release != 'NA' else ''} is not a supported system"
        )
    elif not any(arch in s["architectures"] for s in match):
        out.append(f"architecture {arch} is not supported (only {', '.join(match[0]['architectures'])})")
    kernel_min = _major_minor(support["kernel_min"])
    kernel = _major_minor(f.get("kernel"))
    if kernel is None or (kernel_min is not None and kernel < kernel_min):
        out.append(f"kernel {f.get('kernel') or '?'} is older than {support['kernel_min']}")
    manager = f.get("service_mgr")
    systemd = _systemd(f)
    if manager != support["service_manager"] and systemd is None:
        out.append(f"service manager {manager or '?'} is not {support['service_manager']}")
    elif systemd is None or systemd < int(support["systemd_min"]):
        out.append(f"systemd {systemd if systemd is not None else '?'} is older than {support['systemd_min']}")
    python_min = _major_minor(support["python_min"])
    python = _python(f)
    if python is None or (python_min is not None and python < python_min):
        shown = f"{python[0]}.{python[1]}" if python else "?"
        out.append(f"Python {shown} is older than {support['python_min']}")
    return out


def os_support(facts: Mapping[str, Any], support: Mapping[str, Any], host: str = "") -> dict[str, Any]:
    """The host's verdict: ``supported``, ``found`` (what it runs), ``problems`` and ``message`` (one
    line naming the host, what it runs, why it is refused and the supported systems)."""
    if not isinstance(facts, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.os_support: input must be the host's ansible_facts")
    if not isinstance(support, Mapping) or "systems" not in support:
        raise AnsibleFilterError(
            "gpucluster.tiers.os_support: support must be the plan's support matrix (plan.support)"
        )
    why = problems(facts, support)
    seen = found(facts)
    who = host or "this host"
    message = (
        f"{who} runs {seen}: supported"
        if not why
        else f"{who} is not supported: it runs {seen}; {'; '.join(why)}. Supported: {support['summary']}"
        ' (docs/inventory.md, "Supported systems")'
    )
    return {"supported": not why, "found": seen, "problems": why, "message": message}


class FilterModule:
    """gpucluster.tiers filter of the preflight."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"os_support": os_support}
