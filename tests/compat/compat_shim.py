"""pytest plugin for the unit tests on an older ansible-core (make compat; tools/ci/compat.py).

The unit tests call ``ansible.module_utils.testing.patch_module_args``, which ansible-core 2.19 added.
On an older release line this plugin provides the same context manager (module args handed to
AnsibleModule through ``basic._ANSIBLE_ARGS``, as 2.16-2.18 read them) before any test is imported.
It changes nothing on 2.19 and later, where the real module is used.
"""

from __future__ import annotations

import contextlib
import json
import sys
import types
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

try:
    import ansible.module_utils.testing  # noqa: F401 (ansible-core >= 2.19)
except ImportError:
    from ansible.module_utils import basic

    @contextlib.contextmanager
    def patch_module_args(args: dict[str, Any] | None = None) -> Iterator[None]:
        """Expose ``args`` to AnsibleModule instances created within this context (2.19's API)."""
        if not isinstance(args, (dict, type(None))):
            raise TypeError("The `args` arg must be a dict or None.")
        data = json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode()
        with mock.patch.object(basic, "_ANSIBLE_ARGS", data):
            yield

    testing = types.ModuleType("ansible.module_utils.testing")
    testing.patch_module_args = patch_module_args  # type: ignore[attr-defined]
    sys.modules["ansible.module_utils.testing"] = testing

#: tests of ansible-core 2.19's data tagging (values tagged with their origin, plugin_utils/ansible_compat.py):
#: nothing to test before 2.19, where values carry no origin. A name listed here that no longer
#: exists fails the run, so the list cannot go stale.
NEEDS_DATA_TAGGING = frozenset({
    "tests/unit/plugins/filter/test_filters.py::test_a_misspelt_choice_gets_a_did_you_mean_and_the_file_it_was_set_in",
    "tests/unit/plugins/filter/test_filters.py::test_mig_parted_config_writes_values_ansible_tagged",
})  # fmt: skip


def _has_data_tagging() -> bool:
    # imported here, not at the top: the collection is on sys.path once pytest has read its ini (pythonpath)
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.ansible_compat import has_data_tagging

    return has_data_tagging()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ids = {item.nodeid for item in items}
    missing = sorted(NEEDS_DATA_TAGGING - ids)
    if missing and {i.split("::")[0] for i in missing} <= {i.split("::")[0] for i in ids}:
        raise pytest.UsageError(
            f"tests/compat/compat_shim.py NEEDS_DATA_TAGGING names tests that do not exist: {missing}"
        )
    if _has_data_tagging():
        return
    skip = pytest.mark.skip(reason="needs ansible-core 2.19's data tagging (origin tags)")
    for item in items:
        if item.nodeid in NEEDS_DATA_TAGGING:
            item.add_marker(skip)
