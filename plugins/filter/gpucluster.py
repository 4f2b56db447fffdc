"""Filters of gpucluster.tiers: thin wrappers around the planning engine.

Each filter parses its arguments, calls one engine function and turns a PlanError into
an AnsibleFilterError that names the inventory field, the value and what is allowed.
Documentation: ``ansible-doc -t filter gpucluster.tiers.<name>`` (YAML beside this file).

The engine's modules are imported when a filter runs, not when this file loads: ansible-core
loads every filter file of the collection to find one filter, in every forked worker (one per
host and task), so a site.yml task reading ``gpucluster_host_plan`` (host_plan) would otherwise import
the whole engine per host and task (about 70 ms each). Each filter therefore imports what it
calls with an ordinary ``from ... import`` inside the function: static (readers, ruff and
ansible-test see it), and lazy (the first call imports, later calls find the module loaded).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain


def origin(field: str, sources: Iterable[Any]) -> str:
    """Where the inventory value at the dotted ``field`` was set: `` (set in <file>:<line>)``, or "".

    ansible-core 2.19 tags each value it loads from a YAML file with its origin (file, line); the
    deepest tagged value along the field's path names the file a user has to open. Values that
    come from elsewhere (extra vars, a plan's defaults) carry no file: nothing is added.
    """
    try:
        from ansible._internal._datatag._tags import Origin
    except ImportError:  # another ansible-core: the message stays without the file
        return ""
    found = None
    parts = re.findall(r"[^.\[\]]+", field)
    for source in sources:
        node = source
        for part in parts:
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                break
            tag = Origin.get_tag(node)
            if tag is not None and tag.path:
                found = tag
        if found is not None:
            break
    if found is None:
        return ""
    return f" (set in {found.path}{f':{found.line_num}' if found.line_num else ''})"


def _run(name: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return func(*[plain(a) for a in args], **{k: plain(v) for k, v in kwargs.items()})
    except PlanError as exc:
        where = origin(exc.field, [a for a in (*args, *kwargs.values()) if isinstance(a, Mapping)])
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: {exc}{where}") from None
    except TypeError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: bad arguments: {exc}") from None


def _kwargs_filter(name: str, load: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    """A filter taking a mapping of the arguments of the engine function that ``load`` imports and
    returns (on the filter's first call, not when this file loads)."""

    def run(options: Mapping[str, Any], **more: Any) -> Any:
        if not isinstance(options, Mapping):
            raise AnsibleFilterError(f"gpucluster.tiers.{name}: input must be a mapping of the function's arguments")
        return _run(name, load(), **{**plain(options), **more})

    run.__name__ = name
    return run


#: The collection's root (this file is plugins/filter/gpucluster.py), in the repository and installed.
COLLECTION_ROOT = Path(__file__).resolve().parents[2]


def role_files(root: Path = COLLECTION_ROOT) -> dict[str, Any]:
    """Each role's file list: ``roles/<role>/vars/files.yml``, key ``<role>_files``, roles by name.

    The engine does no I/O: the lists are read here and passed to cluster_plan, which checks them."""
    out: dict[str, Any] = {}
    for path in sorted(root.glob("roles/*/vars/files.yml")):
        role = path.parent.parent.name
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        out[role] = data.get(f"{role}_files") if isinstance(data, Mapping) else data
    return out


def inventory_groups(node: Mapping[str, Any] | None, name: str = "all") -> dict[str, list[str]]:
    """Every group of a YAML inventory's group ``node`` (``hosts``, ``children``), with its hosts and
    those of its children, sorted: the ``groups`` the plan play sees (without ``ungrouped``)."""
    groups: dict[str, list[str]] = {}

    def collect(group: str, sub: Mapping[str, Any] | None) -> list[str]:
        sub = sub or {}
        hosts = list((sub.get("hosts") or {}).keys())
        for child, child_node in (sub.get("children") or {}).items():
            hosts += collect(str(child), child_node)
        groups[group] = sorted(set(hosts))
        return groups[group]

    collect(name, node)
    return groups


def read_inventory(base: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(gpucluster_* and other variables of group all, groups) of a YAML inventory folder such as
    inventories/tier3: ``group_vars/all/*.yml`` merged in name order, and ``hosts.yml``'s groups.

    For tools and tests that plan an inventory without Ansible (docs/settings.md, the benchmarks); the
    plan play gets the same from Ansible's inventory."""
    site: dict[str, Any] = {}
    for path in sorted((base / "group_vars" / "all").glob("*.yml")):
        site.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    hosts = yaml.safe_load((base / "hosts.yml").read_text(encoding="utf-8"))
    return site, inventory_groups(hosts["all"])


def cluster_plan(site_vars: Mapping[str, Any], groups: Mapping[str, Any]) -> dict[str, Any]:
    """The whole plan from the gpucluster_* variables, the inventory groups and the roles' file lists.

    A run's switches and results (``site.RUN_PREFIXES``: the plan ``gpucluster_plan``, a host's slice
    ``gpucluster_host_plan``, the lock and shutdown switches) are not site data and are left out."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import RUN_PREFIXES
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import assembly

    site = {
        k: v for k, v in site_vars.items() if str(k).startswith("gpucluster_") and not str(k).startswith(RUN_PREFIXES)
    }
    return _run("cluster_plan", assembly.cluster_plan, site, groups, role_files())


def inventory_scope(source: Any, hosts: Any, controller: str = "localhost") -> bool:
    """True, or an error naming the variable: a misspelt site variable, a gpucluster_* variable set on a
    host or a group other than all, gpucluster_plan_root/_dir from the inventory (they are -e choices),
    two hosts with one ansible_host (plugin_utils/inventory/site.py ``check_host_variables``).

    ``source`` is ``hostvars``: each host's variables are read raw (``HostVars.raw_get``, no templating);
    the command line's variables (``-e``) from its variable manager."""
    if not hasattr(source, "raw_get"):
        raise AnsibleFilterError("gpucluster.tiers.inventory_scope: input must be hostvars")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import site

    manager = getattr(source, "_variable_manager", None)
    extra = frozenset(str(k) for k in (getattr(manager, "extra_vars", None) or {}))
    raws = _check_raw_inventory(source, [controller, *[str(h) for h in hosts or []]], controller, extra)
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
    for host, raw in raws.items():
        if isinstance(raw, Mapping) and host not in seen:
            seen[host] = {str(k): once(v) for k, v in site.variables_to_check(dict(raw)).items()}
            if "ansible_host" in raw:
                addresses[host] = {"ansible_host": raw["ansible_host"]}
    try:
        site.check_host_variables(seen, controller=controller, extra_vars=extra)
    except PlanError as exc:
        where = origin(exc.field, [{"hostvars": addresses}]) if exc.field.startswith("hostvars.") else ""
        raise AnsibleFilterError(f"gpucluster.tiers.inventory_scope: {exc}{where}") from None
    return True


def _origin_path(value: Any) -> str | None:
    """The file ansible-core read ``value`` from (its Origin tag, ansible-core 2.19), or None."""
    try:
        from ansible._internal._datatag._tags import Origin
    except ImportError:  # another ansible-core: no origin known
        return None
    tag = Origin.get_tag(value)
    return os.path.realpath(str(tag.path)) if tag is not None and tag.path else None


def _check_raw_inventory(source: Any, hosts: list[str], controller: str, extra: frozenset[str]) -> dict[str, Any]:
    """Each host's raw variables (``HostVars.raw_get``: nothing templated yet; read once, for the caller too),
    checked: the values bounded and free of templates, the host names bounded, ``gpucluster_lab`` from the
    lab's overlay only (plugin_utils/inventory/trust.py).

    Runs before anything converts, walks or templates a value: a template in a ``gpucluster_*`` value
    (``{{ lookup('pipe', ...) }}``) stops the run here, unevaluated (docs/security.md, "Inventory trust")."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import trust
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import RUNTIME_NAMES

    def fail(exc: PlanError, values: Mapping[str, Any]) -> AnsibleFilterError:
        return AnsibleFilterError(f"gpucluster.tiers.inventory_scope: {exc}{origin(exc.field, [values])}")

    try:
        trust.check_host_names(hosts)
    except PlanError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.inventory_scope: {exc}") from None
    checked: set[int] = set()  # group all's values are the same objects on every host: each checked once
    raws: dict[str, Any] = {}  # the raw variables (and so every checked object) stay alive: no id is reused
    for host in dict.fromkeys(hosts):
        raw = raws[host] = source.raw_get(host)
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
                raise fail(exc, {name: value}) from None
            checked.add(id(value))
        if host == controller and trust.LAB_VARIABLE in raw:
            try:
                where = _origin_path(raw[trust.LAB_VARIABLE])
                trust.check_lab_origin(where, COLLECTION_ROOT, from_command_line=trust.LAB_VARIABLE in extra)
            except PlanError as exc:
                raise AnsibleFilterError(f"gpucluster.tiers.inventory_scope: {exc}") from None
    return raws


def host_plan_filter(source: Any, host: str, controller: str = "localhost") -> dict[str, Any]:
    """One host's slice of the plan (plugin_utils/plan/host_plan.py): what a host play names
    ``gpucluster_host_plan``, beside localhost's whole plan ``gpucluster_plan``.

    ``source`` is the plan, or ``hostvars``: then the plan is the controller's ``gpucluster_plan``
    fact read raw (``HostVars.raw_get``). Reading it as ``hostvars['localhost'].gpucluster_plan``
    runs the whole plan through the templating engine on every read (ansible-core 2.19,
    ``HostVarsVars.__getitem__``: about a second per host and task at a thousand nodes). Neither way
    is the plan converted with plain(): the view refers to the plan's own objects, so no host
    copies the shared tables. Where the controller has no plan (site.yml with a --limit that leaves
    localhost out registers it on the limited hosts, one object), the host's own is read."""
    plan = source
    if hasattr(source, "raw_get"):  # ansible.vars.hostvars.HostVars
        facts = source.raw_get(controller)
        plan = facts.get("gpucluster_plan") if isinstance(facts, Mapping) else None
        if plan is None:  # a --limit without localhost: site.yml registered the plan on the limited hosts
            own = source.raw_get(str(host))
            plan = own.get("gpucluster_plan") if isinstance(own, Mapping) else None
        if plan is None:
            raise AnsibleFilterError(
                f"gpucluster.tiers.host_plan: {controller} has no gpucluster_plan: run playbooks/tasks/plan.yml first"
            )
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.host_plan: input must be the plan (a mapping) or hostvars")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import host_plan

    try:
        return host_plan.host_view(plan, str(host))
    except PlanError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.host_plan: {exc}") from None


def plan_sha256(plan: Mapping[str, Any]) -> str:
    """sha256 of the plan's canonical JSON (sorted keys, compact separators), without the keys Ansible
    adds to the registered result (``changed``, ``failed``: plan_data).

    A fact's value reaches a filter as a lazy container (ansible-core 2.19) whose nested values are
    the fact's own, already rendered, containers: unwrapped (``_non_lazy_copy``) they are hashed
    directly; plain() would re-wrap every nested container on the way (seconds for a large plan)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import host_plan as engine

    unwrap = getattr(plan, "_non_lazy_copy", None)
    try:
        return engine.plan_sha256(engine.plan_data(unwrap() if callable(unwrap) else plan))
    except (TypeError, ValueError):  # an unrendered lazy value inside: the slow, always-plain way
        return _run("plan_sha256", lambda p: engine.plan_sha256(engine.plan_data(p)), plan)


def plan_data(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The registered plan without the keys Ansible adds to a task result (``changed``, ``failed``):
    what plan.json holds. The sections stay the plan's own objects."""
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.plan_data: input must be the plan (a mapping)")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import host_plan

    return host_plan.plan_data(plan)


def plan_report(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan report, rendered from the plan (plugin_utils/report/sections.py): ``sections`` (title,
    intro, rows of setting, value, how) and ``summary`` (warnings, next steps). Not part of the plan."""
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.plan_report: input must be the plan (a mapping)")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import host_plan
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import (
        report_sections,
        report_summary,
    )

    unwrap = getattr(plan, "_non_lazy_copy", None)
    data = host_plan.plan_data(unwrap() if callable(unwrap) else plain(plan))
    return _run("plan_report", lambda p: {"sections": report_sections(p), "summary": report_summary(p)}, data)


def audit_request(view: Mapping[str, Any], host: str, layout_client: str = "") -> dict[str, Any]:
    """The audit_facts arguments of a host, from its own view of the plan (plugin_utils/audit/engine.py).

    The view is not converted with plain(): it refers to the plan's shared tables, which a copy per
    host would make O(N^2); the engine reads a few keys of it."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit import request as engine

    try:
        return engine.host_request(view, str(host), str(layout_client) or None)
    except PlanError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.audit_request: {exc}") from None


def audit_findings(
    source: Any,
    hosts: Any,
    settings: Mapping[str, Any] | None = None,
    fabric: Mapping[str, Any] | None = None,
    baseline: Mapping[str, Any] | None = None,
    controller: str = "localhost",
    facts_var: str = "audit_host",
    planned_var: str = "audit_planned",
) -> dict[str, Any]:
    """The audit of the hosts (plugin_utils/audit/engine.py ``audit``), from ``hostvars``.

    Each host's registered ``facts_var`` (audit_facts' result) and ``planned_var`` (render_files'
    checksums) and the controller's plan are read raw (``HostVars.raw_get``: no templating of the whole
    plan); a host without a result was not reached."""
    if not hasattr(source, "raw_get"):
        raise AnsibleFilterError("gpucluster.tiers.audit_findings: input must be hostvars")
    facts = source.raw_get(controller)
    plan = facts.get("gpucluster_plan") if isinstance(facts, Mapping) else None
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError(f"gpucluster.tiers.audit_findings: {controller} has no gpucluster_plan")
    read: dict[str, Any] = {}
    planned: dict[str, Any] = {}
    unreachable: list[str] = []
    for host in [str(h) for h in hosts or []]:
        raw = source.raw_get(host)
        result = raw.get(facts_var) if isinstance(raw, Mapping) else None
        rendered = raw.get(planned_var) if isinstance(raw, Mapping) else None
        if not isinstance(result, Mapping) or "audit" not in result:
            unreachable.append(host)
            continue
        read[host] = plain(result["audit"])
        planned[host] = plain((rendered or {}).get("checksums") or {})
    collected = {
        "hosts": read,
        "planned_files": planned,
        "unreachable": unreachable,
        "fabric": plain(fabric) if fabric else None,
        "baseline": plain(baseline) if baseline else None,
    }
    # the plan as it is (plain() would copy megabytes at a thousand nodes); the collected facts are plain
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit import driver as engine

    try:
        return engine.audit(plan, collected, plain(settings or {}))
    except PlanError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.audit_findings: {exc}") from None


def audit_markdown(result: Mapping[str, Any]) -> str:
    """The audit's readable report (Markdown), one line per finding grouped by host and class."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit import report as engine

    return _run("audit_markdown", engine.report_markdown, result)


def gpu_clocks(model: str, policy: str = "max_performance", **kwargs: Any) -> dict[str, Any]:
    """Clock locks and power limit for a GPU model and policy."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import clocks
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog

    return _run(
        "gpu_clocks", lambda m, p, **kw: clocks.gpu_clocks(catalog.gpu_model(m), p, **kw), model, policy, **kwargs
    )


def gpu_model(model: str) -> dict[str, Any]:
    """The catalog entry of a GPU model, with sources."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog

    return _run("gpu_model", lambda m: catalog.gpu_model_as_dict(catalog.gpu_model(m)), model)


def tier_profile(name: str) -> dict[str, Any]:
    """A reference tier profile (tier1..tier4)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import tiers

    return _run("tier_profile", lambda n: tiers.tier_as_dict(tiers.tier_profile(n)), name)


def roce_traffic_class(dscp: int) -> int:
    """NCCL_IB_TC for a RoCE DSCP value (ToS = DSCP*4 + ECT)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import nccl

    return _run("roce_traffic_class", nccl.roce_traffic_class, dscp)


def fabric_tco(source: Mapping[str, Any], text: bool = False) -> Any:
    """InfiniBand vs RoCEv2 fabric TCO: a plan's ``fabric_tco``, or computed from fabric_tco's arguments."""
    if not isinstance(source, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.fabric_tco: input must be the plan or a mapping of arguments")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import tco

    return _run("fabric_tco", tco.fabric_tco_for, source, text=bool(text))


def _validation_floors(tier: str, **kwargs: Any) -> dict[str, Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import tiers
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import floors

    return floors.validation_floors(tier=tiers.tier_profile(tier), **kwargs)


def grafana_dashboard(board: Mapping[str, Any]) -> str:
    """A dashboard of the plan (plan.monitoring.grafana.dashboards.<key>) as Grafana's dashboard JSON."""
    import json

    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import dashboards

    model = _run("grafana_dashboard", dashboards.dashboard_model, board)
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def prometheus_rules(rules: Mapping[str, Any]) -> str:
    """The head's Prometheus rule file (YAML) from the plan's rule groups (plan.monitoring.rules)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import alerts

    return str(_run("prometheus_rules", alerts.rules_yaml, rules))


def prometheus_rule_tests(tests: Mapping[str, Any]) -> str:
    """The rules' promtool test file (YAML) from the plan's rule tests (plan.monitoring.rule_tests)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import alerts

    return str(_run("prometheus_rule_tests", alerts.rule_tests_yaml, tests))


def nccl_conf_text(conf: Mapping[str, Any]) -> str:
    """/etc/nccl.conf from the plan's NCCL keys (plan.nccl.conf)."""
    if not isinstance(conf, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.nccl_conf_text: input must be the plan's nccl.conf (a mapping)")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import nccl

    return str(_run("nccl_conf_text", nccl.nccl_conf_text, conf))


def nccl_topology_xml(tree: Mapping[str, Any]) -> str:
    """NCCL_TOPO_FILE (/etc/nccl/topo.xml) from the plan's PCI tree (plan.nccl.topology_tree)."""
    if not isinstance(tree, Mapping) or "cpus" not in tree:
        raise AnsibleFilterError(
            "gpucluster.tiers.nccl_topology_xml: input must be the plan's nccl.topology_tree "
            "(set when gpucluster_node.nccl_topology is file)"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import nccl

    return str(_run("nccl_topology_xml", nccl.topology_xml_text, tree))


def mig_parted_config(parted: Mapping[str, Any]) -> str:
    """nvidia-mig-parted's config file (/etc/nvidia-mig-manager/config.yaml) from the plan's gpu.mig.parted."""
    if not isinstance(parted, Mapping) or not isinstance(parted.get("mig-configs"), list):
        raise AnsibleFilterError(
            "gpucluster.tiers.mig_parted_config: input must be the plan's gpu.mig.parted "
            "(version, mig-configs: a list of {name, devices}; set when gpucluster_gpu_policy.mig is)"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import mig

    return str(_run("mig_parted_config", mig.mig_parted_config, parted))


def _mount(name: str, mount: Any) -> Mapping[str, Any]:
    keys = ("what", "where", "type", "options")
    if not isinstance(mount, Mapping) or any(k not in mount for k in keys):
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: input must be a mount of the plan ({', '.join(keys)})")
    return mount


def nfs_mount_unit(mount: Mapping[str, Any], server: str) -> str:
    """An NFS client's systemd mount unit from one of plan.storage.nfs.client_mounts and the NFS server's name."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import nfs

    return str(_run("nfs_mount_unit", nfs.mount_unit_text, _mount("nfs_mount_unit", mount), str(server)))


def lustre_client_unit(mount: Mapping[str, Any], kind: str = "mount") -> str:
    """A Lustre client's systemd unit from plan.storage.lustre.client_mount: its mount unit (kind mount)
    or the oneshot that sets the client tunables after the mount (kind tunables)."""
    keys = ("what", "where", "type", "options", "unit_name", "before", "set_param")
    if not isinstance(mount, Mapping) or any(k not in mount for k in keys):
        raise AnsibleFilterError(
            "gpucluster.tiers.lustre_client_unit: input must be the plan's storage.lustre.client_mount "
            f"({', '.join(keys)})"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import lustre

    texts = {"mount": lustre.mount_unit_text, "tunables": lustre.tunables_unit_text}
    if kind not in texts:
        raise AnsibleFilterError(f"gpucluster.tiers.lustre_client_unit: kind must be mount or tunables, not {kind!r}")
    return str(_run("lustre_client_unit", texts[kind], mount))


def slurm_state_mount_unit(mount: Mapping[str, Any]) -> str:
    """The controllers' systemd mount unit of Slurm's StateSaveLocation from plan.slurm.ha.state_save_mount."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import ha

    return str(_run("slurm_state_mount_unit", ha.state_mount_unit_text, _mount("slurm_state_mount_unit", mount)))


def beegfs_conf(settings: Mapping[str, Any], service: str) -> str:
    """A BeeGFS service's configuration file from plan.storage.beegfs.settings.<service>."""
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(
            "gpucluster.tiers.beegfs_conf: input must be the plan's storage.beegfs.settings.<service>"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import beegfs

    return str(_run("beegfs_conf", beegfs.service_conf_text, settings, service))


def nvmet_config_json(config: Mapping[str, Any]) -> str:
    """An NVMe-oF target's /etc/nvmet/config.json from plan.storage.nvmeof.targets.<host>.config."""
    if not isinstance(config, Mapping):
        raise AnsibleFilterError(
            "gpucluster.tiers.nvmet_config_json: input must be the plan's storage.nvmeof.targets.<host>.config"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import nvmeof

    return str(_run("nvmet_config_json", nvmeof.target_config_json, config))


def grafana_provisioning(monitoring: Mapping[str, Any], kind: str) -> str:
    """Grafana's datasource or dashboard provider provisioning file (YAML) from plan.monitoring."""
    if not isinstance(monitoring, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.grafana_provisioning: input must be the plan's monitoring")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import dashboards

    return str(_run("grafana_provisioning", dashboards.provisioning_yaml, monitoring, kind))


def lnet_conf(lnet: Mapping[str, Any]) -> str:
    """The lnetctl import file (/etc/lnet.conf) from plan.storage.lustre.lnet or server_lnet."""
    if not isinstance(lnet, Mapping) or "net" not in lnet or "interfaces" not in lnet:
        raise AnsibleFilterError(
            "gpucluster.tiers.lnet_conf: input must be an LNet config of the plan (net, interfaces)"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import lustre

    return str(_run("lnet_conf", lustre.lnet_conf_yaml, lnet))


def nvme_discovery_conf(nvmeof: Mapping[str, Any]) -> str:
    """The NVMe-oF initiators' /etc/nvme/discovery.conf from plan.storage.nvmeof (a line a target)."""
    if not isinstance(nvmeof, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.nvme_discovery_conf: input must be the plan's storage.nvmeof")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import nvmeof as nvme

    return str(_run("nvme_discovery_conf", nvme.discovery_conf_text, nvmeof))


def slurm_topology_conf(switches: Any) -> str:
    """Slurm's topology.conf from the plan's switches (plan.fabric.slurm_topology)."""
    switches = plain(switches)
    if not isinstance(switches, list):
        raise AnsibleFilterError(
            "gpucluster.tiers.slurm_topology_conf: input must be the plan's fabric.slurm_topology (a list of switches)"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import cabling

    return str(_run("slurm_topology_conf", cabling.topology_conf_text, switches))


# The engine functions of the filters that take a mapping of arguments (_kwargs_filter), imported on first use.


def _load_nccl_conf() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import nccl_conf

    return nccl_conf


def _load_lustre_layouts() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.lustre import lustre_layouts

    return lustre_layouts


def _load_lustre_client_tunables() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.lustre import lustre_client_tunables

    return lustre_client_tunables


def _load_power_budget() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import power_budget

    return power_budget


def _load_dlc_thresholds() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.cooling import dlc_thresholds

    return dlc_thresholds


def _load_storage_sizing() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import storage_sizing

    return storage_sizing


def _load_parallelism() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.parallelism import parallelism

    return parallelism


def _load_address_plan() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.addresses import address_plan

    return address_plan


def _load_expected_cabling() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.cabling import expected_cabling

    return expected_cabling


class FilterModule:
    """gpucluster.tiers filters."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "cluster_plan": cluster_plan,
            "audit_request": audit_request,
            "audit_findings": audit_findings,
            "audit_markdown": audit_markdown,
            "host_plan": host_plan_filter,
            "inventory_scope": inventory_scope,
            "plan_sha256": plan_sha256,
            "plan_data": plan_data,
            "plan_report": plan_report,
            "gpu_model": gpu_model,
            "gpu_clocks": gpu_clocks,
            "tier_profile": tier_profile,
            "roce_traffic_class": roce_traffic_class,
            "nccl_conf": _kwargs_filter("nccl_conf", _load_nccl_conf),
            "lustre_layouts": _kwargs_filter("lustre_layouts", _load_lustre_layouts),
            "lustre_client_tunables": _kwargs_filter("lustre_client_tunables", _load_lustre_client_tunables),
            "power_budget": _kwargs_filter("power_budget", _load_power_budget),
            "dlc_thresholds": _kwargs_filter("dlc_thresholds", _load_dlc_thresholds),
            "storage_sizing": _kwargs_filter("storage_sizing", _load_storage_sizing),
            "parallelism": _kwargs_filter("parallelism", _load_parallelism),
            "address_plan": _kwargs_filter("address_plan", _load_address_plan),
            "expected_cabling": _kwargs_filter("expected_cabling", _load_expected_cabling),
            "validation_floors": _kwargs_filter("validation_floors", lambda: _validation_floors),
            "fabric_tco": fabric_tco,
            "grafana_dashboard": grafana_dashboard,
            "prometheus_rules": prometheus_rules,
            "prometheus_rule_tests": prometheus_rule_tests,
            "nccl_conf_text": nccl_conf_text,
            "nccl_topology_xml": nccl_topology_xml,
            "mig_parted_config": mig_parted_config,
            "nfs_mount_unit": nfs_mount_unit,
            "lustre_client_unit": lustre_client_unit,
            "slurm_state_mount_unit": slurm_state_mount_unit,
            "beegfs_conf": beegfs_conf,
            "nvmet_config_json": nvmet_config_json,
            "grafana_provisioning": grafana_provisioning,
            "lnet_conf": lnet_conf,
            "slurm_topology_conf": slurm_topology_conf,
            "nvme_discovery_conf": nvme_discovery_conf,
        }
