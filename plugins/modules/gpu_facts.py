#!/usr/bin/python
"""Read the GPUs of a host with nvidia-smi and check the plan's clocks and power against them."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read GPU limits with nvidia-smi and check the GPU plan against them
version_added: 0.1.0
description:
  - Runs C(nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits) and C(nvidia-smi -q -d TEMPERATURE)
    and returns the GPUs as the C(gpucluster_gpus) fact. FIELDS are index, name, uuid, pci.bus_id,
    clocks.max.sm, clocks.max.mem, power.min_limit, power.default_limit, power.max_limit, temperature.gpu
    and ecc.errors.uncorrected.volatile.total, comma-separated.
  - Reads both forms of the thermal thresholds, the absolute one (C(GPU Max Operating Temp)) and the
    T.Limit one of newer drivers (C(GPU Max Operating T.Limit Temp), headroom in C).
  - A host without nvidia-smi, without a loaded driver or without GPUs is not an error; the fact then
    says C(gpu_present=false) and why.
  - With O(plan_gpu), fails when the planned SM or memory clock lock or power limit lies outside what
    a GPU reports (clocks.max.sm, clocks.max.mem, power.min_limit, power.max_limit). The hardware wins
    over the catalog.
  - Only reads, so it never reports a change and runs the same in check mode.
options:
  nvidia_smi:
    description: Path of nvidia-smi; found in E(PATH) when not given.
    type: path
  plan_gpu:
    description: The plan's C(gpu) section (C(gpucluster_host_plan.gpu)); its C(clocks) are checked against each GPU.
    type: dict
  query_output:
    description:
      - Recorded output of the C(--query-gpu) command, used instead of running nvidia-smi.
      - When set, nvidia-smi is not run at all; the thermal section then comes from O(temperature_output) only.
    type: str
  temperature_output:
    description: Recorded output of C(nvidia-smi -q -d TEMPERATURE), used instead of running it.
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
extends_documentation_fragment:
  - gpucluster.tiers.attributes
  - gpucluster.tiers.attributes.facts
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the GPUs and check the plan's clock lock and power limit against them
  gpucluster.tiers.gpu_facts:
    plan_gpu: "{{ gpucluster_host_plan.gpu }}"

- name: Parse recorded output (no GPU needed)
  gpucluster.tiers.gpu_facts:
    query_output: "{{ lookup('ansible.builtin.file', 'h100-query.csv') }}"
    temperature_output: "{{ lookup('ansible.builtin.file', 'h100-temperature.txt') }}"

- name: Show what was found
  ansible.builtin.debug:
    msg: "{{ gpucluster_gpus.count }} GPUs, driver {{ gpucluster_gpus.driver_version }}"
  when: gpucluster_gpus.gpu_present
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    gpucluster_gpus:
      description: The host's GPUs.
      type: dict
      contains:
        gpu_present:
          description: Whether nvidia-smi found at least one GPU.
          type: bool
        reason:
          description: Why there are no GPUs (nvidia-smi missing, driver not loaded, no device); null otherwise.
          type: str
        count:
          description: Number of GPUs.
          type: int
        driver_version:
          description: Driver version from the temperature report, when it was read.
          type: str
        gpus:
          description:
            - One item per GPU, keys index, name, uuid, pci_bus_id, max_sm_mhz, max_mem_mhz, power_min_w,
              power_default_w, power_max_w, temperature_c, ecc_uncorrected_volatile (null where nvidia-smi
              prints [N/A] or [Not Supported]).
            - C(thermal) holds the thresholds (absolute C(shutdown_c), C(slowdown_c), C(max_operating_c), or
              T.Limit headroom C(shutdown_tlimit_c), ...) and C(form) (absolute, tlimit, unknown).
          type: list
          elements: dict
mismatches:
  description: Plan-versus-hardware problems, each naming the GPU, the planned value and the hardware limit.
  returned: always
  type: list
  elements: str
"""

# Imports follow the documentation, as ansible-test expects of modules.
import os  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils.gpu import (  # noqa: E402
    QUERY_ARGS,
    TEMPERATURE_ARGS,
    GpuParseError,
    check_plan_against_hardware,
    merge_facts,
    no_gpu_reason,
    parse_query_csv,
    parse_temperature,
)


def _absent(module: AnsibleModule, reason: str) -> None:
    facts = {"gpu_present": False, "reason": reason, "count": 0, "driver_version": None, "gpus": []}
    module.exit_json(changed=False, ansible_facts={"gpucluster_gpus": facts}, mismatches=[])


def _read(module: AnsibleModule) -> tuple[str, str | None]:
    """(query CSV, temperature report or None): recorded, or from running nvidia-smi."""
    if module.params["query_output"] is not None:
        return module.params["query_output"], module.params["temperature_output"]
    smi = module.params["nvidia_smi"] or module.get_bin_path("nvidia-smi")
    if not smi:
        _absent(module, "nvidia-smi not found in PATH")
    if not os.path.exists(smi):
        _absent(module, f"{smi} not found")
    rc, out, err = module.run_command([smi, *QUERY_ARGS])
    if rc != 0:
        reason = no_gpu_reason(out + "\n" + err)
        if reason:
            _absent(module, reason)
        module.fail_json(msg=f"{smi} --query-gpu failed (rc {rc}): {(err or out).strip()}", rc=rc)
    temperature = module.params["temperature_output"]
    if temperature is None:
        rc, temperature, err = module.run_command([smi, *TEMPERATURE_ARGS])
        if rc != 0:
            module.warn(f"{smi} -q -d TEMPERATURE failed (rc {rc}): {(err or temperature).strip()}")
            temperature = None
    return out, temperature


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "path"},
            "plan_gpu": {"type": "dict"},
            "query_output": {"type": "str"},
            "temperature_output": {"type": "str"},
        },
        supports_check_mode=True,
    )
    query, temperature = _read(module)
    reason = no_gpu_reason(query)
    if reason:
        _absent(module, reason)
    try:
        gpus = parse_query_csv(query)
        driver, thermals = parse_temperature(temperature) if temperature else (None, [])
    except GpuParseError as exc:
        module.fail_json(msg=f"cannot read nvidia-smi output: {exc}")
    if not gpus:
        _absent(module, "nvidia-smi listed no GPU")
    facts: dict[str, Any] = {
        "gpu_present": True,
        "reason": None,
        "count": len(gpus),
        "driver_version": driver,
        "gpus": merge_facts(gpus, thermals),
    }
    plan_gpu = module.params["plan_gpu"]
    mismatches = check_plan_against_hardware(plan_gpu, facts["gpus"]) if plan_gpu else []
    result = {"changed": False, "ansible_facts": {"gpucluster_gpus": facts}, "mismatches": mismatches}
    if mismatches:
        module.fail_json(msg="the GPU plan exceeds the hardware: " + "; ".join(mismatches), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
