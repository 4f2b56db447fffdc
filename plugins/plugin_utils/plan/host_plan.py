"""Each host's slice of the plan: what the roles read on that host, and nothing that grows with the
cluster unless a file on that host must contain it.

The plan is computed once on the controller. Handing the whole plan to every host (a fact per
host) costs memory and time in the square of the node count; instead each host reads
``host_view(plan, host)``:

- the plan's top-level keys, with the same key paths the roles use (``hosts[<me>]``, ``files[<me>]``,
  ``services[<me>]``, ``storage.lustre.targets[<me>]``, ``fabric_host.node_descriptions[<me>]``, ...);
  ``files[<me>]`` is the host's role files, derived from the plan's rules (plan/files.py host_files);
- host-indexed parts narrowed to the host (:data:`NARROWED`);
- node-proportional tables that a file on the host must contain (``/etc/hosts``, the health
  check's node table, the switches of slurm's topology.conf, the head's Prometheus targets and the fabric's
  cabling) kept as the plan's OWN objects, never copied: every host refers to the same object
  (:data:`SHARED`); a host that renders no such file gets an empty table instead (:data:`KEEP_ON`).

Everything else is the plan's own objects too (no copy). Rendering any of a host's files from its
view gives the same bytes as rendering it from the whole plan (tests/unit/plugins/plugin_utils/plan/test_host_plan.py).
No I/O; pure functions of plain data (dicts, lists, strings, numbers).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import choices as groups
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import host_files
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.section import section_data

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import PlanView

#: Node-proportional tables (and the head's large Grafana data), referenced (never copied) by the hosts
#: that render them.
SHARED: tuple[str, ...] = (
    "etc_hosts",
    "health.nodes",
    "fabric.slurm_topology",
    "fabric.cabling.switches",
    "fabric.cabling.scalable_units",
    "monitoring.targets",
    "monitoring.scrape_jobs",
    "monitoring.grafana",
    "storage.lustre.oss",
    "storage.lustre.server_nids",
    "validation.tests.ib_write_bw",
    "validation.tests.ib_write_lat",
    "validation.tests.port_counters",
)

#: Which hosts keep a shared table (by role); the others get an empty one of the same type.
#: etc_hosts stays everywhere (/etc/hosts on every host); storage.lustre.oss is the servers' list.
KEEP_ON: dict[str, frozenset[str]] = {
    # topology.conf's switches (a few lines of hostlists, not the cabling): the slurm role renders it on
    # the controllers and the compute nodes (the same file everywhere Slurm runs)
    "fabric.slurm_topology": groups.SLURM_HOSTS,
    "health.nodes": frozenset({groups.COMPUTE}),  # /etc/gpucluster/healthcheck.json (compute role)
    # the head checks the discovered fabric against the whole cabling (fabric_check, run once)
    "fabric.cabling.switches": frozenset({groups.HEAD}),
    "fabric.cabling.scalable_units": frozenset({groups.HEAD}),
    "monitoring.targets": frozenset({groups.HEAD}),  # prometheus.yml (head role)
    "monitoring.scrape_jobs": frozenset({groups.HEAD}),
    # the Grafana provisioning files and dashboards (head role): ~80 KB no other host reads
    "monitoring.grafana": frozenset({groups.HEAD}),
    # every Lustre server's LNet NIDs (one per interface): the servers' own business
    "storage.lustre.server_nids": frozenset({groups.STORAGE}),
    # the rail pairs of the acceptance tests (playbooks/validate.yml runs them on the compute nodes)
    "validation.tests.ib_write_bw": frozenset({groups.COMPUTE}),
    "validation.tests.ib_write_lat": frozenset({groups.COMPUTE}),
    "validation.tests.port_counters": frozenset({groups.COMPUTE}),  # perfquery per planned HCA port
    # self-healing (compute/healing.py): the heads' loop and the compute nodes' active check; a few KB that
    # do not grow with the nodes, read by no other host
    "healing": groups.SLURM_HOSTS,
}

#: Host-indexed parts narrowed to the host: a mapping keeps only the host's key, a list of host
#: names only the host's name (membership). Each costs O(1) (a list: one C-level ``in``), so the
#: views of N hosts cost O(N) together, not O(N^2).
NARROWED: tuple[str, ...] = (
    "hosts",
    "services",  # the units each host's roles start (plan/services.py; the audit reads its own)
    "storage.lustre.targets",
    "storage.nvmeof.targets",
    "storage.nvmeof.clients",
    "fabric_host.node_descriptions",
    "fabric_host.infiniband_hosts",
    "fabric_host.roce_hosts",
    "gpu.mig.host_config",  # each compute node's MIG layout name (gpucluster-mig.service)
)


def _get(tree: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, or None when a part is missing (or not a mapping)."""
    node: Any = tree
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _replace(tree: dict[str, Any], path: str, make: Callable[[Any], Any]) -> None:
    """Replace the value at ``path`` with ``make(value)``, copying only the mappings on the way
    (shallow): the other values stay the plan's own objects."""
    parts = path.split(".")
    parent = _get(tree, ".".join(parts[:-1])) if len(parts) > 1 else tree
    if not isinstance(parent, Mapping) or parts[-1] not in parent:
        return  # nothing there (a plan without MIG): the mappings on the way stay the plan's own
    node = tree
    for part in parts[:-1]:
        node[part] = dict(node[part])
        node = node[part]
    node[parts[-1]] = make(node[parts[-1]])


def _narrow(host: str) -> Callable[[Any], Any]:
    def run(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {host: value[host]} if host in value else {}
        if isinstance(value, list):
            return [host] if host in value else []
        return value

    return run


def _empty(value: Any) -> Any:
    """An empty table of the value's kind (plain types: Ansible's lazy containers take no empty constructor)."""
    if isinstance(value, Mapping):
        return {}
    if isinstance(value, list):
        return []
    return "" if isinstance(value, str) else None


def host_view(plan: Mapping[str, Any], host: str) -> dict[str, Any]:
    """The plan as ``host`` reads it: same key paths, host-indexed parts narrowed to the host,
    node-proportional tables kept (by reference) only where a file of the host contains them."""
    hosts = plan.get("hosts")
    if not isinstance(hosts, Mapping) or host not in hosts:
        raise PlanError(
            "inventory_hostname",
            host,
            "a host of the plan (groups head, compute, storage, nfs_server, lustre_mds, lustre_oss)",
        )
    roles = set(hosts[host].get("roles") or [])
    view = plan_data(plan)
    # the host's role files, derived from the plan's rules (plan/files.py): files[<host>] like a narrowed part
    files = {host: host_files(cast("PlanView", view), host)} if "files" in view else {}  # the plan's own data
    # shared tables first: the narrowing below copies the mappings on their paths
    for path, keep_on in KEEP_ON.items():
        if not roles & keep_on:
            _replace(view, path, _empty)
    for path in NARROWED:
        _replace(view, path, _narrow(host))
    if "files" in view:
        view["files"] = files
    return view


def view_sizes(view: Mapping[str, Any], *, shared: bool = True) -> tuple[int, int]:
    """(bytes unique to the host, bytes of the shared tables it refers to), as compact JSON.

    The unique part is the view with the shared tables (:data:`SHARED`) left out: what the
    host's slice costs beyond the tables every host refers to. ``shared=False`` skips sizing
    those tables (0): they are the same objects for every host, size them once."""
    unique = dict(view)
    shared_bytes = 0
    for path in SHARED:
        value = _get(unique, path)
        if value:
            shared_bytes += len(canonical_json(value)) if shared else 0
            _replace(unique, path, lambda _v: None)
    return len(canonical_json(unique)), shared_bytes


def canonical_json(plan: Any) -> str:
    """The plan as canonical JSON: keys as strings and sorted, compact separators, UTF-8 text.

    Equal for a plan and for the same plan read back from plan.json (JSON has string keys only).
    Plain data (the engine's, a registered plan's) is dumped as it is; anything json cannot sort or
    encode (Ansible's lazy containers, keys of mixed types) goes through plain() first."""
    try:
        return json.dumps(plan, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except TypeError:
        return json.dumps(plain(plan), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


#: The key of the registered result that holds the plan's sha256 (:func:`plan_sha256`), computed by the
#: gpucluster.tiers.cluster_plan action where the plan is plain data (a filter over the registered plan
#: would walk it again through ansible-core's lazy containers).
SHA256_KEY = "plan_sha256"

#: Keys of the registered result that are not plan sections: those ansible-core adds to every task result
#: (``changed``, ``failed``) and the action's :data:`SHA256_KEY`. The plan stage registers the
#: gpucluster.tiers.cluster_plan action's result as ``gpucluster_plan`` (playbooks/tasks/plan.yml), so the
#: registered plan carries them; no plan section has these names (the action refuses a plan that would).
RESULT_KEYS: frozenset[str] = frozenset({"changed", "failed", SHA256_KEY})


def plan_data(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan without the keys Ansible adds to a registered result (:data:`RESULT_KEYS`): a shallow
    copy of the top level, the sections stay the plan's own objects (a registered section's own dict:
    plan/section.py)."""
    return {k: section_data(v) for k, v in plan.items() if k not in RESULT_KEYS}


def _feed(update: Callable[[bytes], Any], value: Any, depth: int) -> None:
    """Feed :func:`canonical_json` of ``value`` to ``update`` piece by piece: mappings and lists down to
    ``depth`` levels one item at a time, deeper values whole. The pieces concatenate to the same bytes."""
    if depth > 0 and isinstance(value, Mapping):
        update(b"{")
        for i, key in enumerate(sorted(value, key=str)):
            update((b"," if i else b"") + json.dumps(str(key), ensure_ascii=False).encode("utf-8") + b":")
            _feed(update, value[key], depth - 1)
        update(b"}")
    elif depth > 0 and isinstance(value, (list, tuple)):
        update(b"[")
        for i, item in enumerate(value):
            if i:
                update(b",")
            _feed(update, item, depth - 1)
        update(b"]")
    else:
        update(canonical_json(value).encode("utf-8"))


def plan_sha256(plan: Any, depth: int = 3) -> str:
    """sha256 (hex) of :func:`canonical_json`: the same plan gives the same digest, whatever the key order.

    Hashed piece by piece (:func:`_feed`, ``depth`` levels: a section's parts, e.g. one host's entry or
    the cabling's link list): at 16,384 nodes the whole plan's JSON is 140 MB, which with its plain()
    copy was the plan stage's peak memory. Deeper pieces cost a json.dumps call each for no gain."""
    digest = hashlib.sha256()
    _feed(digest.update, plan, depth)
    return digest.hexdigest()


__all__ = [
    "KEEP_ON",
    "NARROWED",
    "RESULT_KEYS",
    "SHA256_KEY",
    "SHARED",
    "canonical_json",
    "host_view",
    "plan_data",
    "plan_sha256",
    "view_sizes",
]
