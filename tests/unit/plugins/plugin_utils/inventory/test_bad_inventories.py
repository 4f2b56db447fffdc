"""A table of bad inventories (issue 16): each is a reference inventory with one change.

Every case must stop the plan with a PlanError naming the field, showing the value and saying what is
allowed (never a TypeError, KeyError or a file written somewhere): path traversal, config injection,
typos of keys at every level, values read nowhere or dropped, nonsense plans, unclear errors, hosts in
no group. Two sizes that are allowed (an opt-out, a tier4 with 2 nodes) pass; the report says so.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections, report_summary

Inventory = tuple[dict[str, Any], dict[str, list[str]]]
DROP = object()
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _steps(path: str) -> list[str | int]:
    return [int(i) if i else k for k, i in _STEP.findall(path)]


def put(path: str, value: Any) -> Callable[[Inventory], None]:
    """Set ``gpucluster_x.y[2].z`` (or ``groups.name``) to ``value``; DROP removes the key."""

    def change(inv: Inventory) -> None:
        site, groups = inv
        steps = _steps(path)
        target: Any = groups if steps[0] == "groups" else site
        steps = steps[1:] if steps[0] == "groups" else steps
        for step in steps[:-1]:
            if isinstance(target, dict) and step not in target:
                target[step] = {}
            target = target[step]
        if value is DROP:
            del target[steps[-1]]
        else:
            target[steps[-1]] = copy.deepcopy(value)

    return change


def rename(path: str, new_key: str) -> Callable[[Inventory], None]:
    """Rename the last key of ``path`` to ``new_key`` (a typo), keeping its value."""

    def change(inv: Inventory) -> None:
        steps = _steps(path)
        target: Any = inv[0]
        for step in steps[:-1]:
            target = target[step]
        target[new_key] = target.pop(steps[-1])

    return change


def both(*changes: Callable[[Inventory], None]) -> Callable[[Inventory], None]:
    def change(inv: Inventory) -> None:
        for one in changes:
            one(inv)

    return change


def add_host(name: str, group: str | None) -> Callable[[Inventory], None]:
    def change(inv: Inventory) -> None:
        groups = inv[1]
        groups["all"] = sorted({*groups.get("all", []), name})
        groups.setdefault(group or "ungrouped", []).append(name)

    return change


def drop_compute_nic(inv: Inventory) -> None:
    """7 compute NICs for 8 GPUs: mlx5_7 gone, and GPU 7 with no NIC."""
    node = inv[0]["gpucluster_node"]
    node["nics"] = [n for n in node["nics"] if n["name"] != "mlx5_7"]
    del node["gpus"][7]["nic"]


NO_VALUE = object()


@dataclass(frozen=True)
class Case:
    id: str
    change: Callable[[Inventory], None]
    field: str  # the PlanError's field, exactly
    fragment: str  # a piece of the message (what is allowed)
    tier: str = "tier3"
    value: Any = NO_VALUE  # when set: the PlanError shows exactly this value (issue 30's cases set it)


LONG = "a" * 5000
NET = "gpucluster_network"
NODE = "gpucluster_node"
MIG = "gpucluster_gpu_policy.mig"
ST = "gpucluster_storage"
LU = "gpucluster_storage.lustre"
FAB = "gpucluster_fabric"
IFNAME = "Linux interface name"
PATH = "an absolute path"
DEV = "a device path under /dev/"
HOST = "RFC 1123"
TEN = "gpucluster_tenants"
CKA = "gpucluster_workload.checkpoint_async"
UPS = "gpucluster_facility.ups"
#: a valid UPS (compute/ups.py) that the ups-* cases change one key of
GOOD_UPS = {"rating_kva": 100, "runtime_minutes": 12, "runtime_points": [{"load_percent": 50, "minutes": 30}]}


def ups(**change: Any) -> Callable[[Inventory], None]:
    """A valid UPS with ``change`` applied (a value of DROP removes the key)."""
    value = {**GOOD_UPS, **change}
    return put(UPS, {k: v for k, v in value.items() if v is not DROP})


HC = "gpucluster_slurm.health"
NV = "gpucluster_storage.nvmeof"
BG = "gpucluster_storage.beegfs"
NVT = "examples/tier2-nvmeof"
BGT = "examples/tier3-beegfs"


def _team(name: str, share: Any, **more: Any) -> dict[str, Any]:
    return {"name": name, "gpu_share_percent": share, **more}


ROCE = both(put(f"{FAB}.type", "roce"), put(f"{FAB}.infiniband", DROP))

CASES = [
    # --- path traversal: nothing from the inventory may name a file outside its folder
    Case("netdev-traversal", put(f"{NODE}.nics[0].netdev", "x/../../tmp/somewhere"), f"{NODE}.nics[0].netdev", IFNAME),
    Case("netdev-dotdot", put(f"{NODE}.nics[0].netdev", ".."), f"{NODE}.nics[0].netdev", "not '.' or '..'"),
    Case("netdev-dot", put(f"{NODE}.nics[1].netdev", "."), f"{NODE}.nics[1].netdev", IFNAME),
    Case("netdev-slash", put(f"{NODE}.nics[10].netdev", "eno/1"), f"{NODE}.nics[10].netdev", "no '/'"),
    Case("checkpoints-dotdot", put(f"{ST}.paths.checkpoints", "/lustre/../etc"), f"{ST}.paths.checkpoints", "'..'"),
    Case("mount-dotdot", put(f"{LU}.mount_point", "/lustre/aifs/../../etc"), f"{LU}.mount_point", PATH),
    Case("scratch-relative", put(f"{ST}.local_scratch", "raid"), f"{ST}.local_scratch", PATH),
    Case("home-relative", put(f"{ST}.paths.home", "home/users"), f"{ST}.paths.home", PATH),
    Case("mdt-dotdot", put(f"{LU}.mdt_device", "/dev/../etc/passwd"), f"{LU}.mdt_device", DEV),
    Case("ost-not-dev", put(f"{LU}.ost_devices[0]", "/tmp/disk"), f"{LU}.ost_devices[0]", DEV),
    Case("allow-format-not-dev", put(f"{LU}.allow_format_devices", ["nvme1n1"]), f"{LU}.allow_format_devices[0]", DEV),
    Case("nvme-relative", put(f"{ST}.local_nvme.devices[0]", "nvme2n1"), f"{ST}.local_nvme.devices[0]", DEV, "tier1"),
    Case(
        "raid-dotdot",
        put(f"{ST}.local_nvme.raid_device", "/dev/md0/../../root"),
        f"{ST}.local_nvme.raid_device",
        DEV,
        "tier1",
    ),
    Case(
        "nvme-mount-dotdot",
        put(f"{ST}.local_nvme.mount_point", "/raid/.."),
        f"{ST}.local_nvme.mount_point",
        PATH,
        "tier1",
    ),
    Case("name-dotdot", put("gpucluster_cluster.name", "../evil"), "gpucluster_cluster.name", "build/plan/<name>"),
    Case("name-slash", put("gpucluster_cluster.name", "a/b"), "gpucluster_cluster.name", "letters, digits"),
    Case(
        "export-dotdot",
        put(f"{ST}.nfs.exports[0].path", "/export/../../etc"),
        f"{ST}.nfs.exports[0].path",
        PATH,
        "tier2",
    ),
    Case(
        "export-mount-relative",
        put(f"{ST}.nfs.exports[0].mount_point", "shared"),
        f"{ST}.nfs.exports[0].mount_point",
        PATH,
        "tier2",
    ),
    Case("lnet-iface-slash", put(f"{LU}.server_interfaces", ["ib0/../x"]), f"{LU}.server_interfaces[0]", IFNAME),
    Case("gpu-nic-slash", put(f"{NODE}.gpus[0].nic", "mlx5_0/../x"), f"{NODE}.gpus[0].nic", "RDMA device name"),
    # --- config injection: newlines, ';', '$(', spaces in names, paths, NTP servers, domains
    Case("ntp-newline", put(f"{NET}.ntp_servers", ["pool.ntp.org\nallow all"]), f"{NET}.ntp_servers[0]", "NTP server"),
    Case("ntp-trailing-newline", put(f"{NET}.ntp_servers", ["pool.ntp.org\n"]), f"{NET}.ntp_servers[0]", HOST),
    Case("domain-trailing-newline", put("gpucluster_cluster.domain", "internal\n"), "gpucluster_cluster.domain", HOST),
    Case("ntp-space", put(f"{NET}.ntp_servers", ["pool.ntp.org iburst"]), f"{NET}.ntp_servers[0]", "no options"),
    Case("ntp-subshell", put(f"{NET}.ntp_servers", ["$(reboot)"]), f"{NET}.ntp_servers[0]", HOST),
    Case("ntp-semicolon", put(f"{NET}.ntp_servers", ["ntp.example.com;x"]), f"{NET}.ntp_servers[0]", HOST),
    Case("ntp-second-bad", put(f"{NET}.ntp_servers", ["10.0.0.1", "a b"]), f"{NET}.ntp_servers[1]", HOST),
    Case("domain-semicolon", put("gpucluster_cluster.domain", "x;touch /tmp/p"), "gpucluster_cluster.domain", HOST),
    Case("domain-space", put("gpucluster_cluster.domain", "cluster internal"), "gpucluster_cluster.domain", HOST),
    Case("domain-newline", put("gpucluster_cluster.domain", "a\nb"), "gpucluster_cluster.domain", HOST),
    Case("domain-dash", put("gpucluster_cluster.domain", "-bad.example"), "gpucluster_cluster.domain", HOST),
    Case("domain-empty-label", put("gpucluster_cluster.domain", "a..b"), "gpucluster_cluster.domain", HOST),
    Case(
        "mgmt-if-semicolon", put(f"{NET}.management.interface", "eno1; reboot"), f"{NET}.management.interface", IFNAME
    ),
    Case("mgmt-if-newline", put(f"{NET}.management.interface", "eno1\nreboot"), f"{NET}.management.interface", IFNAME),
    Case(
        "mgmt-if-too-long",
        put(f"{NET}.management.interface", "enp1s0f0np0abcdef"),
        f"{NET}.management.interface",
        "1 to 15",
    ),
    Case("netdev-subshell", put(f"{NODE}.nics[2].netdev", "$(reboot)"), f"{NODE}.nics[2].netdev", IFNAME),
    Case("netdev-space", put(f"{NODE}.nics[0].netdev", "ib p26s0"), f"{NODE}.nics[0].netdev", "no spaces"),
    Case("netdev-backtick", put(f"{NODE}.nics[0].netdev", "ib`id`"), f"{NODE}.nics[0].netdev", IFNAME),
    Case("checkpoints-rm", put(f"{ST}.paths.checkpoints", "/ckpt; rm -rf /"), f"{ST}.paths.checkpoints", "no spaces"),
    Case("lustre-mount-rm", put(f"{LU}.mount_point", "/lustre/aifs; rm -rf /"), f"{LU}.mount_point", PATH),
    Case("datasets-subshell", put(f"{ST}.paths.datasets", "/data/$(id)"), f"{ST}.paths.datasets", "'$'"),
    Case("home-newline", put(f"{ST}.paths.home", "/home\nx"), f"{ST}.paths.home", "control characters"),
    Case("scratch-semicolon", put(f"{ST}.local_scratch", "/raid;x"), f"{ST}.local_scratch", "';'"),
    Case(
        "nic-name-semicolon", put(f"{NODE}.nics[0].name", "mlx5_0; reboot"), f"{NODE}.nics[0].name", "RDMA device name"
    ),
    Case("fsname-semicolon", put(f"{LU}.fsname", "aifs;x"), f"{LU}.fsname", "no spaces"),
    Case(
        "export-clients-options",
        put(f"{ST}.nfs.exports[0].clients", "10.0.0.0/24(rw,no_root_squash) *"),
        f"{ST}.nfs.exports[0].clients",
        "a CIDR, host name or wildcard",
        "tier2",
    ),
    Case(
        "lab-prolog-newline",
        put("gpucluster_lab", {"enabled": True, "slurm_prolog_flags": "Alloc\nSlurmctldHost=evil"}),
        "gpucluster_lab.slurm_prolog_flags",
        "PrologFlags",
    ),
    Case(
        "lab-slurmd-newline",
        put("gpucluster_lab", {"enabled": True, "slurmd_parameters": "config_overrides\nx=y"}),
        "gpucluster_lab.slurmd_parameters",
        "SlurmdParameters",
    ),
    Case(
        "lab-memlock-semicolon",
        put("gpucluster_lab", {"memlock_kb": "unlimited; x"}),
        "gpucluster_lab.memlock_kb",
        "unlimited",
    ),
    Case("pkey-newline", put(f"{FAB}.infiniband.pkey", "0x7fff\nx"), f"{FAB}.infiniband.pkey", "partition key"),
    Case("gpu-model-space", put(f"{NODE}.gpu_model", "h100 sxm"), f"{NODE}.gpu_model", "no spaces"),
    Case("tier-semicolon", put("gpucluster_cluster.tier", "tier3;x"), "gpucluster_cluster.tier", "no spaces"),
    Case(
        "batch-size-injection",
        put("gpucluster_rollout", {"batch_size": "25%; x"}),
        "gpucluster_rollout.batch_size",
        "25%",
    ),
    Case("lnet-net-space", put(f"{LU}.lnet_net", "o2ib0 x"), f"{LU}.lnet_net", "no spaces"),
    Case("nfs-network-newline", put(f"{ST}.nfs.network", "storage\n"), f"{ST}.nfs.network", "no spaces", "tier2"),
    # --- typos of keys, at every level: unknown keys are errors, with a "did you mean"
    Case("typo-section", rename(FAB, "gpucluster_fabrik"), "gpucluster_fabrik", "did you mean 'gpucluster_fabric'"),
    Case(
        "typo-section-plural",
        rename("gpucluster_cluster", "gpucluster_clusters"),
        "gpucluster_clusters",
        "gpucluster_cluster",
    ),
    Case(
        "typo-gpus-per-node", rename(f"{NODE}.gpus_per_node", "gpus_per_nod"), f"{NODE}.gpus_per_nod", "'gpus_per_node'"
    ),
    Case("typo-topology", rename(f"{FAB}.topology", "topolgy"), f"{FAB}.topolgy", "did you mean 'topology'"),
    Case("typo-domain", rename("gpucluster_cluster.domain", "domian"), "gpucluster_cluster.domian", "'domain'"),
    Case(
        "typo-rack-budget",
        rename("gpucluster_facility.rack_power_budget_kw", "rack_power_budget"),
        "gpucluster_facility.rack_power_budget",
        "'rack_power_budget_kw'",
    ),
    Case("typo-management", rename(f"{NET}.management", "managment"), f"{NET}.managment", "'management'"),
    Case(
        "typo-interface", rename(f"{NET}.management.interface", "interfce"), f"{NET}.management.interfce", "'interface'"
    ),
    Case("typo-netdev", rename(f"{NODE}.nics[0].netdev", "netdv"), f"{NODE}.nics[0].netdv", "'netdev'"),
    Case("typo-gpu-pci-bus", rename(f"{NODE}.gpus[0].pci_bus", "pci_buss"), f"{NODE}.gpus[0].pci_buss", "'pci_bus'"),
    Case("typo-ost-devices", rename(f"{LU}.ost_devices", "ost_device"), f"{LU}.ost_device", "'ost_devices'"),
    Case("typo-paths", rename(f"{ST}.paths.checkpoints", "checkpoint"), f"{ST}.paths.checkpoint", "'checkpoints'"),
    Case(
        "typo-service-level",
        rename(f"{FAB}.infiniband.service_level", "servicelevel"),
        f"{FAB}.infiniband.servicelevel",
        "'service_level'",
    ),
    Case(
        "typo-model-params",
        rename("gpucluster_workload.model_params_b", "model_param_b"),
        "gpucluster_workload.model_param_b",
        "'model_params_b'",
    ),
    Case(
        "typo-clock-policy",
        rename("gpucluster_gpu_policy.clock_policy", "clockpolicy"),
        "gpucluster_gpu_policy.clockpolicy",
        "'clock_policy'",
    ),
    Case("typo-lab", put("gpucluster_lab", {"enabeld": True}), "gpucluster_lab.enabeld", "did you mean 'enabled'"),
    Case("typo-rollout", put("gpucluster_rollout", {"batchsize": 2}), "gpucluster_rollout.batchsize", "'batch_size'"),
    Case(
        "typo-allow-format",
        rename(f"{ST}.local_nvme.allow_format", "allow_formats"),
        f"{ST}.local_nvme.allow_formats",
        "'allow_format'",
        "tier1",
    ),
    Case(
        "typo-export-mount",
        rename(f"{ST}.nfs.exports[0].mount_point", "mountpoint"),
        f"{ST}.nfs.exports[0].mountpoint",
        "'mount_point'",
        "tier2",
    ),
    Case("typo-roce-dscp", both(ROCE, put(f"{FAB}.roce", {"dscpp": 26})), f"{FAB}.roce.dscpp", "did you mean 'dscp'"),
    Case("typo-layouts", put(f"{LU}.layouts", {"checkpoint": []}), f"{LU}.layouts.checkpoint", "'checkpoints'"),
    Case(
        "typo-temp-limits",
        put(f"{NODE}.gpu_temp_limits", {"max_operating": 85}),
        f"{NODE}.gpu_temp_limits.max_operating",
        "'max_operating_c'",
    ),
    Case("typo-bmc-cidr", rename(f"{NET}.bmc.cidr", "cdir"), f"{NET}.bmc.cdir", "'cidr'"),
    Case("unknown-node-key", put(f"{NODE}.gpu_count", 8), f"{NODE}.gpu_count", "known keys"),
    # --- values read nowhere or dropped: typed now
    Case("psu-rating-negative", put(f"{NODE}.psu_rating_w", -3300), f"{NODE}.psu_rating_w", "above 0"),
    Case("psu-count-word", put(f"{NODE}.psu_count", "six"), f"{NODE}.psu_count", "an integer"),
    Case("psu-count-zero", put(f"{NODE}.psu_count", 0), f"{NODE}.psu_count", "from 1 to 64"),
    Case("temp-limits-list", put(f"{NODE}.gpu_temp_limits", [85, 90]), f"{NODE}.gpu_temp_limits", "a mapping"),
    Case("ntp-string", put(f"{NET}.ntp_servers", "pool.ntp.org"), f"{NET}.ntp_servers", "a list"),
    Case("paths-list", put(f"{ST}.paths", ["/a"]), f"{ST}.paths", "a mapping"),
    Case("lab-enabled-string", put("gpucluster_lab", {"enabled": "yes"}), "gpucluster_lab.enabled", "true or false"),
    Case("allow-format-string", put(f"{LU}.allow_format", "true"), f"{LU}.allow_format", "true or false"),
    Case("nics-mapping", put(f"{NODE}.nics", {"mlx5_0": {}}), f"{NODE}.nics", "a list"),
    Case("cooling-number", put("gpucluster_facility.cooling", 5), "gpucluster_facility.cooling", "a string"),
    Case(
        "opt-out-string",
        put(f"{NODE}.one_compute_nic_per_gpu", "no"),
        f"{NODE}.one_compute_nic_per_gpu",
        "true or false",
    ),
    # --- nonsense plans: cross-field checks
    Case(
        "gpu-pci-bus-twice",
        put(f"{NODE}.gpus[1].pci_bus", "0000:1b:00.0"),
        f"{NODE}.gpus[1].pci_bus",
        "no other device of the node has (gpucluster_node.gpus[0]",
    ),
    Case("gpu-pci-bus-of-nic", put(f"{NODE}.gpus[0].pci_bus", "0000:1a:00.0"), f"{NODE}.nics[0].pci_bus", "gpus[0]"),
    Case("nic-pci-bus-twice", put(f"{NODE}.nics[1].pci_bus", "0000:1A:00.0"), f"{NODE}.nics[1].pci_bus", "nics[0]"),
    Case("two-gpus-one-nic", put(f"{NODE}.gpus[1].nic", "mlx5_0"), f"{NODE}.gpus[1].nic", "no other GPU uses (GPU 0"),
    Case("seven-nics-eight-gpus", drop_compute_nic, f"{NODE}.nics", "exactly one compute NIC per GPU on tier3"),
    Case("seven-nics-tier2", drop_compute_nic, f"{NODE}.nics", "8 for gpucluster_node.gpus_per_node 8, not 7", "tier2"),
    Case(
        "gpu-on-storage-nic", put(f"{NODE}.gpus[7].nic", "mlx5_8"), f"{NODE}.gpus[7].nic", "the name of a compute NIC"
    ),
    Case("gpu-without-nic", put(f"{NODE}.gpus[3].nic", DROP), f"{NODE}.gpus[3].nic", "one_compute_nic_per_gpu: false"),
    Case("gpu-index-twice", put(f"{NODE}.gpus[1].index", 0), f"{NODE}.gpus", "indexes 0..7"),
    # --- unclear errors made clear
    Case("rate-400G", put(f"{FAB}.link_rate_gbps", "400G"), f"{FAB}.link_rate_gbps", "write 400, not '400G'"),
    Case("write-fast", put(f"{ST}.rated_write_gbps", "fast"), f"{ST}.rated_write_gbps", "a number"),
    Case("name-5000", put("gpucluster_cluster.name", LONG), "gpucluster_cluster.name", "1 to 63"),
    Case("memory-quoted", put(f"{NODE}.memory_gib", "2048"), f"{NODE}.memory_gib", "write 2048 without quotes"),
    Case("gpus-quoted", put(f"{NODE}.gpus_per_node", "8"), f"{NODE}.gpus_per_node", "an integer"),
    Case("nic-rate-unit", put(f"{NODE}.nics[0].rate_gbps", "400Gb/s"), f"{NODE}.nics[0].rate_gbps", "not '400Gb/s'"),
    Case("radix-words", put(f"{FAB}.switch_radix", "64 ports"), f"{FAB}.switch_radix", "write 64"),
    Case(
        "budget-kw",
        put("gpucluster_facility.rack_power_budget_kw", "60kW"),
        "gpucluster_facility.rack_power_budget_kw",
        "not '60kW'",
    ),
    Case("domain-5000", put("gpucluster_cluster.domain", LONG), "gpucluster_cluster.domain", "at most 253"),
    Case("netdev-5000", put(f"{NODE}.nics[0].netdev", LONG), f"{NODE}.nics[0].netdev", "1 to 15"),
    Case("cores-fraction", put(f"{NODE}.cores_per_socket", 56.5), f"{NODE}.cores_per_socket", "an integer"),
    Case("ntp-number", put(f"{NET}.ntp_servers", [123]), f"{NET}.ntp_servers[0]", "a string"),
    # --- a backup Slurm controller (groups.slurm_backup, tier4) needs a shared StateSaveLocation
    Case(
        "ha-no-state",
        put("gpucluster_slurm.state_save_location", DROP),
        "gpucluster_slurm.state_save_location",
        "shared storage",
        "tier4",
    ),
    Case(
        "ha-no-mount",
        put("gpucluster_slurm.state_save_mount", DROP),
        "gpucluster_slurm.state_save_mount",
        "{what, type, options}",
        "tier4",
    ),
    Case(
        "ha-mount-no-path",
        put("gpucluster_slurm.state_save_mount.what", "filer"),
        "gpucluster_slurm.state_save_mount.what",
        "SERVER:/PATH",
        "tier4",
    ),
    Case(
        "ha-mount-type",
        put("gpucluster_slurm.state_save_mount.type", "cifs"),
        "gpucluster_slurm.state_save_mount.type",
        "nfs",
        "tier4",
    ),
    Case(
        "ha-mount-options",
        put("gpucluster_slurm.state_save_mount.options", "rw\nWhat=/x"),
        "gpucluster_slurm.state_save_mount.options",
        "mount options",
        "tier4",
    ),
    Case(
        "ha-state-dotdot",
        put("gpucluster_slurm.state_save_location", "/var/../etc"),
        "gpucluster_slurm.state_save_location",
        "'..'",
        "tier4",
    ),
    Case(
        "ha-timeout",
        put("gpucluster_slurm.slurmctld_timeout_s", 2),
        "gpucluster_slurm.slurmctld_timeout_s",
        ">= 5",
        "tier4",
    ),
    Case("ha-backup-is-head", put("groups.head", ["head01", "head02"]), "groups.head", "exactly one host", "tier4"),
    # --- hosts in no known group
    Case("host-ungrouped", add_host("stray01", None), "groups", "every host in at least one of the groups head"),
    Case("host-unknown-group", add_host("gpu09", "gpus"), "groups", "head, storage, nfs_server"),
    Case("host-ungrouped-tier1", add_host("extra", None), "groups", "a host in no known group", "tier1"),
    # --- scheduler and teams (gpucluster_cluster.scheduler, gpucluster_tenants)
    Case("scheduler-unknown", put("gpucluster_cluster.scheduler", "pbs"), "gpucluster_cluster.scheduler", "slurm"),
    Case("tenants-not-list", put(TEN, {"name": "a"}), TEN, "a list"),
    Case("tenant-name-upper", put(TEN, [_team("NLP", 10)]), f"{TEN}[0].name", "lowercase"),
    Case("tenant-share-string", put(TEN, [_team("nlp", "40%")]), f"{TEN}[0].gpu_share_percent", "percent"),
    Case("tenant-share-zero", put(TEN, [_team("nlp", 0)]), f"{TEN}[0].gpu_share_percent", "> 0%"),
    Case("tenant-share-over", put(TEN, [_team("nlp", 140)]), f"{TEN}[0].gpu_share_percent", "<= 100%"),
    Case("tenant-share-sub-gpu", put(TEN, [_team("nlp", 1)]), f"{TEN}[0].gpu_share_percent", "at least one GPU"),
    Case("tenants-over-100", put(TEN, [_team("nlp", 60), _team("cv", 50)]), TEN, "at most 100%"),
    Case("tenant-twice", put(TEN, [_team("nlp", 10), _team("nlp", 10)]), f"{TEN}[1].name", "no other team"),
    Case("tenant-typo", put(TEN, [{"name": "nlp", "gpu_share": 10}]), f"{TEN}[0].gpu_share", "did you mean"),
    Case(
        "tenant-borrow-over",
        put(TEN, [_team("nlp", 10, borrowing_limit_percent=150)]),
        f"{TEN}[0].borrowing_limit_percent",
        "<= 100%",
    ),
    Case("tenant-user-bad", put(TEN, [_team("nlp", 10, users=["Root;x"])]), f"{TEN}[0].users[0]", "POSIX user name"),
    # --- the health check as Slurm Epilog/Prolog (compute/health.py)
    Case("health-dcgm-level-3", put(f"{HC}.dcgm_level", 3), f"{HC}.dcgm_level", "<= 2"),
    Case("health-dcgm-timeout-0", put(f"{HC}.dcgm_timeout_s", 0), f"{HC}.dcgm_timeout_s", ">= 10 s"),
    Case("health-prolog-yes", put(f"{HC}.prolog", "yes"), f"{HC}.prolog", "true or false"),
    Case("health-typo", put(f"{HC}.epilogue", True), f"{HC}.epilogue", "epilog"),
    # --- self-healing (compute/healing.py)
    Case(
        "healing-interval-short",
        put("gpucluster_healing", {"active": {"interval_s": 60}}),
        "gpucluster_healing.active.interval_s",
        ">= 3600 s (an hour to a week)",
    ),
    Case(
        "healing-nodes-above-rollout",
        put("gpucluster_healing", {"remediation": {"nodes_at_once": 3}}),
        "gpucluster_healing.remediation.nodes_at_once",
        "the rollout's batch: 25% of 4 compute nodes",
    ),
    Case(
        "healing-action-unknown",
        put("gpucluster_healing", {"remediation": {"actions": {"xid": [{"xid": 79, "action": "rma"}]}}}),
        "gpucluster_healing.remediation.actions.xid[0].action",
        "none, gpu_reset, reboot, replace",
    ),
    Case(
        "healing-ib-without-rdma",
        put("gpucluster_healing", {"active": {"checks": {"ib_write_bw": {"enabled": True}}}}),
        "gpucluster_healing.active.checks.ib_write_bw.enabled",
        "no RDMA fabric",
        "tier1",
    ),
    Case("healing-typo", put("gpucluster_healing", {"dryrun": True}), "gpucluster_healing.dryrun", "dry_run"),
    # --- async checkpoints: staging and drain (storage/checkpoint.py)
    Case("ckpt-async-keep-0", put(f"{CKA}.keep_local", 0), f"{CKA}.keep_local", ">= 1"),
    Case("ckpt-async-keep-float", put(f"{CKA}.keep_local", 1.5), f"{CKA}.keep_local", "integer"),
    Case("ckpt-async-headroom", put(f"{CKA}.read_headroom", 1), f"{CKA}.read_headroom", "<= 0.9"),
    Case("ckpt-async-write-0", put(f"{CKA}.staging_write_gbps", 0), f"{CKA}.staging_write_gbps", ">= 0.01"),
    Case("ckpt-async-capacity", put(f"{CKA}.staging_capacity_tb", 0), f"{CKA}.staging_capacity_tb", ">= 0.001 TB"),
    Case(
        "ckpt-async-staging-shared",
        put(f"{CKA}.staging_path", "/lustre/aifs/stage"),
        f"{CKA}.staging_path",
        "node-local",
    ),
    Case("ckpt-async-staging-relative", put(f"{CKA}.staging_path", "raid/stage"), f"{CKA}.staging_path", PATH),
    Case("ckpt-async-typo", put(f"{CKA}.keep", 2), f"{CKA}.keep", "keep_local"),
    Case("ckpt-async-tier1", put(f"{CKA}.enabled", True), f"{CKA}.enabled", "no shared checkpoint path", "tier1"),
    # --- the UPS (issue 19 item 6, compute/ups.py)
    Case("ups-not-mapping", put(UPS, "100kVA"), UPS, "a mapping"),
    Case("ups-typo", ups(runtime_min=12), f"{UPS}.runtime_min", "runtime_minutes"),
    Case("ups-no-kva", ups(rating_kva=DROP), f"{UPS}.rating_kva", "kVA rating"),
    Case("ups-no-runtime", ups(runtime_minutes=DROP), f"{UPS}.runtime_minutes", "rated load"),
    Case("ups-kva-0", ups(rating_kva=0), f"{UPS}.rating_kva", ">= 0.5 kVA"),
    Case("ups-kva-string", ups(rating_kva="100"), f"{UPS}.rating_kva", "a number"),
    Case("ups-kw-above-kva", ups(rating_kw=120), f"{UPS}.rating_kw", "<= 100 kW"),
    Case("ups-kw-and-pf", ups(rating_kw=90, power_factor=0.9), f"{UPS}.power_factor", "unset when rating_kw"),
    Case("ups-pf-above-1", ups(power_factor=1.2), f"{UPS}.power_factor", "<= 1"),
    Case("ups-runtime-0", ups(runtime_minutes=0), f"{UPS}.runtime_minutes", ">= 0.1 min"),
    Case("ups-scope", ups(scope="room"), f"{UPS}.scope", "cluster, rack"),
    Case("ups-other-negative", ups(other_load_kw=-1), f"{UPS}.other_load_kw", ">= 0 kW"),
    Case("ups-eol", ups(end_of_life_capacity=1.5), f"{UPS}.end_of_life_capacity", "<= 1"),
    Case("ups-grace", ups(checkpoint_grace_s=7200), f"{UPS}.checkpoint_grace_s", "<= 3600 s"),
    Case("ups-grace-float", ups(checkpoint_grace_s=1.5), f"{UPS}.checkpoint_grace_s", "an integer"),
    Case("ups-power-off-0", ups(power_off_allowance_s=0), f"{UPS}.power_off_allowance_s", ">= 10 s"),
    Case("ups-points-not-list", ups(runtime_points={"50": 30}), f"{UPS}.runtime_points", "a list"),
    Case("ups-point-key", ups(runtime_points=[{"load": 50}]), f"{UPS}.runtime_points[0].load", "load_percent"),
    Case(
        "ups-point-load-0",
        ups(runtime_points=[{"load_percent": 0, "minutes": 30}]),
        f"{UPS}.runtime_points[0].load_percent",
        ">= 1 %",
    ),
    Case(
        "ups-points-not-falling",
        ups(runtime_points=[{"load_percent": 50, "minutes": 10}]),
        f"{UPS}.runtime_points",
        "fewer minutes at a higher load",
    ),
    Case(
        "ups-point-100-differs",
        ups(runtime_points=[{"load_percent": 100, "minutes": 20}]),
        f"{UPS}.runtime_points[0].load_percent",
        "unique",
    ),
    # --- NVMe-oF (storage/nvmeof.py) and BeeGFS (storage/beegfs.py), on their example inventories
    Case("nvmeof-transport-fc", put(f"{NV}.transport", "fc"), f"{NV}.transport", "rdma", NVT),
    Case("nvmeof-trsvcid-0", put(f"{NV}.trsvcid", 0), f"{NV}.trsvcid", ">= 1", NVT),
    Case("nvmeof-device-bare", put(f"{NV}.devices", ["nvme1n1"]), f"{NV}.devices[0]", DEV, NVT),
    Case("nvmeof-device-twice", put(f"{NV}.devices", ["/dev/nvme1n1"] * 2), f"{NV}.devices", "each once", NVT),
    Case(
        "nvmeof-too-few-devices", put(f"{NV}.devices", ["/dev/nvme1n1"]), f"{NV}.devices", "one device per compute", NVT
    ),
    Case("nvmeof-no-target", put("groups.nvmeof_target", []), "groups.nvmeof_target", "at least one host", NVT),
    Case(
        "nvmeof-nqn-prefix-iqn",
        put(f"{NV}.nqn_prefix", "iqn.2024-01.org.example"),
        f"{NV}.nqn_prefix",
        "nqn.YYYY-MM",
        NVT,
    ),
    Case("nvmeof-ctrl-loss-tmo", put(f"{NV}.ctrl_loss_tmo", -2), f"{NV}.ctrl_loss_tmo", ">= -1", NVT),
    Case("nvmeof-queues-0", put(f"{NV}.nr_io_queues", 0), f"{NV}.nr_io_queues", ">= 1", NVT),
    Case("nvmeof-network-bmc", put(f"{NV}.network", "bmc"), f"{NV}.network", "storage", NVT),
    Case(
        "nvmeof-format-bare",
        put(f"{NV}.allow_format_devices", ["/dev/nvme1n1"]),
        f"{NV}.allow_format_devices[0]",
        "<host>:/dev/",
        NVT,
    ),
    Case(
        "nvmeof-format-target-device",
        put(f"{NV}.allow_format_devices", ["compute01:/dev/nvme1n1"]),
        f"{NV}.allow_format_devices[0]",
        "a device planned on compute01",
        NVT,
    ),
    Case("nvmeof-typo", put(f"{NV}.device", ["/dev/nvme1n1"]), f"{NV}.device", "devices", NVT),
    Case(
        "beegfs-two-mgmtd", put("groups.beegfs_mgmtd", ["meta01", "stor01"]), "groups.beegfs_mgmtd", "exactly one", BGT
    ),
    Case("beegfs-no-meta", put("groups.beegfs_meta", []), "groups.beegfs_meta", "at least one host", BGT),
    Case("beegfs-no-targets", put(f"{BG}.storage_directories", DROP), f"{BG}.storage_directories", "a list", BGT),
    Case(
        "beegfs-target-comma",
        put(f"{BG}.storage_directories", ["/data/a,/data/b"]),
        f"{BG}.storage_directories[0]",
        "commas",
        BGT,
    ),
    Case("beegfs-mount-root", put(f"{BG}.mount_point", "/"), f"{BG}.mount_point", "other than /", BGT),
    Case(
        "beegfs-workers-0", put(f"{BG}.tune_num_workers", {"storage": 0}), f"{BG}.tune_num_workers.storage", ">= 1", BGT
    ),
    Case(
        "beegfs-workers-typo",
        put(f"{BG}.tune_num_workers", {"client": 4}),
        f"{BG}.tune_num_workers.client",
        "mgmtd",
        BGT,
    ),
    Case("beegfs-rdma-yes", put(f"{BG}.rdma", "yes"), f"{BG}.rdma", "true or false", BGT),
    # MIG (compute/mig.py): profiles, counts, slices, nodes, GPUs and models without MIG
    Case("mig-profile", put(MIG, [{"profiles": ["3g.40gb", "3g.41gb"]}]), f"{MIG}[0].profiles[1]", "one of 1g.10gb"),
    Case("mig-media-variant", put(MIG, [{"profiles": ["1g.10gb+me"]}]), f"{MIG}[0].profiles[0]", "does not match"),
    Case("mig-count", put(MIG, [{"profiles": ["4g.40gb", "4g.40gb"]}]), f"{MIG}[0].profiles", "at most 1 x 4g.40gb"),
    Case(
        "mig-compute-8",
        put(MIG, [{"profiles": ["4g.40gb", "2g.20gb", "2g.20gb"]}]),
        f"{MIG}[0].profiles",
        "compute slices sum to at most 7 (these sum to 8)",
    ),
    Case(
        "mig-memory-9",  # 7 compute slices: a compute-only count accepts it
        put(MIG, [{"profiles": ["3g.40gb", "3g.40gb", "1g.10gb"]}]),
        f"{MIG}[0].profiles",
        "memory slices sum to at most 8 (these sum to 9)",
    ),
    Case("mig-empty", put(MIG, [{"profiles": []}]), f"{MIG}[0].profiles", "a list of MIG profiles"),
    Case("mig-not-a-list", put(MIG, {"profiles": ["7g.80gb"]}), MIG, "a list"),
    Case(
        "mig-node", put(MIG, [{"nodes": ["compute99"], "profiles": ["7g.80gb"]}]), f"{MIG}[0].nodes", "a compute host"
    ),
    Case("mig-gpu-index", put(MIG, [{"gpus": [8], "profiles": ["7g.80gb"]}]), f"{MIG}[0].gpus", "indexes 0..7"),
    Case(
        "mig-gpu-twice",
        put(MIG, [{"gpus": [0, 1], "profiles": ["7g.80gb"]}, {"gpus": [1], "profiles": ["7g.80gb"]}]),
        f"{MIG}[1].gpus",
        "mig[0] has GPU 1 of compute01",
    ),
    Case(
        "mig-l40s",
        both(put(f"{NODE}.gpu_model", "l40s"), put(MIG, [{"profiles": ["1g.10gb"]}])),
        MIG,
        "NVIDIA L40S does not support MIG",
    ),
    # --- node variants (issue 19 item 5): a limit the catalog lacks is asked for by its own key
    Case(
        "rtx-max-performance-no-clock",
        put("gpucluster_gpu_policy", {"clock_policy": "max_performance"}),
        f"{NODE}.gpu_limits.max_sm_mhz",
        "clocks.max.sm",
        "examples/tier1-rtxpro6000",
    ),
    Case(
        "rtx-min-above-default",
        put(f"{NODE}.gpu_limits.power_min_w", 700),
        f"{NODE}.gpu_limits.power_min_w",
        "power_min_w <= power_default_w",
        "examples/tier1-rtxpro6000",
    ),
    Case("gpu-limit-known", put(f"{NODE}.gpu_limits", {"max_sm_mhz": 2100}), f"{NODE}.gpu_limits.max_sm_mhz", "unset"),
    Case("gpu-limit-typo", put(f"{NODE}.gpu_limits", {"max_sm": 2100}), f"{NODE}.gpu_limits.max_sm", "max_sm_mhz"),
    Case(
        "intra-floor-zero",
        put(f"{NODE}.allreduce_intra_node_busbw_gbs", 0),
        f"{NODE}.allreduce_intra_node_busbw_gbs",
        ">= 1",
    ),
    Case(
        "b200-cap-without-minimum",
        both(put("gpucluster_facility.rack_power_budget_kw", 50), put("gpucluster_facility.pdu_rating_kw", 50)),
        f"{NODE}.gpu_limits.power_min_w",
        "power.min_limit",
        "examples/tier4-b200",
    ),
]


NAN, INF = float("nan"), float("inf")
SL = "gpucluster_slurm"
NOCTL = "without control characters"
SYS = "other than / and the system's own"
POOL = "a private or routable unicast network"
NTP = "an NTP server outside the cluster"
YAML_NAME = "a host name YAML reads as text"
FINITE = "a finite number"
K8S = "kube-system"


def r2(id: str, path: str, value: Any, fragment: str, tier: str = "tier3", field: str | None = None) -> Case:
    """One issue-30 case: ``path`` set to ``value``; the error names ``field`` (default: path) and shows value."""
    shown = value
    if isinstance(value, list) and len(value) == 1:
        shown = value[0]
    return Case(id, put(path, value), field or path, fragment, tier, shown)


#: Issue 30 ("reliability, round two"): every class of bad inventory that reached hosts. Each case shows
#: the field that was changed (never a value derived from it), the bad value and what is allowed.
ROUND2 = [
    # --- control characters: one schema rule for every string (schema.py _CONTROL)
    Case("ctl-host-newline", add_host("compute04\n", "compute"), "groups.compute", "lowercase", value="compute04\n"),
    r2("ctl-nqn-newline", f"{NV}.nqn_prefix", "nqn.2024-01.org.example\n", NOCTL, NVT),
    r2("ctl-state-what-newline", f"{SL}.state_save_mount.what", "filer:/export/slurm\n", NOCTL, "tier4"),
    r2("ctl-state-options-newline", f"{SL}.state_save_mount.options", "rw,hard\n", NOCTL, "tier4"),
    r2("ctl-tenant-tab", f"{TEN}[0].name", "research\t", NOCTL),
    r2("ctl-user-escape", f"{TEN}[0].users[0]", "alice\x1b[31m", NOCTL),
    r2("ctl-cluster-cr", "gpucluster_cluster.name", "tier3\r", NOCTL),
    r2("ctl-fsname-nul", f"{LU}.fsname", "aifs\x00", NOCTL),
    r2("ctl-gpu-model-newline", f"{NODE}.gpu_model", "h100_sxm\n", NOCTL),
    r2("ctl-netdev-line-separator", f"{NODE}.nics[0].netdev", "ibp26s0\u2028", NOCTL),
    r2("ctl-checkpoints-nel", f"{ST}.paths.checkpoints", "/lustre/aifs/ckpt\x85", NOCTL),
    r2("ctl-pkey-del", f"{FAB}.infiniband.pkey", "0x7fff\x7f", NOCTL),
    r2("ctl-lab-proctrack", "gpucluster_lab.slurm_proctrack", "proctrack/linuxproc\n", NOCTL),
    r2("ctl-mount-vertical-tab", f"{ST}.nfs.exports[0].mount_point", "/shared\x0b", NOCTL, "tier2"),
    # --- non-finite numbers: refused by the same rule, for every number
    r2("nan-link-rate", f"{FAB}.link_rate_gbps", NAN, FINITE),
    r2("inf-memory", f"{NODE}.memory_gib", INF, FINITE),
    r2("nan-model-params", "gpucluster_workload.model_params_b", NAN, FINITE),
    r2("minus-inf-budget", "gpucluster_facility.rack_power_budget_kw", -INF, FINITE),
    r2("nan-overlap-target", "gpucluster_workload.checkpoint_overlap_target", NAN, FINITE),
    r2("nan-base-power", f"{NODE}.base_power_w", NAN, FINITE),
    r2("nan-share", f"{TEN}[1].gpu_share_percent", NAN, FINITE),
    r2("inf-delta-t", "gpucluster_facility.coolant_delta_t_k", INF, FINITE),
    r2("nan-rated-write", f"{ST}.rated_write_gbps", NAN, FINITE),
    r2("nan-nic-rate", f"{NODE}.nics[3].rate_gbps", NAN, FINITE),
    # --- reserved names: Kubernetes' namespaces, Slurm's root account, the system's users
    r2("tenant-kube-system", f"{TEN}[0].name", "kube-system", K8S),
    r2("tenant-kube-public", f"{TEN}[1].name", "kube-public", K8S, "tier4-k8s"),
    r2("tenant-kube-node-lease", f"{TEN}[0].name", "kube-node-lease", K8S, "tier4-k8s"),
    r2("tenant-default", f"{TEN}[2].name", "default", K8S),
    r2("tenant-root", f"{TEN}[0].name", "root", "Slurm's root account"),
    r2("user-root", f"{TEN}[0].users[1]", "root", "not a system or service account"),
    r2("user-nobody", f"{TEN}[2].users[0]", "nobody", "not a system or service account"),
    r2("user-slurm", f"{TEN}[1].users[0]", "slurm", "not a system or service account"),
    # --- system folders as mount points, exports, data, staging and state paths
    r2("lustre-mount-root", f"{LU}.mount_point", "/", SYS),
    r2("lustre-mount-usr", f"{LU}.mount_point", "/usr", SYS),
    r2("checkpoints-etc", f"{ST}.paths.checkpoints", "/etc", SYS),
    r2("datasets-proc", f"{ST}.paths.datasets", "/proc/datasets", "is under /proc"),
    r2("scratch-var", f"{ST}.local_scratch", "/var", SYS),
    r2("staging-etc", f"{CKA}.staging_path", "/etc", SYS),
    r2("export-root", f"{ST}.nfs.exports[0].path", "/", SYS, "tier2"),
    r2("export-mount-boot", f"{ST}.nfs.exports[0].mount_point", "/boot", SYS, "tier2"),
    r2("state-save-var", f"{SL}.state_save_location", "/var", SYS, "tier4"),
    r2("nvme-mount-tmp", f"{ST}.local_nvme.mount_point", "/tmp", SYS, "tier1"),
    r2("nvmeof-mount-sys", f"{NV}.mount_point", "/sys/fs/x", "is under /sys", NVT),
    r2("beegfs-meta-etc", f"{BG}.meta_directory", "/etc/beegfs/meta", "is under /etc", BGT),
    # --- address pools by kind, size and overlap
    r2("mgmt-loopback", f"{NET}.management.cidr", "127.0.0.0/24", "loopback"),
    r2("bmc-this-network", f"{NET}.bmc.cidr", "0.0.0.0/24", "'this network'"),
    r2("storage-multicast", f"{NET}.storage.cidr", "224.0.0.0/24", "multicast"),
    r2("fabric-link-local", f"{NET}.fabric.cidr", "169.254.0.0/16", "link-local"),
    r2("mgmt-reserved", f"{NET}.management.cidr", "240.0.0.0/24", "reserved"),
    r2("mgmt-slash-29", f"{NET}.management.cidr", "10.30.0.0/29", "room for 8 hosts from first_offset 10: a /27"),
    r2(
        "storage-slash-29",
        f"{NET}.storage.cidr",
        "10.20.2.0/29",
        "room for 3 hosts from first_offset 10: a /28",
        "tier2",
    ),
    r2("bmc-overlaps-mgmt", f"{NET}.bmc.cidr", "10.30.0.0/23", "does not overlap gpucluster_network.management"),
    # --- NTP servers: addresses or host names, outside the cluster
    r2("ntp-octet-256", f"{NET}.ntp_servers", ["10.0.0.256"], "four numbers 0-255", field=f"{NET}.ntp_servers[0]"),
    r2("ntp-colon", f"{NET}.ntp_servers", [":"], "an IPv6 address or a host name", field=f"{NET}.ntp_servers[0]"),
    r2("ntp-head", f"{NET}.ntp_servers", ["head01"], "is a host of this cluster", field=f"{NET}.ntp_servers[0]"),
    r2(
        "ntp-head-fqdn",
        f"{NET}.ntp_servers",
        ["head01.cluster.internal"],
        "is a host of this cluster",
        field=f"{NET}.ntp_servers[0]",
    ),
    r2("ntp-head-address", f"{NET}.ntp_servers", ["10.30.0.10"], "management address", field=f"{NET}.ntp_servers[0]"),
    r2("ntp-loopback", f"{NET}.ntp_servers", ["127.0.0.1"], "not a loopback", field=f"{NET}.ntp_servers[0]"),
    r2("ntp-multicast", f"{NET}.ntp_servers", ["224.0.1.1"], "multicast", field=f"{NET}.ntp_servers[0]"),
    r2("ntp-unspecified", f"{NET}.ntp_servers", ["0.0.0.0"], "unspecified", field=f"{NET}.ntp_servers[0]"),
    # --- host names YAML reads as bool, null or a number (quoted here, as Ansible would pass them)
    Case("host-yes", add_host("yes", "compute"), "groups.compute", YAML_NAME, value="yes"),
    Case("host-null", add_host("null", "compute"), "groups.compute", "read as null", value="null"),
    Case("host-octal", add_host("010", "compute"), "groups.compute", "the number 8", value="010"),
    Case("host-exponent", add_host("1e3", "storage"), "groups.storage", "the number 1000", value="1e3"),
    Case("host-true", add_host("true", "compute"), "groups.compute", 'quote it in hosts.yml ("true":)', value="true"),
    # --- nodes that cannot exist
    r2("gpus-nine-sxm", f"{NODE}.gpus_per_node", 9, "at most 8 GPUs"),
    r2("netdev-twice", f"{NODE}.nics[1].netdev", "ibp26s0", "no other NIC of the node has (gpucluster_node.nics[0]"),
    r2("mgmt-if-not-a-nic", f"{NET}.management.interface", "eth9", "the netdev of one of the node's NICs"),
    r2("nic-rate-123", f"{NODE}.nics[0].rate_gbps", 123, "a port rate in Gb/s of InfiniBand or Ethernet"),
    r2("link-rate-123", f"{FAB}.link_rate_gbps", 123, "one of 10, 20, 40, 56, 100, 200, 400, 800"),
    Case(
        "roce-rate-56",
        both(ROCE, put(f"{FAB}.link_rate_gbps", 56)),
        f"{FAB}.link_rate_gbps",
        "fabric type roce, in Gb/s: one of 1, 2.5, 5, 10, 25",
        value=56,
    ),
    r2("radix-odd", f"{FAB}.switch_radix", 63, "an even number of switch ports", "tier4"),
    r2("breaker-1a", "gpucluster_facility.breaker_amps", 1, ">= 2 A at 400 V, 3 phase"),
    r2("psu-100w", f"{NODE}.psu_rating_w", 100, "(psu_count - 2) x psu_rating_w >= 6200 W"),
    Case(
        "psu-one",
        both(put(f"{NODE}.psu_count", 1), put(f"{NODE}.psu_redundancy", "N")),
        f"{NODE}.psu_count",
        "at least 2 PSUs of 3300 W",
        value=1,
    ),
    # issue 43: the PSUs left after the redundant ones fail (default N+1) carry the node at the GPUs' minimum
    Case(
        "psu-two-n1",
        both(put(f"{NODE}.psu_count", 2), put(f"{NODE}.psu_redundancy", "N+1")),
        f"{NODE}.psu_count",
        "(2 - 1) x 3300 W is 3300 W: at least 3 PSUs of 3300 W",
        "tier4",
        2,
    ),
    Case(
        "psu-two-n2",
        put(f"{NODE}.psu_count", 2),
        f"{NODE}.psu_redundancy",
        "N+1, N+N or N: at least one of the node's 2 PSUs must stay",
        "tier4",
        "N+2",
    ),
    r2("psu-red-n6-of-6", f"{NODE}.psu_redundancy", "N+6", "N+1 to N+5, N+N or N"),
    r2("psu-red-word", f"{NODE}.psu_redundancy", "2N", "N+<k>"),
    Case(
        "psu-red-nn-odd",
        both(put(f"{NODE}.psu_count", 5), put(f"{NODE}.psu_redundancy", "N+N")),
        f"{NODE}.psu_redundancy",
        "N+N needs an even psu_count (the node has 5)",
        value="N+N",
    ),
    # --- the error names the key that is missing, not its parent
    Case(
        "tenant-no-share",
        lambda inv: inv[0]["gpucluster_tenants"][0].pop("gpu_share_percent"),
        f"{TEN}[0].gpu_share_percent",
        "the key gpu_share_percent is missing",
        value=None,
    ),
]
CASES += ROUND2


def gpus(count: int, nics: int | None = None) -> Callable[[Inventory], None]:
    """``gpus_per_node`` set to ``count``, listed consistently: ``count`` GPUs and ``nics`` compute NICs
    (default: as many as GPUs), so the only fault is the count itself."""

    def change(inv: Inventory) -> None:
        node = inv[0]["gpucluster_node"]
        node["gpus_per_node"] = count
        node["gpus"] = node["gpus"][:count]
        keep = {f"mlx5_{i}" for i in range(count if nics is None else nics)}
        node["nics"] = [n for n in node["nics"] if n.get("purpose") != "compute" or n["name"] in keep]
        ib = inv[0]["gpucluster_fabric"].get("infiniband") or {}
        if "sm_hcas" in ib:
            ib["sm_hcas"] = ib["sm_hcas"][: len(keep)]

    return change


def qos(*items: dict[str, Any]) -> Callable[[Inventory], None]:
    return put(f"{SL}.qos", list(items))


def layout(**component: Any) -> Callable[[Inventory], None]:
    return put(
        f"{LU}.layouts", {"checkpoints": [{"end": -1, "stripe_count": 4, "stripe_size": 4 * 2**20, **component}]}
    )


VOLATILE = "a folder that survives a reboot"
APART = "a folder of its own, apart from"
OTHER_STORAGE = "only the section of the site's storage type"
OTHER_GROUP = "storage server groups of the site's storage type"
RATE = "a rate in GB/s above 0"
STRIPE = "a multiple of 64 KiB (65536 bytes) of at most 4 GiB"
CYCLE = "a preemption order without a cycle"
VOLT = "a circuit voltage in V above 0"
SXM = "the GPUs of one SXM baseboard of h100_sxm: 4 or 8"
NAME_END = "a name ending in a letter or digit"
DNS = "a DNS-1123 label on the Kubernetes path"
LOCAL = "a host other than localhost"
NAMESPACE = "a team name that is not a namespace Kubernetes, its operators or this plan use"
HIDDEN = "<hidden>"
K8 = "tier4-k8s"
#: a GitHub token's and an AWS access key's shape (made up, not real keys): secrets, never credential names
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
AWS_KEY = "AKIA" + "Z7Q4XN2M5P8R3T6W"

#: Issue 40 ("reliability, round three"): values that are valid alone and wrong together or in scale,
#: volatile places, reserved names, sections of another type, errors that named a derived field.
ROUND3 = [
    # --- volatile and linked system folders (/var/run -> /run, a tmpfs), NAME_MAX
    r2("scratch-var-run", f"{ST}.local_scratch", "/var/run/scratch", VOLATILE),
    r2("staging-var-run", f"{CKA}.staging_path", "/var/run/ckpt-stage", VOLATILE),
    r2("scratch-tmp-sub", f"{ST}.local_scratch", "/tmp/scratch", "is under /tmp"),
    r2("checkpoints-var-lock", f"{ST}.paths.checkpoints", "/var/lock/ckpt", "is under /var/lock"),
    r2("datasets-var-tmp", f"{ST}.paths.datasets", "/var/tmp/datasets", "is under /var/tmp"),
    r2("state-save-var-run", f"{SL}.state_save_location", "/var/run/slurmctld", VOLATILE, "tier4"),
    r2("lustre-mount-dev-shm", f"{LU}.mount_point", "/dev/shm/lustre", "is under /dev"),
    r2("nvme-mount-run", f"{ST}.local_nvme.mount_point", "/run/raid", "is under /run", "tier1"),
    r2("staging-dev-shm", f"{CKA}.staging_path", "/dev/shm/stage", "is under /dev"),
    Case(
        "datasets-component-300",
        put(f"{ST}.paths.datasets", "/lustre/aifs/" + "d" * 300),
        f"{ST}.paths.datasets",
        "every component is at most 255 bytes",
    ),
    Case(
        "scratch-component-256",
        put(f"{ST}.local_scratch", "/raid/" + "s" * 256),
        f"{ST}.local_scratch",
        "one has 256",
    ),
    # --- storage: sections and server groups of another type, rates, paths apart, on the shared file system
    Case(
        "nfs-section-on-lustre", put(f"{ST}.nfs", {"exports": []}), f"{ST}.nfs", OTHER_STORAGE, value="<a nfs section>"
    ),
    Case(
        "beegfs-section-on-lustre", put(f"{ST}.beegfs", {}), f"{ST}.beegfs", OTHER_STORAGE, value="<a beegfs section>"
    ),
    Case(
        "nvmeof-section-on-lustre", put(f"{ST}.nvmeof", {}), f"{ST}.nvmeof", OTHER_STORAGE, value="<a nvmeof section>"
    ),
    Case(
        "lustre-section-on-nfs",
        put(f"{ST}.lustre", {"fsname": "aifs"}),
        f"{ST}.lustre",
        "type nfs: gpucluster_storage.nfs",
        "tier2",
        "<a lustre section>",
    ),
    Case("nfs-server-on-lustre", add_host("nfs01", "nfs_server"), "groups.nfs_server", OTHER_GROUP, value=["nfs01"]),
    Case(
        "beegfs-meta-on-lustre", add_host("meta01", "beegfs_meta"), "groups.beegfs_meta", OTHER_GROUP, value=["meta01"]
    ),
    Case(
        "lustre-oss-on-nfs",
        add_host("oss09", "lustre_oss"),
        "groups.lustre_oss",
        "nfs_server",
        "tier2",
        value=["oss09"],
    ),
    Case("oss-also-compute", add_host("oss01", "compute"), "groups.lustre_oss", "no compute node", value=["oss01"]),
    Case("mds-also-compute", add_host("mds01", "compute"), "groups.lustre_mds", "no compute node", value=["mds01"]),
    r2("rated-write-zero", f"{ST}.rated_write_gbps", 0, RATE),
    r2("rated-read-zero", f"{ST}.rated_read_gbps", 0, RATE),
    r2("rated-write-1e30", f"{ST}.rated_write_gbps", 1e30, "at most 1000000"),
    Case(
        "rated-write-negative-override",
        both(put(f"{ST}.rated_write_gbps", -5), put("gpucluster_workload.allow_storage_below_need", True)),
        f"{ST}.rated_write_gbps",
        "never the rate below zero",
        value=-5,
    ),
    r2("home-is-checkpoints", f"{ST}.paths.home", "/lustre/aifs/checkpoints", APART, field=f"{ST}.paths.checkpoints"),
    r2("datasets-inside-home", f"{ST}.paths.datasets", "/lustre/aifs/home/data", APART),
    r2("checkpoints-inside-datasets", f"{ST}.paths.checkpoints", "/lustre/aifs/datasets/ckpt", APART),
    Case("stripe-1e30", layout(stripe_size=10**30), f"{LU}.layouts.checkpoints[0].stripe_size", STRIPE, value=10**30),
    Case("stripe-8gib", layout(stripe_size=8 * 2**30), f"{LU}.layouts.checkpoints[0].stripe_size", STRIPE),
    Case("stripe-count-5000", layout(stripe_count=5000), f"{LU}.layouts.checkpoints[0].stripe_count", "1 to 2000"),
    Case("stripe-count-zero", layout(stripe_count=0), f"{LU}.layouts.checkpoints[0].stripe_count", "-1 (every OST)"),
    # --- Slurm: the shared state mounted read-write; QOS preemption without a cycle
    r2("state-mount-ro", f"{SL}.state_save_mount.options", "ro,hard", "read-write mount options", "tier4"),
    r2("state-mount-ro-last", f"{SL}.state_save_mount.options", "hard,vers=4.2,ro", "slurmctld writes", "tier4"),
    Case(
        "qos-two-cycle",
        qos({"name": "preemptible", "preempt": ["normal"]}),
        f"{SL}.qos[preemptible].preempt",
        "normal preempts preemptible preempts normal",
        value=["normal"],
    ),
    Case(
        "qos-three-cycle",
        qos({"name": "a", "preempt": ["b"]}, {"name": "b", "preempt": ["c"]}, {"name": "c", "preempt": ["a"]}),
        f"{SL}.qos[a].preempt",
        "a preempts b preempts c preempts a",
        value=["b"],
    ),
    Case(
        "qos-two-custom",
        qos({"name": "urgent", "preempt": ["batch"]}, {"name": "batch", "preempt": ["urgent"]}),
        f"{SL}.qos[batch].preempt",
        CYCLE,
        value=["urgent"],
    ),
    # --- facility: the voltage checked before power.py divides by it, named itself
    r2("voltage-zero", "gpucluster_facility.circuit_voltage_v", 0, VOLT),
    r2("voltage-negative", "gpucluster_facility.circuit_voltage_v", -400, VOLT),
    r2("voltage-20kv", "gpucluster_facility.circuit_voltage_v", 20000, "at most 1000"),
    r2("breaker-zero", "gpucluster_facility.breaker_amps", 0, "a breaker rating in A above 0"),
    # --- fabric: a section of another fabric, a NIC slower than the fabric, first_offset named
    Case(
        "roce-block-on-ib", put(f"{FAB}.roce", {"dscp": 26}), f"{FAB}.roce", "here infiniband", value="<a roce section>"
    ),
    Case(
        "roce-block-on-tcp",
        both(put(f"{FAB}.type", "tcp"), put(f"{FAB}.roce", {"dscp": 26})),
        f"{FAB}.roce",
        "here tcp",
        value="<a roce section>",
    ),
    Case(
        "roce-block-on-none", put(f"{FAB}.roce", {"dscp": 26}), f"{FAB}.roce", "here none", "tier1", "<a roce section>"
    ),
    r2("nic-slower-than-fabric", f"{NODE}.nics[0].rate_gbps", 200, "at least the fabric's link rate"),
    r2("fabric-first-offset-past-rail", f"{NET}.fabric.first_offset", 300, "inside one rail (a /24: rail_prefix)"),
    r2("mgmt-first-offset-past-net", f"{NET}.management.first_offset", 256, "inside the network (a /24)"),
    r2("bmc-first-offset-zero", f"{NET}.bmc.first_offset", 0, "1 to 253"),
    # --- node: an SXM board as bought, the GPU count named when more NICs are listed
    Case("sxm-six-consistent", gpus(6), f"{NODE}.gpus_per_node", SXM, value=6),
    Case("sxm-five-consistent", gpus(5), f"{NODE}.gpus_per_node", SXM, value=5),
    Case("sxm-four-eight-nics", gpus(4, nics=8), f"{NODE}.gpus_per_node", "8 compute NICs are listed", value=4),
    Case("gpus-six-of-eight", put(f"{NODE}.gpus_per_node", 6), f"{NODE}.gpus_per_node", SXM, value=6),
    # --- names: the cluster's in every object it names, localhost, reserved namespaces
    r2("name-ends-dash", "gpucluster_cluster.name", "tier3-", NAME_END),
    r2("name-ends-dot", "gpucluster_cluster.name", "tier3.", NAME_END),
    r2("k8s-name-dash", "gpucluster_cluster.name", "tier4-", NAME_END, K8),
    r2("k8s-name-upper", "gpucluster_cluster.name", "Tier4", DNS, K8),
    r2("k8s-name-underscore", "gpucluster_cluster.name", "tier_4", DNS, K8),
    Case("localhost-compute", add_host("localhost", "compute"), "groups.compute", LOCAL, value="localhost"),
    Case("localhost-head", add_host("localhost", "head"), "groups.head", LOCAL, value="localhost"),
    r2("team-gpu-operator", f"{TEN}[0].name", "gpu-operator", NAMESPACE, K8),
    r2("team-kueue-system", f"{TEN}[0].name", "kueue-system", NAMESPACE, K8),
    r2("team-kuberay", f"{TEN}[0].name", "kuberay-operator", NAMESPACE, K8),
    r2("team-network-operator", f"{TEN}[0].name", "nvidia-network-operator", NAMESPACE, K8),
    r2("team-monitoring", f"{TEN}[0].name", "monitoring", NAMESPACE, K8),
    # --- a credential NAME shaped like a secret: refused, never echoed
    Case(
        "credential-github-token",
        put("gpucluster_containers.registries[0].credential", GITHUB_TOKEN),
        "gpucluster_containers.registries[0].credential",
        "looks like a secret",
        value=HIDDEN,
    ),
    Case(
        "credential-aws-key",
        put("gpucluster_containers.registries[0].credential", AWS_KEY),
        "gpucluster_containers.registries[0].credential",
        "looks like a secret",
        value=HIDDEN,
    ),
]
CASES += ROUND3


def test_the_table_is_large_and_unique() -> None:
    assert len(CASES) >= 80
    assert len({c.id for c in CASES}) == len(CASES)
    assert len(ROUND2) >= 60 and all(c.value is not NO_VALUE for c in ROUND2)
    assert len(ROUND3) >= 60


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_inventory_stops_with_a_field_named_error(case: Case) -> None:
    site, groups = load_inventory(case.tier)
    inventory = (copy.deepcopy(site), copy.deepcopy(groups))
    case.change(inventory)
    with pytest.raises(PlanError) as caught:  # a TypeError or KeyError fails the test
        cluster_plan(*inventory)
    error = caught.value
    assert error.field == case.field, str(error)
    assert case.fragment in str(error), str(error)
    if case.value is not NO_VALUE:
        assert f"value {case.value!r}" in str(error), str(error)
    assert len(str(error)) < 1500, "the message shows a cut value, not 5,000 characters"


def test_opting_out_of_one_nic_per_gpu_plans_seven_nics() -> None:
    site, groups = load_inventory("tier3")
    drop_compute_nic((site, groups))
    site["gpucluster_node"]["one_compute_nic_per_gpu"] = False
    site["gpucluster_node"]["gpus"][7]["nic"] = "mlx5_6"  # GPUs 6 and 7 share a NIC: allowed once opted out
    ib = site["gpucluster_fabric"]["infiniband"]
    ib["sm_hcas"] = ib["sm_hcas"][:7]  # 7 rails, 7 subnets: one SM port each
    plan = cluster_plan(site, groups)
    assert plan["fabric"]["rails"] == 7


def test_a_tier4_of_two_nodes_plans_and_the_report_says_so() -> None:
    site, groups = load_inventory("tier4")
    keep = groups["compute"][:2]
    groups = {k: [h for h in v if h in keep or not h.startswith("compute")] for k, v in groups.items()}
    plan = cluster_plan(site, groups)
    assert plan["cluster"]["compute_nodes"] == 2
    tier_rows = next(s for s in report_sections(plan) if s["title"] == "Tier")["rows"]
    assert ["reference tier", "tier4", "2 nodes / 16 GPUs, tier reference 8 / 64"] in tier_rows
    assert any("2 compute nodes where the tier4 reference has 8" in w for w in report_summary(plan)["warnings"])


def test_did_you_mean_only_for_a_close_listed_choice() -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import did_you_mean

    assert did_you_mean("h100_sxn", "one of a100_pcie, h100_sxm, b200") == "; did you mean 'h100_sxm'?"
    assert did_you_mean("zzz", "one of a100_pcie, h100_sxm") == ""
    assert did_you_mean(7, "one of 1, 2") == ""
    assert did_you_mean("h100_sxn", "at most 8 GPUs") == ""
