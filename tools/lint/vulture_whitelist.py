"""Names that plugins/ and tools/ never use, yet are no dead code (tools/lint/dead_code.py, make lint).

Each line names one as an attribute of ``_`` (vulture counts a name used wherever it appears); the comment
says who uses it. A new entry needs such a reason: a name nobody uses is removed instead.
"""

# ruff: noqa: B018  (each line is an expression that names a used name: vulture's whitelist format)
from __future__ import annotations

from typing import Any

_: Any = None

# Ansible loads these by name: plugin classes, their class attributes and the documentation strings
# (ansible-doc, ansible-test sanity's validate-modules)
_.ActionModule  # plugins/action/*.py
_.TRANSFERS_FILES  # ActionBase: the action copies no file to the host
_.FilterModule  # plugins/filter/*.py, tools/bench/filter_plugins/*.py
_.InventoryModule  # plugins/inventory/tiers.py
_.NAME  # an inventory plugin's name
_.verify_file  # BaseInventoryPlugin: whether the plugin reads a source
_.VarsModule  # plugins/vars/yaml_limits.py
_.ModuleDocFragment  # plugins/doc_fragments/attributes.py
_.DOCUMENTATION
_.EXAMPLES
_.FACTS  # a doc fragment's named part (extends_documentation_fragment: gpucluster.tiers.attributes.facts)

# set or called by a library, not by our code
_.is_stateless  # ansible-core's plugin loader caches a vars plugin with it (plugins/vars/yaml_limits.py)
_.log_errors  # re2.Options (tools/k8s/validate_manifests.py): the library reads it
_._is_re2  # registered by its decorator as a jsonschema format check (tools/k8s/validate_manifests.py)

# used by the tests, the lab's checks or the playbooks only (their own API, kept with the code it tests)
_.has_data_tagging  # tests/compat/compat_shim.py, tests/unit/plugins/plugin_utils/test_ansible_compat.py
_.tag_origin  # tests/unit (inventory values tagged as ansible-core 2.19 tags them)
_.PLAN_TASK  # tests/unit/repo/test_runner.py: the task name tools/ci/run_plan.py waits for
_.run_sm_check  # molecule/shared/tests/test_opensm.py, tests/unit/plugins/modules/test_fabric_check.py
_.perfquery_ports  # molecule/shared/tests/test_opensm.py, tests/unit/plugins/plugin_utils/fabric/test_ibsim.py
_.parse_lgip  # tests/unit/plugins/plugin_utils/compute/test_mig.py (docs/settings.md names it)
_.PCIE_GTS  # tests/unit/plugins/plugin_utils/compute/test_interconnect.py
_.LIMIT_SOURCES  # tests/unit/plugins/plugin_utils/compute/test_power.py
_.SOURCE  # inventory/catalog.py: tests/unit/plugins/plugin_utils/compute/test_bringup.py, test_nvlink5.py
_.DASHBOARDS  # tests/unit/plugins/plugin_utils/monitoring/test_dashboards.py
_.C2C_GBS_PER_DIRECTION  # tests/unit/plugins/plugin_utils/storage/test_checkpoint.py
_.mdadm_conf_lines  # tests/unit/plugins/plugin_utils/storage/test_storage_plan.py
_.IB_LAT_MSG_BYTES  # validation/gates.py: playbooks/validate.yml's ib_write_lat message size
