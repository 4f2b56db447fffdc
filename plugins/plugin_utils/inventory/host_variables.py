"""The inventory's variables host by host: refuse those the plan would ignore or that would move it
(:func:`check_host_variables`, issue 30), and the names of a run's switches that are no site data."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.secrets import secret_shape, value_strings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.sources import (
    PACKAGE_SOURCE_VARIABLES,
    check_package_sources,
)

#: Where the plan is written: a command-line choice (-e) only, never an inventory variable, so that an
#: inventory cannot write the plan (and every host's files) outside build/ (playbooks/plan.yml).
COMMAND_LINE_ONLY = ("gpucluster_plan_root", "gpucluster_plan_dir")
#: gpucluster_* names that are a run's switches or results, not site data (tasks/plan.yml does not read
#: them as the site): the plan and its files (localhost's whole plan ``gpucluster_plan``, a host play's
#: slice of it ``gpucluster_host_plan``), the converge lock, the shutdown. tasks/plan.yml's varnames
#: pattern and the cluster_plan filter leave out the same names.
RUN_PREFIXES = ("gpucluster_plan", "gpucluster_host_plan", "gpucluster_lock", "gpucluster_shutdown_")
#: The prefix of every site variable; a variable whose first word is this close to it is a typo.
PREFIX = "gpucluster"


def _near_miss(name: str, known: list[str]) -> str | None:
    """The site variable ``name`` was probably meant as (``gpucluser_gpu_policy`` -> gpucluster_gpu_policy)."""
    return _near_miss_of(name, tuple(known))


@functools.lru_cache(maxsize=4096)
def _near_miss_of(name: str, known: tuple[str, ...]) -> str | None:
    """:func:`_near_miss`, once per name: every host of a site has the same few dozen variable names
    (difflib per host and name was most of the plan stage's inventory check at 16,384 nodes)."""
    if name.startswith(PREFIX + "_"):
        return None
    first, _sep, rest = name.partition("_")
    if first != PREFIX and difflib.SequenceMatcher(None, first.lower(), PREFIX).ratio() >= 0.85:
        guess = difflib.get_close_matches(f"{PREFIX}_{rest}", known, n=1, cutoff=0.6)
        return guess[0] if guess else f"{PREFIX}_{rest}"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
    return close[0] if close else None


def check_host_variables(
    host_vars: Mapping[str, Mapping[str, object]],
    *,
    controller: str = "localhost",
    extra_vars: frozenset[str] | set[str] = frozenset(),
    known: list[str] | None = None,
    per_host: frozenset[str] = frozenset(),
) -> None:
    """Refuse inventory variables the plan would ignore or that would move it (issue 30, item 3 and 5).

    ``host_vars``: each host's inventory variables (the controller's too), only the names this check
    reads: ``gpucluster_*`` names, names close to them and ``ansible_host``. The plan reads the
    ``gpucluster_*`` variables as the controller sees them: those of group ``all``. So:

    - a variable named like a site variable but misspelt (``gpucluser_gpu_policy``) is an error with
      "did you mean";
    - a ``gpucluster_*`` variable whose value on a host differs from group all's (set in host_vars, on
      another group, or in hosts.yml) is an error, unless ``per_host`` declares it;
    - ``gpucluster_plan_root`` and ``gpucluster_plan_dir`` come from the command line (``extra_vars``) only;
    - two hosts with one ``ansible_host`` are an error (two inventory hosts, one machine);
    - a package repository the roles would add (``values.PACKAGE_SOURCES``, role variables: each host's own)
      without a signing key and its pinned fingerprint, or reached over http, is an error (issue 37).
    """
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import RUNTIME_NAMES, SCHEMA

    known = sorted(SCHEMA["properties"]) if known is None else known
    order = [controller, *sorted(h for h in host_vars if h != controller)]
    for host in order:
        for name in sorted(host_vars.get(host) or {}):
            guess = _near_miss(name, known)
            where = "group all" if host == controller else f"host {host}"
            require(
                guess is None,
                name,
                name,
                f"a site variable's name, gpucluster_<section> (known: {', '.join(known)}); set on {where}; "
                f"did you mean '{guess}'?",
            )
            require(
                name not in COMMAND_LINE_ONLY or name in extra_vars,
                name,
                _shown_value((host_vars.get(host) or {}).get(name)),
                f"a command-line choice only (-e {name}=PATH): an inventory (here on {where}) cannot move where the"
                " plan and every host's files are written (build/plan/<name>/ under the current directory by default)",
            )
        check_package_sources(host_vars.get(host) or {}, "group all" if host == controller else f"host {host}")
    reference = host_vars.get(controller) or {}

    def site_names(values: Mapping[str, object]) -> list[str]:
        return sorted(
            n
            for n in values
            if n.startswith(PREFIX + "_")
            and n not in RUNTIME_NAMES
            and not n.startswith(RUN_PREFIXES)
            and n not in per_host
            and n not in extra_vars
        )

    for host in order[1:]:
        values = host_vars.get(host) or {}
        for name in site_names(values):
            require(
                name in reference and values[name] == reference[name],
                name,
                _shown_value(values[name]),
                f"a value set on group all only (group_vars/all/ or all: vars:): host {host} has "
                + ("its own value" if name in reference else "it while group all has none")
                + f" (host_vars/{host}, another group's group_vars, or hosts.yml), which the plan would ignore",
            )
    if "ansible_host" not in extra_vars:  # -e ansible_host=... gives every host one address on purpose
        _check_addresses(host_vars, order[1:])


def _check_addresses(host_vars: Mapping[str, Mapping[str, object]], hosts: list[str]) -> None:
    """No two hosts with one ``ansible_host`` (two inventory hosts, one machine)."""
    seen: dict[str, str] = {}
    for host in hosts:
        address = str((host_vars.get(host) or {}).get("ansible_host") or host)
        require(
            address not in seen,
            f"hostvars.{host}.ansible_host",
            address,
            f"an address no other host has ({seen.get(address)} has {address} too: two inventory hosts would be one"
            " machine, configured twice with two roles)",
        )
        seen[address] = host


def _shown_value(value: object) -> object:
    # a value holding something shaped like a token is not shown (the error lands in logs and artifacts)
    if any(secret_shape(text) for _path, text in value_strings(value, [])):
        return "<hidden: it holds a value that looks like a secret>"
    text = repr(value)
    return value if len(text) <= 80 else f"{text[:80]}... ({len(text)} characters)"


def variables_to_check(values: Mapping[object, object], known: list[str] | None = None) -> dict[str, object]:
    """The part of one host's variables :func:`check_host_variables` reads (gpucluster_* names, names
    close to them, ansible_host, the package sources' role variables), so the filter converts no more than those."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import SCHEMA

    known = sorted(SCHEMA["properties"]) if known is None else known
    return {
        n: v
        for n, v in values.items()
        if isinstance(n, str)
        and (n.startswith(PREFIX + "_") or n == "ansible_host" or n in PACKAGE_SOURCE_VARIABLES or _near_miss(n, known))
    }
