"""What an inventory value may be before anything reads it (issue 40): data, bounded, from its own place.

These checks run on the inventory's RAW variables (``HostVars.raw_get``: not templated), in the plan
play's first check (the cluster_plan action's first step, as the filter ``gpucluster.tiers.inventory_scope``),
before the plan action templates a single ``gpucluster_*`` value and before any host is contacted
(docs/security.md, "Inventory trust"):

- a ``gpucluster_*`` value is data, never a Jinja template: a string holding ``{{``, ``{%``, ``{#`` or
  starting with ``#jinja2:`` (ansible-core's own test of "possibly a template") is refused, so that a
  ``lookup('pipe', ...)`` in a site's group_vars never runs on the controller;
- every value is bounded before it is walked: nesting depth, the number of values (a YAML alias counts
  once per use, so an "alias bomb" stops at the limit instead of exhausting memory) and string length;
- every inventory host name is bounded (RFC 1123: 253 characters, labels of 63) before Ansible reads its
  variables or its cached facts (a fact cache file is named after the host);
- ``gpucluster_lab`` (container settings: memlock, MPI over TCP, nested containers) comes only from the
  lab's own overlay (``lab/overlay*/`` of this collection): set anywhere else it is refused.

Pure Python, no I/O: the caller passes each value's origin (the file Ansible read it from).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import IO, Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, require

#: Jinja's start strings (ansible-core's defaults) and the override header ansible-core reads as a template
#: even without them (ansible/_internal/_templating/_jinja_bits.py ``is_possibly_template``).
TEMPLATE_MARKS = ("{{", "{%", "{#")
JINJA_HEADER = "#jinja2:"
#: deepest nesting of one variable: the deepest real section (gpucluster_storage.lustre.layouts.<path>.
#: components[i].<key>) is 6 levels; 32 leaves room and stops a 1,000-level document long before Python's
#: recursion limit.
MAX_DEPTH = 32
#: most values (mappings, lists, scalars, each alias use counted) in one variable: a site of 16,384 nodes
#: has a few thousand (tenants' users, layouts); 200,000 is walked in well under a second.
MAX_VALUES = 200_000
#: longest string: Linux's PATH_MAX (4096 bytes, limits.h) covers every path, name and address.
MAX_STRING = 4096
#: a host name: RFC 1123 (253 characters in all, 63 per dot-separated label).
MAX_HOST_NAME = 253
MAX_LABEL = 63
#: a YAML FILE's deepest nesting (mappings and sequences, the file's own levels included), checked on the
#: parser's events before Ansible loads the file: libyaml stops at 1,000 levels with "exceeded maximum nesting
#: depth" and no file or line, and Python's constructors recurse per level. 256 is far below both and far above
#: a real inventory (hosts.yml's all/children/group/hosts/host/vars plus a variable's 32), so a value nested
#: 33 to 255 levels still reaches check_value, whose error names the field.
MAX_FILE_DEPTH = 256
#: most aliases (``*name``) in one YAML file: no reference inventory uses one; each is a reference the
#: variable walk follows (check_value counts what they expand to, naming the field).
MAX_FILE_ALIASES = 10_000
#: where the lab's settings may come from: lab/overlay/ and lab/overlay-<scenario>/ of this collection.
LAB_VARIABLE = "gpucluster_lab"
LAB_OVERLAY = re.compile(r"overlay(-[a-z0-9][a-z0-9-]*)?")
#: what a run registers or sets itself before anything reads it (playbooks/tasks/plan.yml): a second import
#: of the plan tasks in one run (molecule's verify, then validate.yml) finds them in hostvars, holding the
#: plan's own text (a Grafana legend ``{{state}}``). Not checked; every other gpucluster_* value is, the run's
#: switches too (gpucluster_plan_file, gpucluster_lock_*: read as variables, so templated).
RUN_RESULTS = frozenset(
    {"gpucluster_plan", "gpucluster_plan_sha256", "gpucluster_plan_rollout", "gpucluster_plan_known_tiers"}
)


def shown(text: str, keep: int = 40) -> str:
    """A long string cut for a message: its start and its length (a 64 KB value gives a short error)."""
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"


def _template_in(text: str) -> str | None:
    if text.startswith(JINJA_HEADER):
        return JINJA_HEADER
    return next((mark for mark in TEMPLATE_MARKS if mark in text), None)


def _field(name: str, path: list[Any]) -> str:
    out = name
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


def check_value(name: str, value: Any) -> None:
    """Refuse a template, too deep a nesting, too many values or too long a string in the variable ``name``.

    Walks the value once, depth first, counting every value it meets (an alias met twice counts twice),
    and stops at the first limit: bounded time and memory whatever the document."""
    count = 0
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise PlanError(
                _field(name, path),
                f"<{name} holds more than {MAX_VALUES} values>",
                f"at most {MAX_VALUES} values in one variable (a YAML alias counts each time it is used: "
                "aliases of aliases multiply, an 'alias bomb'); write the list out or shorten it",
            )
        if len(path) > MAX_DEPTH:
            raise PlanError(
                _field(name, path[:MAX_DEPTH]) + "...",
                f"<nested {len(path)} levels deep>",
                f"at most {MAX_DEPTH} levels of nested mappings and lists in one variable",
            )
        if isinstance(node, str):
            _check_string(_field(name, path), node)
        elif isinstance(node, Mapping):
            for key in node:
                if isinstance(key, str):
                    _check_string(_field(name, [*path, "<key>"]), key)
                stack.append((node[key], [*path, str(key)]))
        elif isinstance(node, (list, tuple)):
            stack.extend((item, [*path, i]) for i, item in enumerate(node))


def _check_string(field: str, text: str) -> None:
    require(
        len(text) <= MAX_STRING,
        field,
        shown(text),
        f"a string of at most {MAX_STRING} characters (Linux's PATH_MAX), not {len(text)}",
    )
    mark = _template_in(text)
    require(
        mark is None,
        field,
        shown(text, 80),
        f"plain text without a Jinja template (it holds {mark!r}): a gpucluster_* value is data, and the plan "
        "refuses templates before Ansible evaluates one (docs/security.md, 'Inventory trust'); write the value "
        "itself",
    )


def check_host_names(hosts: list[Any]) -> None:
    """Every inventory host name at most 253 characters, labels of at most 63 (RFC 1123), before Ansible
    reads the host's variables or facts; the full rules (lowercase, digits, '-') follow in site.py."""
    for host in hosts:
        name = str(host)
        longest = max((len(label) for label in name.split(".")), default=0)
        require(
            len(name) <= MAX_HOST_NAME and longest <= MAX_LABEL,
            "inventory host name",
            shown(name),
            f"a host name of at most {MAX_HOST_NAME} characters, each dot-separated label at most {MAX_LABEL} "
            f"(RFC 1123); this one has {len(name)} characters",
        )


def check_lab_origin(value_origin: str | None, collection_root: PurePath, *, from_command_line: bool) -> None:
    """``gpucluster_lab`` only from ``<collection>/lab/overlay*/``: the lab's own inventory source.

    ``value_origin`` is the file Ansible read the value from (its Origin tag), None when it has none."""
    lab = collection_root / "lab"
    allowed = False
    if value_origin and not from_command_line:
        path = PurePath(value_origin)
        try:
            rest = path.relative_to(lab)
        except ValueError:
            rest = None
        allowed = (
            rest is not None
            and len(rest.parts) >= 2
            and ".." not in rest.parts
            and bool(LAB_OVERLAY.fullmatch(rest.parts[0]))
        )
    require(
        allowed,
        LAB_VARIABLE,
        f"set in {value_origin}" if value_origin and not from_command_line else "set on the command line (-e)",
        f"{LAB_VARIABLE} only from the lab's own overlay ({lab}/overlay/ or overlay-<scenario>/, which make lab "
        "and molecule add as an inventory source): its container settings (memlock limit, MPI over TCP, nested "
        "containers, no checkpoint drain mount) would weaken a real cluster; remove it from this inventory",
    )


#: YAML's tag of text: a plain (unquoted) host name YAML resolves to any other tag is no name.
_STR_TAG = "tag:yaml.org,2002:str"


def coerced_host_names(text: str) -> list[tuple[str, int, str]]:
    """(name as written, line, what YAML reads) of every unquoted host name in a YAML inventory's ``text``
    that YAML reads as something else than text (``yes``, ``null``, ``010``): ansible-core's yaml plugin
    refuses such a file with "Host pattern True must be a string", naming neither the host nor the file.

    Composes the document (nodes, no construction: an alias is not expanded) and reads the keys of every
    ``hosts:`` mapping; a document that is no YAML gives none (Ansible's own error says why)."""
    import yaml

    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.values import yaml_reading

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return []
    found: list[tuple[str, int, str]] = []
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(root, 0)] if root is not None else []
    while stack:
        node, depth = stack.pop()
        if id(node) in seen or depth > MAX_DEPTH or not isinstance(node, yaml.MappingNode):
            continue
        seen.add(id(node))
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "hosts" and isinstance(value, yaml.MappingNode):
                for host, _vars in value.value:
                    if isinstance(host, yaml.ScalarNode) and host.style is None and host.tag != _STR_TAG:
                        reading = yaml_reading(host.value) or host.tag.rsplit(":", 1)[-1]
                        found.append((host.value, host.start_mark.line + 1, reading))
            stack.append((value, depth + 1))
    return sorted(found, key=lambda f: f[1])


def yaml_limits(text: str | bytes | IO[str] | IO[bytes]) -> tuple[int, str] | None:
    """(line, what is over) for the first place a YAML document goes deeper than :data:`MAX_FILE_DEPTH` or
    uses more than :data:`MAX_FILE_ALIASES` aliases, else None; None too for text that is no YAML (Ansible's
    own error names the file and line).

    Reads the parser's events (yaml.parse): one pass, no recursion, nothing constructed, an alias not
    expanded, and it stops at the first event over a limit. libyaml's scanner refuses 1,000 nested flow levels
    itself before its parser emits them: that error's own line is taken (libyaml's message names no file)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return _limits_in(yaml.parse(text, Loader=loader))
    except yaml.MarkedYAMLError as error:
        if "maximum nesting depth" in str(error.problem):
            mark = error.context_mark or error.problem_mark
            return (mark.line + 1 if mark is not None else 0), f"nests more than {MAX_FILE_DEPTH} levels deep"
        return None
    except yaml.YAMLError:
        return None


def _limits_in(events: Any) -> tuple[int, str] | None:
    import yaml

    depth = aliases = 0
    for event in events:
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_FILE_DEPTH:
                return _line(event), f"nests more than {MAX_FILE_DEPTH} levels deep"
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_FILE_ALIASES:
                return _line(event), f"uses more than {MAX_FILE_ALIASES} aliases (*name)"
    return None


def _line(event: Any) -> int:
    mark = getattr(event, "start_mark", None)
    return mark.line + 1 if mark is not None else 0


def yaml_limit_message(path: str, line: int, what: str) -> str:
    """The error for :func:`yaml_limits`' finding in the file ``path``."""
    return (
        f"{path}:{line}: the YAML {what}: at most {MAX_FILE_DEPTH} levels of nested mappings and lists in one "
        f"file and {MAX_FILE_ALIASES} aliases (a site variable holds at most {MAX_DEPTH} levels); checked before "
        "Ansible reads the file (docs/security.md, 'Inventory trust')"
    )
