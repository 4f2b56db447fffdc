"""The plan play's first check of the inventory, on Ansible's raw host variables (the cluster_plan action's
first step; filter inventory_scope).

Reads each host's variables raw (``HostVars.raw_get`` through plugin_utils/ansible_compat.py: nothing
templated yet) and checks them before anything converts, walks or templates a value:

- the values are data, bounded, and ``gpucluster_lab`` comes from the lab's overlay only (trust.py);
- a misspelt site variable, a gpucluster_* variable set on a host or a group other than all,
  gpucluster_plan_root/_dir from the inventory (they are -e choices), two hosts with one ansible_host
  (site.py ``check_host_variables``).

A template in a ``gpucluster_*`` value (``{{ lookup('pipe', ...) }}``) stops the run here, unevaluated
(docs/security.md, "Inventory trust"). Errors are :class:`ScopeError`, naming the file a value was set in
where ansible-core knows it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils import ansible_compat
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.origin import origin, origin_path
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import COLLECTION_ROOT


class ScopeError(ValueError):
    """An inventory refused by the check: the engine's message, with the file the value was set in."""


def check_scope(
    hostvars: ansible_compat.RawHostVars, hosts: Iterable[Any] | None, controller: str = "localhost"
) -> None:
    """Check the inventory of ``hosts`` and the ``controller`` as ``hostvars`` (ansible-core's) holds it;
    the command line's variables (``-e``) are named by its variable manager. Raises :class:`ScopeError`."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import site

    extra = ansible_compat.extra_variable_names(hostvars)
    raws = check_raw_inventory(hostvars, [controller, *[str(h) for h in hosts or []]], controller, extra)
    seen: dict[str, dict[str, Any]] = {}
    converted: dict[int, tuple[Any, Any]] = {}  # id -> (value, plain value): group all's values, once

    def once(value: Any) -> Any:
        # every host's group-all values are the same objects: convert each once, and the check's
        # comparison with the controller's then meets identical objects (linear in hosts, not hosts x site)
        hit = converted.get(id(value))
        if hit is None or hit[0] is not value:
            hit = converted[id(value)] = (value, plain(value))
        return hit[1]

    addresses: dict[str, Any] = {}  # each host's ansible_host as read (with its origin): the error names the file
    reference = raws.get(controller)
    for host, raw in raws.items():
        if isinstance(raw, Mapping) and host not in seen:
            chosen = site.variables_to_check(dict(raw))
            if host != controller and isinstance(reference, Mapping):
                chosen = _own_values(chosen, reference)
            seen[host] = {str(k): once(v) for k, v in chosen.items()}
            if "ansible_host" in raw:
                addresses[host] = {"ansible_host": raw["ansible_host"]}
    try:
        site.check_host_variables(seen, controller=controller, extra_vars=extra)
    except PlanError as exc:
        where = origin(exc.field, [{"hostvars": addresses}]) if exc.field.startswith("hostvars.") else ""
        raise ScopeError(f"{exc}{where}") from None


_ABSENT = object()


def _own_values(values: Mapping[str, object], reference: Mapping[str, object]) -> dict[str, object]:
    """A host's ``values`` without those that ARE the controller's (the same object: group all's value,
    which every host shares), ``ansible_host`` kept (the address check is per host).

    The controller is checked first with the same objects, so an error they hold is raised there, as
    before; on the other hosts they would pass every check (equal to group all's) at a cost linear in
    their size per host (site.check_host_variables shows a refused value, scanned for secrets)."""
    return {k: v for k, v in values.items() if k == "ansible_host" or reference.get(k, _ABSENT) is not v}


def check_raw_inventory(
    hostvars: ansible_compat.RawHostVars, hosts: list[str], controller: str, extra: frozenset[str]
) -> dict[str, Any]:
    """Each host's raw variables (nothing templated yet; read once, for the caller too), checked: the values
    bounded and free of templates, the host names bounded, ``gpucluster_lab`` from the lab's overlay only
    (plugin_utils/inventory/trust.py). Raises :class:`ScopeError`."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import trust
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import RUNTIME_NAMES

    try:
        trust.check_host_names(hosts)
    except PlanError as exc:
        raise ScopeError(str(exc)) from None
    checked: set[int] = set()  # group all's values are the same objects on every host: each checked once
    raws = raw_variables(hostvars, hosts, controller, extra)  # kept alive (so is every checked object): no id is reused
    for host in dict.fromkeys(hosts):
        raw = raws[host]
        if not isinstance(raw, Mapping):
            continue
        for name, value in raw.items():
            name = str(name)
            if not name.startswith("gpucluster_") or name in extra or id(value) in checked:
                continue
            if name in trust.RUN_RESULTS or name in RUNTIME_NAMES:
                continue  # a run's own results (the registered plan, the roles' facts): not inventory data
            try:
                trust.check_value(name, value)
            except PlanError as exc:
                raise ScopeError(f"{exc}{origin(exc.field, [{name: value}])}") from None
            checked.add(id(value))
        if host == controller and trust.LAB_VARIABLE in raw:
            try:
                where = origin_path(raw[trust.LAB_VARIABLE])
                trust.check_lab_origin(where, COLLECTION_ROOT, from_command_line=trust.LAB_VARIABLE in extra)
            except PlanError as exc:
                raise ScopeError(str(exc)) from None
    return raws


@functools.lru_cache(maxsize=4096)
def checked_name(name: str) -> bool:
    """Whether the check reads a variable of this name: gpucluster_* (the values' trust check) and what
    site.variables_to_check keeps (ansible_host, the package sources' role variables, near misses)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import site

    return name.startswith("gpucluster_") or bool(site.variables_to_check({name: None}))


def raw_variables(
    hostvars: ansible_compat.RawHostVars, hosts: list[str], controller: str, extra: frozenset[str] = frozenset()
) -> dict[str, object]:
    """Each host's raw variables, as far as the check reads them (:func:`checked_name`).

    ``raw_get`` (ansible-core's ``get_vars``) for the controller, for a host with variables from elsewhere
    than group all and itself (a group's, cached facts: ansible_compat.hosts_of_group_all) and for one host
    of the others per set of names they set themselves; those others have that host's group-all values
    (the same objects) and their own, below the command line's (``extra``). One ``get_vars`` per host was a
    third of the plan stage at 16,384 nodes."""
    common = ansible_compat.hosts_of_group_all(hostvars, [h for h in hosts if h != controller], checked_name)
    shared: dict[frozenset[str], dict[str, object]] = {}  # group all's values, by the names a host sets itself
    raws: dict[str, object] = {}
    for host in dict.fromkeys(hosts):
        own = common.get(host)
        if own is not None:
            own = {k: v for k, v in own.items() if k not in extra}  # -e wins: the shared value is the command line's
        names = frozenset(own or ()) | ({"ansible_host"} - extra)
        if own is not None and names in shared:
            raws[host] = {**shared[names], **own}
            continue
        raw = raws[host] = ansible_compat.raw_host_variables(hostvars, host)
        if own is not None and isinstance(raw, Mapping):
            shared[names] = {str(k): v for k, v in raw.items() if checked_name(str(k)) and k not in names}
    return raws
