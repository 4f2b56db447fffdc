#!/usr/bin/python
"""Discover the InfiniBand fabric with ibnetdiscover and check it against the plan."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_check
short_description: Check a discovered InfiniBand fabric against the plan's cabling and topology
version_added: 0.1.0
description:
  - Runs C(ibnetdiscover -p) once per rail (a rail-optimized fabric without spines is one
    subnet per rail, so each needs its own discovery through an HCA of that rail) and
    compares every discovered port with the plan's expected cabling.
  - "Reports, each on its own line: switches and HCAs missing or not in the plan, a rail
    plugged into the wrong leaf or port (host, rail, planned leaf and port, actual leaf and
    port), spine uplinks missing or not in the plan, links below the planned width or rate,
    and Slurm topology.conf switches whose nodes differ between the plan and the fabric."
  - Nodes are matched on node descriptions, not GUIDs. An HCA must describe itself as
    C(<host> <hca>), which rdma-ndd sets on a node (for example C(compute02 mlx5_3)); a
    switch must carry its plan name (C(leaf04), C(spine02)), set on the switch or mapped
    with O(node_name_map).
  - Read-only; it never changes the fabric, so it runs the same in check mode. It fails on
    any mismatch (unless O(fail_on_mismatch=false)) and whenever a discovery fails.
  - Every tool call is bounded by O(timeout).
options:
  expected:
    description:
      - The plan's fabric dict (C(gpucluster_host_plan.fabric), with C(cabling) and
        C(slurm_topology), the switches of Slurm's topology.conf), or just its C(cabling).
    type: dict
    required: true
  rails:
    description:
      - One discovery per item. Default, from the plan, one per planned subnet through that
        subnet's HCA (C(mlx5_<rail>) on a rail-optimized fabric, a single discovery on a fat
        tree with shared spines or a single switch).
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the discovery in the result.
        type: str
      ca:
        description: Local HCA to discover through (C(ibnetdiscover -C)).
        type: str
      port:
        description: Port of O(rails[].ca) (C(ibnetdiscover -P)).
        type: int
      environment:
        description: Extra environment for this discovery only (for the lab, C(SIM_HOST)).
        type: dict
  timeout:
    description: Seconds allowed for each tool call; a call that takes longer is killed and the task fails.
    type: int
    default: 60
  environment:
    description:
      - Extra environment for every tool call. For the ibsim lab, C(LD_PRELOAD) (libumad2sim)
        and C(IBSIM_SOCKNAME); see C(tools/lab/ibsim_check.py start).
    type: dict
    default: {}
  expected_rate:
    description:
      - Link rate every link must reach, overriding the plan's, as Gb/s (C(200)), a speed
        (C(HDR)) or width and speed (C(4xHDR)). The ibsim lab simulates HDR at most, so it
        checks an NDR plan at C(4xHDR).
    type: raw
  ibnetdiscover_output:
    description:
      - Recorded C(ibnetdiscover -p) output to check instead of running the tool, one string
        per discovery.
    type: list
    elements: str
  ibnetdiscover_path:
    description: The ibnetdiscover executable (a name looked up in PATH, or a path).
    type: str
    default: ibnetdiscover
  node_name_map:
    description: A node name map file for ibnetdiscover (C(--node-name-map)), mapping switch GUIDs to plan names.
    type: path
  ignore:
    description:
      - Node descriptions (shell patterns) to leave out of the check, such as the head node's
        HCA that runs the subnet manager (C(head01 *)).
    type: list
    elements: str
    default: []
  fail_on_mismatch:
    description: Fail the task when the fabric differs from the plan; otherwise only report it.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
requirements:
  - infiniband-diags (ibnetdiscover) on the host, unless O(ibnetdiscover_output) is given
extends_documentation_fragment:
  - gpucluster.tiers.attributes
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the fabric from the first compute node, one discovery per planned subnet
  gpucluster.tiers.fabric_check:
    expected: "{{ gpucluster_host_plan.fabric }}"
    ignore: ["head01 *"]
  run_once: true
  delegate_to: "{{ groups['compute'] | first }}"

- name: Check the fabric simulated by ibsim (state written by tools/lab/ibsim_check.py start)
  vars:
    ibsim: "{{ lookup('ansible.builtin.file', lab_dir ~ '/ibsim/ibsim.json') | from_json }}"
  gpucluster.tiers.fabric_check:
    expected: "{{ gpucluster_host_plan.fabric }}"
    rails: "{{ ibsim.rails }}"
    environment: "{{ ibsim.environment }}"
    expected_rate: "{{ ibsim.lab_rate.rate_gbps }}"
    timeout: 10
  delegate_to: localhost
  run_once: true

- name: Check recorded output (no fabric needed)
  gpucluster.tiers.fabric_check:
    expected: "{{ gpucluster_host_plan.fabric }}"
    ibnetdiscover_output: ["{{ lookup('ansible.builtin.file', 'rail0.txt') }}"]
    fail_on_mismatch: false
  register: fabric
"""

RETURN = r"""
ok:
  description: Whether the discovered fabric matches the plan.
  returned: always
  type: bool
mismatches:
  description: One line per difference, for example C(compute02 rail 3 (mlx5_3) on leaf05 port 5 ...).
  returned: always
  type: list
  elements: str
report:
  description:
    - The comparison by kind, each a list of structured entries - C(missing_switches),
      C(extra_switches), C(missing_hcas), C(extra_hcas), C(wrong_leaf) (host, rail, hca,
      expected leaf and port, actual leaf and port), C(wrong_port), C(missing_uplinks),
      C(extra_uplinks), C(slow_links) - plus C(counts), C(topology) (planned and discovered
      topology.conf switches, and their C(mismatches)), C(expected_width) and C(expected_rate_gbps).
  returned: always
  type: dict
discoveries:
  description: Each discovery - name, ca, port, rc, seconds, number of port lines, stderr (last lines).
  returned: always
  type: list
  elements: dict
"""

import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils import fabric_links, ibfabric  # noqa: E402


def _discover(module: AnsibleModule, binary: str, rail: dict[str, Any], timeout: int, workdir: str) -> dict[str, Any]:
    argv = [binary, "-p"]
    if rail.get("ca"):
        argv += ["-C", rail["ca"]]
    if rail.get("port"):
        argv += ["-P", str(rail["port"])]
    if module.params["node_name_map"]:
        argv += ["--node-name-map", module.params["node_name_map"]]
    env = dict(os.environ)
    env.update({k: str(v) for k, v in (module.params["environment"] or {}).items()})
    env.update({k: str(v) for k, v in (rail.get("environment") or {}).items()})
    entry: dict[str, Any] = {"name": rail.get("name"), "ca": rail.get("ca"), "port": rail.get("port")}
    start = time.monotonic()
    try:
        # A libumad client blocks forever when its fabric (or ibsim) is gone: always bounded.
        done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        entry.update({"rc": None, "seconds": round(time.monotonic() - start, 3), "ports": 0})
        entry["error"] = f"ibnetdiscover did not finish within {timeout} s"
        return entry
    entry.update({"rc": done.returncode, "seconds": round(time.monotonic() - start, 3)})
    entry["stderr"] = done.stderr.strip().splitlines()[-5:]
    entry["stdout"] = done.stdout
    if done.returncode:
        entry["error"] = f"ibnetdiscover exited with {done.returncode}: {' '.join(entry['stderr'])}"
    return entry


def run_module() -> None:
    module = AnsibleModule(
        argument_spec={
            "expected": {"type": "dict", "required": True},
            "rails": {
                "type": "list",
                "elements": "dict",
                "options": {
                    "name": {"type": "str"},
                    "ca": {"type": "str"},
                    "port": {"type": "int"},
                    "environment": {"type": "dict"},
                },
            },
            "timeout": {"type": "int", "default": 60},
            "environment": {"type": "dict", "default": {}},
            "expected_rate": {"type": "raw"},
            "ibnetdiscover_output": {"type": "list", "elements": "str"},
            "ibnetdiscover_path": {"type": "str", "default": "ibnetdiscover"},
            "node_name_map": {"type": "path"},
            "ignore": {"type": "list", "elements": "str", "default": []},
            "fail_on_mismatch": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    expected = p["expected"]
    cabling = expected.get("cabling", expected)
    if not fabric_links.link_count(cabling):
        module.exit_json(changed=False, ok=True, mismatches=[], report={}, discoveries=[], skipped="no switched fabric")
    discoveries: list[dict[str, Any]] = []
    outputs: list[str] = []
    if p["ibnetdiscover_output"] is not None:
        outputs = list(p["ibnetdiscover_output"])
        discoveries = [{"name": f"recorded{i}", "rc": 0, "seconds": 0.0} for i in range(len(outputs))]
    else:
        rails = p["rails"]
        if not rails:
            rails = [{"name": n["name"], "ca": n["hca"], "port": n["port"]} for n in ibfabric.subnets(cabling)]
        binary = module.get_bin_path(p["ibnetdiscover_path"], required=True)
        workdir = tempfile.mkdtemp(prefix="fabric-check-")  # libumad2sim writes ./sys-<pid> here in the lab
        try:
            for rail in rails:
                entry = _discover(module, binary, rail, p["timeout"], workdir)
                outputs.append(entry.pop("stdout", ""))
                discoveries.append(entry)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    ports: list[dict[str, Any]] = []
    for entry, text in zip(discoveries, outputs, strict=True):
        parsed = ibfabric.parse_ibnetdiscover_ports(text)
        entry["ports"] = len(parsed)
        ports += parsed
    errors = [
        f"discovery {d.get('name') or d.get('ca') or i}: {d['error']}"
        for i, d in enumerate(discoveries)
        if "error" in d
    ]
    try:
        rate = p["expected_rate"] if p["expected_rate"] not in (None, "") else None
        report = ibfabric.compare(expected, ports, expected_rate=rate, ignore=p["ignore"])
    except ValueError as exc:
        module.fail_json(msg=f"cannot compare: {exc}", discoveries=discoveries)
    result = {
        "changed": False,
        "ok": report["ok"] and not errors,
        "mismatches": report["mismatches"],
        "report": report,
        "discoveries": discoveries,
    }
    if errors:
        module.fail_json(msg="fabric discovery failed: " + "; ".join(errors), **result)
    if not report["ok"] and p["fail_on_mismatch"]:
        lines = "\n".join(f"- {m}" for m in report["mismatches"])
        module.fail_json(msg=f"the fabric differs from the plan ({len(report['mismatches'])}):\n{lines}", **result)
    module.exit_json(**result)


def main() -> None:
    run_module()


if __name__ == "__main__":
    main()
