"""MIG partitioning: a site's profile mix per GPU, planned per node for mig-parted, Slurm and Kubernetes.

``gpucluster_gpu_policy.mig`` lists entries ``{nodes, gpus, profiles}``: on those compute nodes
(``all``, a list of host names or a host list such as ``compute[01-02]``), those GPUs (``all`` or
indexes) are each split into the ``profiles`` (``["3g.40gb", "3g.40gb", "1g.10gb"]``). Whether a mix fits
one GPU (the model's MIG table, the placement search) is compute/mig_layout.py's question; its names are
importable from here too.

The plan (``plan["gpu"]["mig"]``, None without a policy) gives:
- an nvidia-mig-parted config (docs/sources.md [G6]) as data, ``parted``: ``version: v1`` and
  ``mig-configs``, a list of ``{name, devices}``: ``all-disabled``, then one config per distinct node
  layout in the order the compute hosts first use it; each compute node applies its own by name. The
  file is rendered from it by :func:`mig_parted_config` (filter ``gpucluster.tiers.mig_parted_config``,
  and the Kubernetes path's ConfigMap), which names every order itself: a plan read back from
  plan.json (keys sorted) renders the same bytes;
- Slurm: ``Gres=gpu:<profile>:<n>`` in the MIG nodes' slurm.conf lines, the profile name being a substring
  of the "MIG Profile" Slurm names a MIG device by (docs/sources.md [G7]); Slurm does not partition GPUs
  itself, so the layout is applied before slurmd starts. gres.conf includes ``/etc/slurm/gres-mig.conf``,
  which the node writes before every slurmd start from its driver (slurm role, gpucluster-mig-gres):
  ``MultipleFiles=`` lines, one per MIG device (gres.conf(5) of Slurm 22.05), checked against the
  planned layout (:func:`gres_mig`). Not ``MultipleFiles=`` lines from the plan, because the MIG device
  files follow instance IDs the driver assigns at creation; not ``AutoDetect=nvml``, because Debian 12's
  NVML plugin cannot be installed at slurmd's version (:data:`GRES_MIG_REASON`);
- Slurm accounting in MIG-slice units (``billing_weights``): Slurm counts every MIG device as one
  ``gres/gpu``, so by default a 1g.10gb slice would cost the fair share of a whole H100. A job is billed
  its compute slices instead (1g = 1, 3g = 3, a whole GPU = the model's 7; or a site-set weight per
  profile, ``gpucluster_slurm.mig_billing_weights``, in GPUs): TRESBillingWeights gives the untyped
  ``GRES/gpu`` the smallest weight and each ``GRES/gpu:<type>`` the rest, since a job that names its
  type is counted in both TRES (docs/sources.md [SL21]); the QOS and account GPU limits become
  ``billing`` limits in the same slices (GPUs x 7);
- Kubernetes: the GPU Operator's mixed strategy advertises ``nvidia.com/mig-<profile>`` per profile
  (docs/sources.md [G8]); the totals become Kueue quotas.

"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.mig_layout import (
    FIELD,
    MEDIA_VARIANT,
    MigGeometry,
    MigProfile,
    Placement,
    check_mix,
    geometry,
    mig_models,
    offered,
    parse_lgip,
    place,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    BillingWeights,
    GresMig,
    MigConfig,
    MigEntry,
    MigSection,
    PartedConfig,
    PartedDevices,
    PartedNamedConfig,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS, GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_range, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain

#: where nvidia-mig-parted's systemd service (nvidia-mig-manager) reads its config (docs/sources.md [G6])
CONFIG_FILE = "/etc/nvidia-mig-manager/config.yaml"
DISABLED = "all-disabled"  # the config name mig-parted's examples and the GPU Operator use for "no MIG"
#: mig-parted's config format (docs/sources.md [G6]), and the keys of one of a config's entries in the
#: order its examples write them: the GPUs, whether MIG is on, the MIG devices by profile
PARTED_VERSION = "v1"
PARTED_ENTRY_KEYS = ("devices", "mig-enabled", "mig-devices")
#: GPU Operator, MIG strategy mixed: one extended resource per profile (docs/sources.md [G8])
K8S_PREFIX = "nvidia.com/mig-"


def _hosts(value: object, compute: list[str], field: str) -> list[str]:
    if value is None or value == "all":
        return list(compute)
    names = hostlist.expand(value) if isinstance(value, str) else value
    require(
        isinstance(names, list) and bool(names) and all(isinstance(n, str) for n in names),
        field,
        value,
        "all, a list of compute host names or a host list such as compute[01-04]",
    )
    if not isinstance(names, list):  # narrowed by the require above
        raise AssertionError(names)
    for name in names:
        require(name in compute, field, name, f"a compute host ({hostlist.compress(compute)})")
    return sorted({str(n) for n in names}, key=compute.index)


def _gpus(value: object, gpus_per_node: int, field: str) -> list[int]:
    if value is None or value == "all":
        return list(range(gpus_per_node))
    ok = (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g < gpus_per_node for g in value)
        and len(set(value)) == len(value)
    )
    require(ok, field, value, f"all or a list of distinct GPU indexes 0..{gpus_per_node - 1}")
    if not isinstance(value, list):  # narrowed by the require above
        raise AssertionError(value)
    return sorted(int(g) for g in value)  # plain ints: the mig-parted YAML is dumped from them


#: one node's layout: (GPU indexes, the profiles each of them is split into) per entry that covers the node
Layout = list[tuple[list[int], list[str]]]


def _parted_entries(layout: Layout, gpus_per_node: int) -> list[PartedDevices]:
    """mig-parted entries of one node layout: MIG devices per GPU set, the other GPUs without MIG."""
    out: list[PartedDevices] = []
    used: list[int] = []
    for gpus, profiles in layout:
        counts = {name: profiles.count(name) for name in sorted(set(profiles))}
        devices: str | list[int] = "all" if len(gpus) == gpus_per_node else gpus
        out.append({"devices": devices, "mig-enabled": True, "mig-devices": counts})
        used += gpus
    rest = [g for g in range(gpus_per_node) if g not in used]
    if rest:
        out.append({"devices": rest, "mig-enabled": False})
    return out


def _gres(layout: Layout) -> str:
    """slurm.conf Gres of a node's MIG devices: gpu:<profile>:<n> per profile (its whole GPUs: node_gres)."""
    counts: dict[str, int] = {}
    for gpus, profiles in layout:
        for name in profiles:
            counts[name] = counts.get(name, 0) + len(gpus)
    return ",".join(f"gpu:{name}:{n}" for name, n in sorted(counts.items()))


@dataclass
class _Entries:
    """The checked policy: per host its layout, per (host, GPU) the entry that partitions it, the entries."""

    per_host: dict[str, Layout] = field(default_factory=dict)
    owner: dict[tuple[str, int], int] = field(default_factory=dict)
    entries: list[MigEntry] = field(default_factory=list)


def _check_entries(policy: list[object], geo: MigGeometry, compute_hosts: list[str], gpus_per_node: int) -> _Entries:
    """Each policy entry checked (hosts, GPUs, its mix), no GPU partitioned by two entries."""
    got = _Entries()
    for i, entry in enumerate(policy):
        f = f"{FIELD}[{i}]"
        require(isinstance(entry, dict), f, entry, "a mapping with nodes, gpus and profiles")
        if not isinstance(entry, dict):  # narrowed by the require above
            raise AssertionError(entry)
        hosts = _hosts(entry.get("nodes"), compute_hosts, f"{f}.nodes")
        gpus = _gpus(entry.get("gpus"), gpus_per_node, f"{f}.gpus")
        placed = check_mix(geo, entry.get("profiles"), f"{f}.profiles")
        profiles = [str(p) for p in entry["profiles"]]  # plain strings (an inventory's are tagged by Ansible)
        for host in hosts:
            for g in gpus:
                require(
                    (host, g) not in got.owner,
                    f"{f}.gpus",
                    entry.get("gpus", "all"),
                    f"GPUs no earlier entry partitions ({FIELD}[{got.owner.get((host, g))}] has GPU {g} of {host})",
                )
                got.owner[(host, g)] = i
            got.per_host.setdefault(host, []).append((gpus, profiles))
        got.entries.append(
            {
                "nodes": hostlist.compress(hosts),
                "gpus": "all" if len(gpus) == gpus_per_node else gpus,
                "profiles": profiles,
                "placement": [[p.profile, p.start] for p in placed],
            }
        )
    return got


@dataclass
class _Config:
    """One mig-parted config while the hosts are grouped: its hosts a list until the plan compresses it."""

    hosts: list[str]
    devices: list[PartedDevices]
    gres: str
    mig_gpus: int
    whole_gpus: int
    instances: dict[str, int]

    def section(self) -> MigConfig:
        return {
            "hosts": hostlist.compress(self.hosts),
            "devices": self.devices,
            "gres": self.gres,
            "mig_gpus": self.mig_gpus,
            "whole_gpus": self.whole_gpus,
            "instances": self.instances,
        }


def _configs(got: _Entries, compute_hosts: list[str], gpus_per_node: int) -> tuple[dict[str, str], dict[str, _Config]]:
    """One mig-parted config per distinct layout, named after the entries it is made of; each host's config."""
    names: dict[str, str] = {}
    configs: dict[str, _Config] = {}
    for host in compute_hosts:
        layout = got.per_host.get(host)
        if layout is None:
            names[host] = DISABLED
            continue
        used = sorted({got.owner[(host, g)] for gpus, _profiles in layout for g in gpus})
        name = "gpucluster-mig-" + "-".join(str(i) for i in used)
        names[host] = name
        if name not in configs:
            mig_gpus = sum(len(g) for g, _profiles in layout)
            instances: dict[str, int] = {}  # MIG devices per node, counted once per layout
            for gpus, profiles in layout:
                for p in profiles:
                    instances[p] = instances.get(p, 0) + len(gpus)
            configs[name] = _Config(
                [], _parted_entries(layout, gpus_per_node), _gres(layout), mig_gpus, gpus_per_node - mig_gpus, instances
            )
        configs[name].hosts.append(host)
    return names, configs


def mig_plan(policy: object, model: GpuModel, compute_hosts: list[str], gpus_per_node: int) -> MigSection | None:
    """plan["gpu"]["mig"]: None without ``gpucluster_gpu_policy.mig``; else the checked layout per node,
    the mig-parted config, the Slurm GRES per config and the Kubernetes resources."""
    if policy is None:
        return None
    require(
        isinstance(policy, list) and bool(policy),
        FIELD,
        policy,
        "a list of entries {nodes, gpus, profiles} (leave it out for no MIG)",
    )
    if not isinstance(policy, list):  # narrowed by the require above
        raise AssertionError(policy)
    geo = geometry(model)
    got = _check_entries(policy, geo, compute_hosts, gpus_per_node)
    names, configs = _configs(got, compute_hosts, gpus_per_node)
    # mig-parted's config as data: its configs a list, in the file's order (all-disabled, then each layout
    # as the compute hosts first use it), which a mapping would lose in plan.json's sorted keys
    disabled: PartedNamedConfig = {"name": DISABLED, "devices": [{"devices": "all", "mig-enabled": False}]}
    parted: PartedConfig = {
        "version": PARTED_VERSION,
        "mig-configs": [disabled] + [{"name": name, "devices": c.devices} for name, c in configs.items()],
    }
    resources: dict[str, int] = {}
    for c in configs.values():
        for p, n in c.instances.items():
            resources[K8S_PREFIX + p] = resources.get(K8S_PREFIX + p, 0) + n * len(c.hosts)
    return {
        "model": model.key,
        "compute_slices": geo.compute_slices,
        "memory_slices": geo.memory_slices,
        "entries": got.entries,
        "configs": {name: c.section() for name, c in configs.items()},
        "host_config": names,
        "config_file": CONFIG_FILE,
        "parted": parted,
        "mig_gpus": sum(c.mig_gpus * len(c.hosts) for c in configs.values()),
        "k8s_resources": dict(sorted(resources.items())),
    }


def mig_parted_config(parted: PartedConfig) -> str:
    """nvidia-mig-parted's config file (docs/sources.md [G6]) from the plan's ``gpu.mig.parted``.

    ``version``, then ``mig-configs`` in the list's order, each entry's keys in
    :data:`PARTED_ENTRY_KEYS`' order and its MIG devices by profile name, no YAML alias: every order is this
    function's or a list's, none a mapping's, so a plan read back from plan.json (keys sorted) renders
    the same bytes. The compute role's template (/etc/nvidia-mig-manager/config.yaml) and the
    Kubernetes path's ConfigMap both call it."""
    configs: dict[str, list[dict[str, object]]] = {}
    for config in parted["mig-configs"]:
        entries: list[dict[str, object]] = []
        for device in config["devices"]:  # keys in PARTED_ENTRY_KEYS' order
            entry: dict[str, object] = {
                "devices": plain(device["devices"]),
                "mig-enabled": plain(device["mig-enabled"]),
            }
            if "mig-devices" in device:
                entry["mig-devices"] = dict(sorted(plain(device["mig-devices"]).items()))  # by profile name
            entries.append(entry)
        configs[str(config["name"])] = entries
    document = {"version": str(parted["version"]), "mig-configs": configs}  # plain(): no alias, no tagged value
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def mig_hosts(mig: MigSection | None) -> list[str]:
    """The compute hosts that apply a MIG layout."""
    return [h for h, name in (mig["host_config"] if mig else {}).items() if name != DISABLED]


def _host_config(mig: MigSection | None, host: str) -> MigConfig | None:
    """``host``'s layout, None without one. Reads only the host's own ``host_config`` key, so a host's slice
    of the plan (host_plan narrows ``gpu.mig.host_config``) answers for that host."""
    if not mig:
        return None
    name = (mig.get("host_config") or {}).get(host, DISABLED)
    return (mig.get("configs") or {}).get(name)


def mig_enabled(mig: MigSection | None, host: str, index: int) -> bool:
    """Whether the plan puts GPU ``index`` of ``host`` in MIG mode: its layout's entry for that GPU (a
    layout may leave some GPUs whole)."""
    config = _host_config(mig, host)
    for entry in (config.get("devices") or []) if config else []:
        devices = entry.get("devices")
        if devices == "all" or index in (devices if isinstance(devices, list) else []):
            return bool(entry.get("mig-enabled"))
    return False


def node_gres(nodes_expr: str, mig: MigSection | None, whole_type: str, gpus: int) -> list[tuple[str, str]]:
    """(host list, Gres) for slurm.conf node lines: ``nodes_expr`` split by MIG layout, in host order.

    A node without MIG keeps ``gpu:<whole_type>:<gpus>``; a MIG node has ``gpu:<profile>:<n>`` per
    profile and its GPUs without MIG as ``gpu:<whole_type>:<rest>``."""
    if not mig:
        return [(nodes_expr, f"gpu:{whole_type}:{gpus}")]
    groups: dict[str, list[str]] = {}
    for host in hostlist.expand(nodes_expr):
        config = mig["configs"].get(mig["host_config"].get(host, DISABLED))
        mig_gres, whole_gpus = (config["gres"], config["whole_gpus"]) if config else ("", gpus)
        whole = [f"gpu:{whole_type}:{whole_gpus}"] if whole_gpus else []
        gres = ",".join([mig_gres] * bool(mig_gres) + whole)
        groups.setdefault(gres, []).append(host)
    return [(hostlist.compress(hosts), gres) for gres, hosts in groups.items()]


#: where the MIG nodes' gres.conf lines are written on the node (gpucluster-mig-gres, slurm role) and the
#: plan's part it checks them against; gres.conf includes the first
GRES_MIG_CONF = "/etc/slurm/gres-mig.conf"
GRES_MIG_JSON = "/etc/slurm/gres-mig.json"
#: the program that writes them (roles/slurm/files/gpucluster-mig-gres), run by slurmd's drop-in
GRES_MIG_PROGRAM = "/usr/local/sbin/gpucluster-mig-gres"
#: why the MIG nodes' gres.conf lines are written on the node, with explicit files (the plan's words, report.md)
GRES_MIG_REASON = (
    "a MIG device's files are its GPU's /dev/nvidiaN and the /dev/nvidia-caps/nvidia-capN of its GPU instance "
    "and compute instance, whose numbers follow the instance IDs the driver assigns when nvidia-mig-parted "
    "creates them (/proc/driver/nvidia-caps/mig-minors, [G9]): the plan cannot list them, the node can once "
    "its layout is applied. gpucluster-mig-gres reads them (nvidia-smi mig -lci, mig-minors, nvidia-smi -q) "
    "before every slurmd start and writes MultipleFiles= lines, the files Slurm's NVML plugin would give the "
    "same device ([G7]); slurmd refuses to start when the driver's instances are not the planned layout. Not "
    "AutoDetect=nvml: Debian 12 ships its gpu_nvml.so in contrib's slurm-wlm-nvml-plugin, which depends on "
    "slurm-wlm-basic-plugins at exactly its own version and lags slurmd's security updates (contrib "
    "22.05.8-4+deb12u2, slurmd 22.05.8-4+deb12u3): it cannot be installed without downgrading slurmd ([G9])"
)


def gres_conf_lines(mig: MigSection | None) -> list[str]:
    """gres.conf on a MIG site: ``Include`` of the lines each node writes from its driver's MIG devices
    (:data:`GRES_MIG_CONF`; why: :data:`GRES_MIG_REASON`). Every compute node has the file (no line where
    the node has no MIG layout)."""
    return [f"Include {GRES_MIG_CONF}"] if mig_hosts(mig) else []


def planned_devices(mig: MigSection | None, host: str) -> dict[str, dict[str, int]]:
    """{GPU index (a string, as in JSON): {profile: MIG devices}} of ``host``'s layout; {} without one."""
    config = _host_config(mig, host)
    gpus: dict[str, dict[str, int]] = {}
    for entry in (config.get("devices") or []) if config else []:
        if not entry.get("mig-enabled") or config is None:
            continue
        devices = entry["devices"]
        indexes = range(int(config["mig_gpus"]) + int(config["whole_gpus"])) if devices == "all" else devices
        for index in indexes:
            gpus[str(index)] = {str(p): int(n) for p, n in sorted(entry.get("mig-devices", {}).items())}
    return gpus


def gres_mig(mig: MigSection | None, whole_type: str) -> GresMig:
    """The slurm role's part of the MIG nodes' gres.conf: per MIG node what gpucluster-mig-gres checks the
    driver against (its JSON file), the files, and the reason (:data:`GRES_MIG_REASON`)."""
    hosts = mig_hosts(mig)
    return {
        "hosts": hosts,
        "program": GRES_MIG_PROGRAM if hosts else None,
        "conf": GRES_MIG_CONF if hosts else None,
        "config_file": GRES_MIG_JSON if hosts else None,
        "nodes": {h: {"node": h, "whole_type": whole_type, "gpus": planned_devices(mig, h)} for h in hosts},
        "reason": GRES_MIG_REASON if hosts else None,
    }


def _profiles(mig: MigSection | None) -> list[str]:
    return sorted({p for c in (mig["configs"] if mig else {}).values() for p in c["instances"]})


def accounting_tres(mig: MigSection | None, whole_type: str | None = None) -> str:
    """slurm.conf AccountingStorageTRES: ``gres/gpu`` (every allocated GPU and MIG device, any type)
    and, on a MIG site, ``gres/gpu:<profile>`` per planned profile (and ``gres/gpu:<whole_type>``), so
    sacct and sreport count each profile's use and TRESBillingWeights can weigh it
    (https://slurm.schedmd.com/tres.html; a typed GRES TRES counts only the jobs that ask for that type
    by name, docs/sources.md [SL21])."""
    profiles = _profiles(mig)
    whole = [f"gres/gpu:{whole_type}"] if profiles and whole_type else []
    return ",".join(["gres/gpu", *(f"gres/gpu:{p}" for p in profiles), *whole])


BILLING_FIELD = "gpucluster_slurm.mig_billing_weights"


def _w(value: float) -> str:
    return f"{round(value, 4):g}"


def billing_weights(mig: MigSection | None, whole_type: str, site: object = None) -> BillingWeights:
    """TRESBillingWeights and the unit of the GPU limits: GPUs without MIG, MIG slices with it.

    ``site``: ``gpucluster_slurm.mig_billing_weights`` {profile: weight in GPUs, 0 < w <= 1}; a profile
    not listed weighs its compute slices / the model's compute slices."""
    if not mig:
        require(site is None, BILLING_FIELD, site, "no entry: the site plans no MIG (gpucluster_gpu_policy.mig)")
        return {"unit": "gpu", "per_gpu": 1, "tres": "gres/gpu", "untyped": 1.0, "weights": {}, "text": "GRES/gpu=1.0"}
    geo = geometry(GPUS[mig["model"]])
    slices = geo.compute_slices
    profiles = _profiles(mig)
    site = {} if site is None else site
    require(isinstance(site, dict), BILLING_FIELD, site, "a mapping {profile: weight in GPUs}")
    if not isinstance(site, dict):  # narrowed by the require above
        raise AssertionError(site)
    weights: dict[str, float] = {}
    for name in profiles:
        weights[name] = float(geo.profiles[name].compute)
    for name, value in site.items():
        require(name in profiles, f"{BILLING_FIELD}.{name}", name, f"one of the planned profiles {profiles}")
        w = check_range(value, f"{BILLING_FIELD}.{name}", 0.001, 1)
        weights[name] = w * slices
    weights[whole_type] = float(slices)
    untyped = min(weights.values())
    typed = {name: w - untyped for name, w in weights.items()}
    text = ",".join(
        [f"GRES/gpu={_w(untyped)}", *(f"GRES/gpu:{name}={_w(typed[name])}" for name in [*profiles, whole_type])]
    )
    return {
        "unit": "mig_slice",
        "per_gpu": slices,
        "tres": "billing",
        "untyped": round(untyped, 4),
        "weights": {name: round(w, 4) for name, w in weights.items()},
        "text": text,
    }


def without_mig(hosts: list[str], mig: MigSection | None) -> list[str]:
    """``hosts`` less the MIG nodes (their GRES lines come from :func:`gres_conf_lines`)."""
    skip = set(mig_hosts(mig))
    return [h for h in hosts if h not in skip]


__all__ = [
    "BILLING_FIELD",
    "CONFIG_FILE",
    "DISABLED",
    "FIELD",
    "GRES_MIG_CONF",
    "GRES_MIG_JSON",
    "GRES_MIG_PROGRAM",
    "GRES_MIG_REASON",
    "K8S_PREFIX",
    "MEDIA_VARIANT",
    "PARTED_ENTRY_KEYS",
    "PARTED_VERSION",
    "MigGeometry",
    "MigProfile",
    "Placement",
    "accounting_tres",
    "billing_weights",
    "check_mix",
    "geometry",
    "gres_conf_lines",
    "gres_mig",
    "mig_enabled",
    "mig_hosts",
    "mig_models",
    "mig_parted_config",
    "mig_plan",
    "node_gres",
    "offered",
    "parse_lgip",
    "place",
    "planned_devices",
    "without_mig",
]
