"""The plan's sections as the plan stage registers them: read-only mappings that Ansible keeps by reference.

playbooks/tasks/plan.yml registers the gpucluster.tiers.cluster_plan action's result as ``gpucluster_plan``.
ansible-core copies a registered result in the main process, value by value: ``module_response_deepcopy``
and ``strip_internal_keys`` (ansible/vars/clean.py) walk every ``dict`` and ``list`` (every
``MutableMapping``/``MutableSequence``) of it. At 16,384 nodes the plan has 1.5 million containers and that
walk took 6-7 s and a second copy of the plan (the stage's peak memory; docs/performance.md). Both leave
any other value as it is, so the action hands each mapping section over as a :class:`PlanSection`: a
read-only ``Mapping`` over the section's own dict, which the copy keeps by reference.

Readers see a mapping as before: Jinja's ``gpucluster_plan.hosts[name]``, ``dict2items``, ``to_json``,
``plain()`` and every ``Mapping`` check work on it unchanged, and its values are the plan's plain dicts and
lists. :func:`section_data` gives the dict back (``plan_data`` does, for a host's view and plan.json). A
template result that is a whole section (a ``set_fact`` value, a module argument) is stored by ansible-core
2.19 as a dict, with a warning: pass ``dict(gpucluster_plan.<section>)`` or the ``plan_data`` of the plan.

The registered plan lives as long as the run and is never changed. :func:`_restore` (what the main process
runs when it unpickles the worker's result) hands it to ``gc.freeze()``: the cyclic garbage collector no longer
walks its containers on every full collection, nor writes to their pages in each forked worker (which
copied them: copy-on-write), the use the Python documentation gives for ``gc.freeze``.
"""

from __future__ import annotations

import gc
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any


class PlanSection(Mapping[str, Any]):
    """A plan section (a dict) behind a read-only ``Mapping``: kept by reference where Ansible copies a
    registered result's dicts and lists. Equal to a mapping with the same items."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def keys(self) -> KeysView[str]:
        return self.data.keys()

    def items(self) -> ItemsView[str, Any]:
        return self.data.items()

    def values(self) -> ValuesView[Any]:
        return self.data.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PlanSection):
            return self.data == other.data
        return self.data == other if isinstance(other, dict) else Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]  # a mapping, unhashable like a dict

    def __repr__(self) -> str:
        return f"PlanSection({self.data!r})"

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return _restore, (self.data,)


def _restore(data: dict[str, Any]) -> PlanSection:
    """Unpickling (the main process receiving the action's result): the section, its objects frozen (module
    docstring). ``gc.freeze`` moves every object tracked so far to the permanent generation; it costs no walk."""
    gc.freeze()
    return PlanSection(data)


def for_registration(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan with each mapping section as a :class:`PlanSection` (the other sections as they are)."""
    return {name: PlanSection(value) if isinstance(value, dict) else value for name, value in plan.items()}


def section_data(value: Any) -> Any:
    """A :class:`PlanSection`'s dict; any other value as it is."""
    return value.data if isinstance(value, PlanSection) else value


__all__ = ["PlanSection", "for_registration", "section_data"]
