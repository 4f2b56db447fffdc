"""What every filter of the collection does around its engine call (plugins/filter/*.py).

A filter converts Ansible's containers to plain data (plain()), calls one engine function and turns a
PlanError into an AnsibleFilterError that names the inventory field, the value, what is allowed and,
where ansible-core knows it, the file the value was set in (plugin_utils/inventory/origin.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.origin import origin
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain


def run(name: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func`` on the plain arguments; its PlanError (with the value's origin) or TypeError as the filter
    ``name``'s AnsibleFilterError."""
    try:
        return func(*[plain(a) for a in args], **{k: plain(v) for k, v in kwargs.items()})
    except PlanError as exc:
        where = origin(exc.field, [a for a in (*args, *kwargs.values()) if isinstance(a, Mapping)])
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: {exc}{where}") from None
    except TypeError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: bad arguments: {exc}") from None


def kwargs_filter(name: str, load: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    """A filter taking a mapping of the arguments of the engine function that ``load`` imports and
    returns (on the filter's first call, not when the filter file loads)."""

    def call(options: Mapping[str, Any], **more: Any) -> Any:
        if not isinstance(options, Mapping):
            raise AnsibleFilterError(f"gpucluster.tiers.{name}: input must be a mapping of the function's arguments")
        return run(name, load(), **{**plain(options), **more})

    call.__name__ = name
    return call
