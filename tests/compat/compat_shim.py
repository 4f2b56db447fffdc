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
