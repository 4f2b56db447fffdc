"""Shared documentation of the modules' attributes (extends_documentation_fragment).

The attribute descriptions every module of this collection repeats: what check mode, diff mode
and facts mean for them. Each module still says its own ``support`` level. The shape follows
ansible-core's action_common_attributes and community.general's attributes fragment.
"""

from __future__ import annotations


class ModuleDocFragment:
    """gpucluster.tiers.attributes (check_mode, diff_mode) and its variants."""

    # every module: extends_documentation_fragment: [gpucluster.tiers.attributes]
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return the changed status it would report, without changing the target.
  diff_mode:
    description: Returns details on what has changed (or would change, in check mode) when run with C(--diff).
"""

    # modules that return ansible_facts: gpucluster.tiers.attributes.facts
    FACTS = r"""
options: {}
attributes:
  facts:
    description: Returns an C(ansible_facts) dictionary that updates the host's facts.
"""
