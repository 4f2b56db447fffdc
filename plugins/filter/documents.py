"""Filters of gpucluster.tiers that write a file's text from the plan's data: NCCL, MIG, mount units,
Lustre, BeeGFS, NVMe-oF, Slurm topology, Grafana and Prometheus.

The plan holds each file as data; these filters render the text on the way to the hosts. Thin
wrappers: each filter checks that its input is the plan's data it expects and calls one engine
function (plugins/plugin_utils) through plugin_utils/filter_calls.py.
Documentation: ``ansible-doc -t filter gpucluster.tiers.<name>`` (YAML beside this file).

The engine's modules are imported when a filter runs, not when this file loads: ansible-core
loads every filter file of the collection to find one filter, in every forked worker (one per
host and task), so a task reading one filter would otherwise import the whole engine per host and
task (about 70 ms each). Each filter therefore imports what it calls with an ordinary
``from ... import`` inside the function: static (readers, ruff and ansible-test see it), and lazy
(the first call imports, later calls find the module loaded).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.filter_calls import run
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain


def grafana_dashboard(board: Mapping[str, Any]) -> str:
    """A dashboard of the plan (plan.monitoring.grafana.dashboards.<key>) as Grafana's dashboard JSON."""
    import json

    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import dashboards

    model = run("grafana_dashboard", dashboards.dashboard_model, board)
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def prometheus_rules(rules: Mapping[str, Any]) -> str:
    """The head's Prometheus rule file (YAML) from the plan's rule groups (plan.monitoring.rules)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import alerts

    return str(run("prometheus_rules", alerts.rules_yaml, rules))


def prometheus_rule_tests(tests: Mapping[str, Any]) -> str:
    """The rules' promtool test file (YAML) from the plan's rule tests (plan.monitoring.rule_tests)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import alerts

    return str(run("prometheus_rule_tests", alerts.rule_tests_yaml, tests))


def nccl_conf_text(conf: Mapping[str, Any]) -> str:
    """/etc/nccl.conf from the plan's NCCL keys (plan.nccl.conf)."""
    if not isinstance(conf, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.nccl_conf_text: input must be the plan's nccl.conf (a mapping)")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import nccl

    return str(run("nccl_conf_text", nccl.nccl_conf_text, conf))


def nccl_topology_xml(tree: Mapping[str, Any]) -> str:
    """NCCL_TOPO_FILE (/etc/nccl/topo.xml) from the plan's PCI tree (plan.nccl.topology_tree)."""
    if not isinstance(tree, Mapping) or "cpus" not in tree:
        raise AnsibleFilterError(
            "gpucluster.tiers.nccl_topology_xml: input must be the plan's nccl.topology_tree "
            "(set when gpucluster_node.nccl_topology is file)"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import nccl

    return str(run("nccl_topology_xml", nccl.topology_xml_text, tree))


def mig_parted_config(parted: Mapping[str, Any]) -> str:
    """nvidia-mig-parted's config file (/etc/nvidia-mig-manager/config.yaml) from the plan's gpu.mig.parted."""
    if not isinstance(parted, Mapping) or not isinstance(parted.get("mig-configs"), list):
        raise AnsibleFilterError(
            "gpucluster.tiers.mig_parted_config: input must be the plan's gpu.mig.parted "
            "(version, mig-configs: a list of {name, devices}; set when gpucluster_gpu_policy.mig is)"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import mig

    return str(run("mig_parted_config", mig.mig_parted_config, parted))


def _mount(name: str, mount: Any) -> Mapping[str, Any]:
    keys = ("what", "where", "type", "options")
    if not isinstance(mount, Mapping) or any(k not in mount for k in keys):
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: input must be a mount of the plan ({', '.join(keys)})")
    return mount


def nfs_mount_unit(mount: Mapping[str, Any], server: str) -> str:
    """An NFS client's systemd mount unit from one of plan.storage.nfs.client_mounts and the NFS server's name."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import nfs

    return str(run("nfs_mount_unit", nfs.mount_unit_text, _mount("nfs_mount_unit", mount), str(server)))


def lustre_client_unit(mount: Mapping[str, Any], kind: str = "mount") -> str:
    """A Lustre client's systemd unit from plan.storage.lustre.client_mount: its mount unit (kind mount)
    or the oneshot that sets the client tunables after the mount (kind tunables)."""
    keys = ("what", "where", "type", "options", "unit_name", "before", "set_param")
    if not isinstance(mount, Mapping) or any(k not in mount for k in keys):
        raise AnsibleFilterError(
            "gpucluster.tiers.lustre_client_unit: input must be the plan's storage.lustre.client_mount "
            f"({', '.join(keys)})"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import lustre

    texts = {"mount": lustre.mount_unit_text, "tunables": lustre.tunables_unit_text}
    if kind not in texts:
        raise AnsibleFilterError(f"gpucluster.tiers.lustre_client_unit: kind must be mount or tunables, not {kind!r}")
    return str(run("lustre_client_unit", texts[kind], mount))


def slurm_state_mount_unit(mount: Mapping[str, Any]) -> str:
    """The controllers' systemd mount unit of Slurm's StateSaveLocation from plan.slurm.ha.state_save_mount."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import ha

    return str(run("slurm_state_mount_unit", ha.state_mount_unit_text, _mount("slurm_state_mount_unit", mount)))


def beegfs_conf(settings: Mapping[str, Any], service: str) -> str:
    """A BeeGFS service's configuration file from plan.storage.beegfs.settings.<service>."""
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(
            "gpucluster.tiers.beegfs_conf: input must be the plan's storage.beegfs.settings.<service>"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import beegfs

    return str(run("beegfs_conf", beegfs.service_conf_text, settings, service))


def nvmet_config_json(config: Mapping[str, Any]) -> str:
    """An NVMe-oF target's /etc/nvmet/config.json from plan.storage.nvmeof.targets.<host>.config."""
    if not isinstance(config, Mapping):
        raise AnsibleFilterError(
            "gpucluster.tiers.nvmet_config_json: input must be the plan's storage.nvmeof.targets.<host>.config"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import nvmeof

    return str(run("nvmet_config_json", nvmeof.target_config_json, config))


def grafana_provisioning(monitoring: Mapping[str, Any], kind: str) -> str:
    """Grafana's datasource or dashboard provider provisioning file (YAML) from plan.monitoring."""
    if not isinstance(monitoring, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.grafana_provisioning: input must be the plan's monitoring")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import dashboards

    return str(run("grafana_provisioning", dashboards.provisioning_yaml, monitoring, kind))


def lnet_conf(lnet: Mapping[str, Any]) -> str:
    """The lnetctl import file (/etc/lnet.conf) from plan.storage.lustre.lnet or server_lnet."""
    if not isinstance(lnet, Mapping) or "net" not in lnet or "interfaces" not in lnet:
        raise AnsibleFilterError(
            "gpucluster.tiers.lnet_conf: input must be an LNet config of the plan (net, interfaces)"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import lustre

    return str(run("lnet_conf", lustre.lnet_conf_yaml, lnet))


def nvme_discovery_conf(nvmeof: Mapping[str, Any]) -> str:
    """The NVMe-oF initiators' /etc/nvme/discovery.conf from plan.storage.nvmeof (a line a target)."""
    if not isinstance(nvmeof, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.nvme_discovery_conf: input must be the plan's storage.nvmeof")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import nvmeof as nvme

    return str(run("nvme_discovery_conf", nvme.discovery_conf_text, nvmeof))


def slurm_topology_conf(switches: Any) -> str:
    """Slurm's topology.conf from the plan's switches (plan.fabric.slurm_topology)."""
    switches = plain(switches)
    if not isinstance(switches, list):
        raise AnsibleFilterError(
            "gpucluster.tiers.slurm_topology_conf: input must be the plan's fabric.slurm_topology (a list of switches)"
        )
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import cabling

    return str(run("slurm_topology_conf", cabling.topology_conf_text, switches))


class FilterModule:
    """gpucluster.tiers filters that write a file's text from the plan."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "grafana_dashboard": grafana_dashboard,
            "prometheus_rules": prometheus_rules,
            "prometheus_rule_tests": prometheus_rule_tests,
            "nccl_conf_text": nccl_conf_text,
            "nccl_topology_xml": nccl_topology_xml,
            "mig_parted_config": mig_parted_config,
            "nfs_mount_unit": nfs_mount_unit,
            "lustre_client_unit": lustre_client_unit,
            "slurm_state_mount_unit": slurm_state_mount_unit,
            "beegfs_conf": beegfs_conf,
            "nvmet_config_json": nvmet_config_json,
            "grafana_provisioning": grafana_provisioning,
            "lnet_conf": lnet_conf,
            "slurm_topology_conf": slurm_topology_conf,
            "nvme_discovery_conf": nvme_discovery_conf,
        }
