"""The one home of the ansible-core interfaces this collection uses that are not public API.

Every use of a private ansible-core name (a module under ``ansible._internal``, an attribute with a
leading underscore, a method ansible-core documents as internal) goes through this module, so that a
new ansible-core release is checked here and nowhere else. Checked on ansible-core 2.18 (``make
compat`` runs the unit tests and every reference plan on the 2.18 line) and 2.19 (the project's venv);
meta/runtime.yml ``requires_ansible`` names the lines supported.

Each interface, the releases it was checked on and what breaks when it changes:

- ``ansible._internal._datatag._tags.Origin`` (2.19; absent in 2.18, where values carry no origin):
  the file and line a value was loaded from. Used by :func:`origin_of` and :func:`tag_origin`. If it
  moves or changes, an inventory error loses its `` (set in <file>:<line>)`` suffix (the import is
  guarded: nothing fails) and ``gpucluster_lab`` set in the lab overlay is refused as "not from the
  lab's overlay" (trust.check_lab_origin gets no file): the lab's scenarios fail their plan play.
- ``HostVars.raw_get(host)`` (``ansible.vars.hostvars``, 2.18 and 2.19): a host's variables without
  templating. Used by :func:`raw_host_variables` (inventory_scope, host_plan) and by the audit_findings
  filter (plugins/filter/gpucluster.py, which calls it directly until the audit's split moves it here). If it
  goes, those filters fail with "input must be hostvars"; read through ``hostvars[host]`` instead, every
  value would be templated before the trust check (docs/security.md, "Inventory trust") and the plan
  rendered per host and task (about a second each at a thousand nodes).
- ``HostVars._inventory``, ``._variable_manager``, ``._loader``, ``InventoryManager._sources``,
  ``VariableManager._fact_cache``/``._vars_cache``/``._nonpersistent_fact_cache``/``.safe_basedir`` and
  ``ansible.vars.plugins.get_vars_from_inventory_sources``/``get_vars_from_path`` (2.18 and 2.19): where
  ``VariableManager.get_vars`` takes a host's variables from, read once for all hosts. Used by
  :func:`hosts_of_group_all` (inventory_scope: ``get_vars`` per host was a third of the plan stage at
  16,384 nodes). If they change, the function finds no such host and every host is read with
  ``raw_get``: the same check, slower.
- ``HostVars._variable_manager.extra_vars`` (2.18 and 2.19): the names given with ``-e``. Used by
  :func:`extra_variable_names`. If it goes, the names read as empty: a ``gpucluster_*`` variable given
  with ``-e`` is then checked as inventory data (a template in it refused) and ``gpucluster_lab`` from
  the command line is refused.
- ``_AnsibleLazyTemplateMixin._non_lazy_copy()`` (2.19's lazy containers; absent in 2.18): a fact's
  container without its lazy wrapper. Used by :func:`non_lazy_copy` (plan_sha256, plan_report). If it
  goes, those filters take plain()'s copy: the same result, seconds slower on a large plan.
- ``ansible._internal._templating._template_vars.generate_ansible_template_vars`` (2.19) and
  ``ansible.template.generate_ansible_template_vars`` (2.18): a template's own variables
  (``ansible_managed``, ``template_path``...). Used by :func:`template_file_variables` (render_files,
  host_files). If it changes, rendering fails with an ImportError or TypeError (make plan, every role).
- ``Templar.copy_with_new_env`` with ``template(..., overrides=...)`` (2.19) and with
  ``environment_class=AnsibleEnvironment``, ``newline_sequence`` and ``do_template(...,
  preserve_trailing_newlines=...)`` (2.18): rendering a role template as ``ansible.builtin.template``
  does. Used by :func:`render_template` and :func:`template_value`. If it changes, the rendered files
  differ or rendering fails: the golden host-file list (tests/unit/repo/golden) shows it.
- ``Task._role`` and ``Role._role_path`` (2.18 and 2.19): the folder of the role a task belongs to. Used
  by :func:`task_role_path` (host_files without ``template_root``). If they change, host_files fails with
  an AttributeError or asks for template_root: pass ``template_root`` then.

Not used: ansible-core's ``is_possibly_template`` (``ansible/_internal/_templating/_jinja_bits.py``): the
inventory check's test for a template is the collection's own (inventory/trust.py ``TEMPLATE_MARKS``,
``JINJA_HEADER``), the same marks; if ansible-core adds a mark, trust.py is where to add it.

``ansible.template.trust_as_template`` (2.19) is public, but absent in 2.18: :func:`trust_as_template`
gives the text as it is there, where every template text is trusted.

Imports of ansible-core happen inside the functions (or guarded at the top): this module loads cheaply
where a filter file loads it in every forked worker, and is importable without ansible-core's private
modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

try:  # ansible-core >= 2.19: the data-tagging template engine
    from ansible._internal._templating import _template_vars as _TEMPLATE_VARS
    from ansible.template import trust_as_template as _trust_as_template
except ImportError:  # ansible-core 2.16-2.18 (meta/runtime.yml requires_ansible; make compat tests 2.18)
    _TEMPLATE_VARS = None
    _trust_as_template = None

#: True on ansible-core before 2.19 (no data tagging: the legacy Templar renders).
LEGACY_TEMPLAR: bool = _TEMPLATE_VARS is None

T = TypeVar("T")


class InventoryHost(Protocol):
    """What the collection uses of ansible-core's inventory host (``ansible.inventory.host.Host``)."""

    vars: Mapping[str, object]

    def get_groups(self) -> list[Any]:
        """The host's groups and their ancestors (``all`` among them)."""


class RawHostVars(Protocol):
    """What the collection uses of ansible-core's ``hostvars`` (``ansible.vars.hostvars.HostVars``)."""

    def raw_get(self, host_name: str, /) -> Any:
        """A host's variables, nothing templated (a mapping; ansible-core's undefined for an unknown host)."""


def origin_of(value: object) -> tuple[str, int | None] | None:
    """(file, line) ansible-core read ``value`` from (its Origin tag, ansible-core 2.19), or None: no tag,
    or an ansible-core without data tagging."""
    try:
        from ansible._internal._datatag._tags import Origin
    except ImportError:  # another ansible-core: no origin known
        return None
    tag = Origin.get_tag(value)
    if tag is None or not tag.path:
        return None
    return str(tag.path), tag.line_num


def has_data_tagging() -> bool:
    """Whether this ansible-core tags values with their origin (2.19 and later)."""
    try:
        import ansible._internal._datatag._tags  # noqa: F401
    except ImportError:
        return False
    return True


def tag_origin(value: T, path: str, line: int | None = None) -> T:
    """``value`` tagged with the origin ``path:line``, as ansible-core 2.19 tags what it loads from a file
    (tests build inventory values this way). ansible-core without data tagging: ``value`` as it is."""
    try:
        from ansible._internal._datatag._tags import Origin
    except ImportError:
        return value
    tagged: T = Origin(path=path, line_num=line).tag(value)
    return tagged


def is_hostvars(source: object) -> bool:
    """Whether ``source`` is ansible-core's ``hostvars`` (``ansible.vars.hostvars.HostVars``): it reads raw."""
    return hasattr(source, "raw_get")


def raw_host_variables(hostvars: RawHostVars, host: str) -> Any:
    """A host's variables as ansible-core holds them, nothing templated (``HostVars.raw_get``)."""
    return hostvars.raw_get(host)


def hosts_of_group_all(
    hostvars: object, hosts: Iterable[str], relevant: Callable[[str], bool]
) -> dict[str, dict[str, object]]:
    """The hosts among ``hosts`` whose variables named ``relevant`` come from group all, ``-e`` or the host
    itself only, each with the relevant variables it sets itself: its inventory ``ansible_host`` (a relevant
    name other than ``ansible_host`` in its inventory variables leaves it out), then its run's variables
    (include_vars, then set_fact and register), in ``VariableManager.get_vars``' order; the other hosts are
    left out.

    For such a host, ``raw_get`` gives group all's value (the same objects for every such host) of every
    relevant name it does not set itself; ``get_vars`` would find that per host, at about half a millisecond
    each. Left out: a host in a group other than all that sets a relevant name (in the inventory or a vars
    plugin's group_vars), a host with cached facts, and every host where group all sets ``ansible_host`` or a
    vars plugin's host_vars set a relevant name (read once for all hosts). Empty where ansible-core's
    inventory is not reachable as expected: the caller reads every host with raw_get then."""
    inventory = getattr(hostvars, "_inventory", None)
    manager = getattr(hostvars, "_variable_manager", None)
    loader = getattr(hostvars, "_loader", None)
    try:
        from ansible.vars.plugins import get_vars_from_inventory_sources, get_vars_from_path

        sources = list(inventory._sources)  # type: ignore[union-attr]  # an AttributeError: {} below
        inventory_hosts: Mapping[str, Any] = inventory.hosts  # type: ignore[union-attr]
        inventory_groups: Mapping[str, Any] = inventory.groups  # type: ignore[union-attr]
        facts = manager._fact_cache  # type: ignore[union-attr]
        run_vars: list[Mapping[str, Mapping[str, Any]]] = [
            manager._vars_cache,  # type: ignore[union-attr]
            manager._nonpersistent_fact_cache,  # type: ignore[union-attr]
        ]
        basedirs = [loader.get_basedir()] if manager.safe_basedir else []  # type: ignore[union-attr]
    except (AttributeError, ImportError, TypeError):
        return {}

    def plugins(entities: list[Any]) -> Mapping[str, Any]:
        # what get_vars merges from the vars plugins, beside the inventory sources and the playbook (stage 'task')
        data = dict(get_vars_from_inventory_sources(loader, sources, entities, "task"))
        for path in basedirs:
            data.update(get_vars_from_path(loader, path, entities, "task"))
        return data

    def sets(values: Mapping[str, Any]) -> bool:
        return any(relevant(str(k)) for k in values)

    every = inventory_groups.get("all")
    try:
        found = {h: inventory_hosts.get(h) for h in dict.fromkeys(str(h) for h in hosts)}
        chosen: dict[str, InventoryHost] = {
            h: host for h, host in found.items() if host is not None and not facts.contains(h)
        }
        if every is None or "ansible_host" in every.vars or "ansible_host" in plugins([every]):
            return {}  # one address for every host from group all: a host's own is not its inventory variable
        if not chosen or sets(plugins(list(chosen.values()))):
            return {}
        marked = {
            name
            for name, group in inventory_groups.items()
            if name != "all" and (sets(group.vars) or sets(plugins([group])))
        }
    except (AttributeError, TypeError):
        return {}
    common: dict[str, dict[str, object]] = {}
    for h, host in chosen.items():
        if any(str(k) != "ansible_host" and relevant(str(k)) for k in host.vars):
            continue
        if any(g.name in marked for g in host.get_groups()):
            continue
        own: dict[str, object] = {"ansible_host": host.vars["ansible_host"]} if "ansible_host" in host.vars else {}
        for cache in run_vars:
            own.update((str(k), v) for k, v in (cache.get(h) or {}).items() if relevant(str(k)))
        common[h] = own
    return common


def extra_variable_names(hostvars: object) -> frozenset[str]:
    """The names of the command line's variables (``-e``), from ``hostvars``' variable manager."""
    manager = getattr(hostvars, "_variable_manager", None)
    return frozenset(str(k) for k in (getattr(manager, "extra_vars", None) or {}))


def non_lazy_copy(value: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A fact's lazy container (ansible-core 2.19) without its wrapper, its nested values the fact's own
    already rendered containers (``_non_lazy_copy``); None where ``value`` is not one."""
    unwrap = getattr(value, "_non_lazy_copy", None)
    if not callable(unwrap):
        return None
    copy: Mapping[str, Any] = unwrap()
    return copy


def task_role_path(task: object) -> str | None:
    """The folder of the role a task belongs to (``Task._role._role_path``), None for a task of no role."""
    role = getattr(task, "_role", None)
    return None if role is None else str(role._role_path)


def trust_as_template(text: str) -> Any:
    """``text`` marked as a template to render (ansible-core 2.19); as it is before 2.19."""
    return text if _trust_as_template is None else _trust_as_template(text)


def template_file_variables(src: str, fullpath: str, dest: str) -> dict[str, Any]:
    """The variables ansible.builtin.template adds for a template (``ansible_managed``, ``template_path``...)."""
    if _TEMPLATE_VARS is None:
        from ansible.template import generate_ansible_template_vars  # 2.16-2.18 only

        return dict(generate_ansible_template_vars(src, fullpath, dest))
    return dict(
        _TEMPLATE_VARS.generate_ansible_template_vars(
            path=src, fullpath=fullpath, dest_path=dest, include_ansible_managed=True
        )
    )


def render_template(templar: Any, data: Any, searchpath: str, variables: Mapping[str, Any]) -> str:
    """A role template's text rendered as ansible.builtin.template renders it: trim_blocks on, backslashes
    kept, "\\n" line ends, trailing newlines kept, text (never native types)."""
    overrides = {"trim_blocks": True, "lstrip_blocks": False}
    if LEGACY_TEMPLAR:
        from ansible.template import AnsibleEnvironment  # 2.16-2.18 only

        legacy = templar.copy_with_new_env(
            environment_class=AnsibleEnvironment,  # never native types: a file is text
            searchpath=[searchpath],
            newline_sequence="\n",
            available_variables=variables,
        )
        text = legacy.do_template(data, preserve_trailing_newlines=True, escape_backslashes=False, overrides=overrides)
        return str(text or "")
    copy = templar.copy_with_new_env(searchpath=[searchpath], available_variables=variables)
    text = copy.template(data, escape_backslashes=False, overrides=overrides)
    return str(text or "")


def template_value(templar: Any, value: str, variables: Mapping[str, Any]) -> Any:
    """``value`` (an expression) templated once with ``variables``."""
    return templar.copy_with_new_env(available_variables=variables).template(value)
