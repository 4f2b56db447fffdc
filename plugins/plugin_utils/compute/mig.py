"""MIG partitioning: a site's profile mix per GPU, checked against the model's placements.

``gpucluster_gpu_policy.mig`` lists entries ``{nodes, gpus, profiles}``: on those compute nodes
(``all``, a list of host names or a host list such as ``compute[01-02]``), those GPUs (``all`` or
indexes) are each split into the ``profiles`` (``["3g.40gb", "3g.40gb", "1g.10gb"]``). The model's
MIG table comes from the catalog (catalog.yml ``mig``, docs/sources.md [G1] [G3]): per profile its
compute slices, memory slices, instance count and the memory slices a GPU instance may start at.

A mix is legal when every profile is within its instance count, its compute slices fit (sum <= the
model's 7, or 4 on the RTX PRO 6000) and every GPU instance has a start of its own on the memory-slice
axis without overlapping another (``nvidia-smi mig -lgipp`` lists the starts, docs/sources.md [G3]):
a placement search, not only sums. Order matters: created in the order ``1g.10gb, 4g.40gb`` the 1g
takes slice 0 and the 4g (which may start only at 0) no longer fits, so the plan lists the placement
it found (biggest first) for whoever creates instances by hand. A compute-only count ("7 slices")
accepts ``3g.40gb, 3g.40gb, 1g.10gb`` (7 compute slices), which needs 9 of the 8 memory slices. For the
catalog's tables a mix within the counts and both sums always has a placement (the unit tests check
every mix); the search is what holds when a table's starts are narrower.

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

Media-extension variants (``+me``, ``+gfx``, ``-me``) are in the catalog where a real GPU lists them
(H100 80GB ``1g.10gb+me``, ``nvidia-smi mig -lgip`` of a real H100, docs/sources.md [G20];
:func:`parse_lgip` reads that output and a unit test compares it with the catalog), but are not offered
in a mix: a training cluster does not use the media engines, and how Slurm names their types is
unconfirmed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS, GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain

FIELD = "gpucluster_gpu_policy.mig"
#: where nvidia-mig-parted's systemd service (nvidia-mig-manager) reads its config (docs/sources.md [G6])
CONFIG_FILE = "/etc/nvidia-mig-manager/config.yaml"
DISABLED = "all-disabled"  # the config name mig-parted's examples and the GPU Operator use for "no MIG"
#: mig-parted's config format (docs/sources.md [G6]), and the keys of one of a config's entries in the
#: order its examples write them: the GPUs, whether MIG is on, the MIG devices by profile
PARTED_VERSION = "v1"
PARTED_ENTRY_KEYS = ("devices", "mig-enabled", "mig-devices")
#: GPU Operator, MIG strategy mixed: one extended resource per profile (docs/sources.md [G8])
K8S_PREFIX = "nvidia.com/mig-"
#: media-extension profiles (``1g.10gb+me``, ``+gfx``, ``-me``): catalogued, never offered in a mix
MEDIA_VARIANT = re.compile(r"[+-](?:me|gfx)$")
#: one profile row of ``nvidia-smi mig -lgip``: GPU, "MIG <name>", ID, Free/Total instances, memory GiB
_LGIP_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([0-9.]+)\s")


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile: its slices and where it may start (catalog.yml ``mig.profiles``)."""

    name: str
    compute: int  # compute slices (the "Ng" of the name)
    memory: int  # memory slices it occupies, from its start
    max_instances: int  # per GPU, NVIDIA's "Number of Instances Available"
    starts: tuple[int, ...]  # the memory slices a GPU instance of it may start at


@dataclass(frozen=True)
class MigGeometry:
    """A MIG-capable model: its slices and profiles."""

    model: str
    compute_slices: int
    memory_slices: int
    profiles: dict[str, MigProfile]


@dataclass(frozen=True)
class Placement:
    profile: str
    start: int  # first memory slice


def mig_models() -> list[str]:
    """Catalog keys of the models that support MIG."""
    return sorted(k for k, m in GPUS.items() if m.mig)


def geometry(model: GpuModel, field: str = FIELD) -> MigGeometry:
    """The model's MIG table; PlanError naming ``field`` for a model without MIG (L40S)."""
    if not model.mig:
        raise PlanError(
            field,
            model.key,
            f"no MIG entry: {model.name} does not support MIG (NVIDIA's MIG GPUs, docs/sources.md [G2]); "
            f"MIG models: {', '.join(mig_models())}",
        )
    table = model.mig
    profiles = {
        name: MigProfile(name, int(p["compute"]), int(p["memory"]), int(p["max"]), tuple(int(s) for s in p["starts"]))
        for name, p in table["profiles"].items()
    }
    return MigGeometry(model.key, int(table["compute_slices"]), int(table["memory_slices"]), profiles)


def place(geo: MigGeometry, names: list[str]) -> list[Placement] | None:
    """A placement of every instance on the memory slices without overlap, or None if there is none.

    Depth-first over the instances, biggest first (fewest starts first among equals); the same
    profile's instances take increasing starts, so no arrangement is tried twice.
    """
    order = sorted(names, key=lambda n: (-geo.profiles[n].memory, len(geo.profiles[n].starts), n))

    def search(i: int, used: int, last: dict[str, int]) -> list[Placement] | None:
        if i == len(order):
            return []
        prof = geo.profiles[order[i]]
        for start in prof.starts:
            if start < last.get(prof.name, -1):
                continue
            mask = ((1 << prof.memory) - 1) << start
            if start + prof.memory > geo.memory_slices or used & mask:
                continue
            rest = search(i + 1, used | mask, {**last, prof.name: start + 1})
            if rest is not None:
                return [Placement(prof.name, start), *rest]
        return None

    return search(0, 0, {})


def offered(geo: MigGeometry) -> list[str]:
    """The profiles a mix may use: the catalog's, less the media-extension variants."""
    return [name for name in geo.profiles if not MEDIA_VARIANT.search(name)]


def parse_lgip(text: str) -> dict[str, dict[str, Any]]:
    """``nvidia-smi mig -lgip`` as {profile: {id, instances (the total), memory_gib}}, first GPU's rows."""
    out: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        m = _LGIP_ROW.match(line.strip())
        if m and m.group(2) not in out:
            out[m.group(2)] = {"id": int(m.group(3)), "instances": int(m.group(5)), "memory_gib": float(m.group(6))}
    return out


def check_mix(geo: MigGeometry, profiles: Any, field: str) -> list[Placement]:
    """The placement of one GPU's mix; PlanError naming ``field`` when the GPU cannot hold it."""
    known = ", ".join(offered(geo))
    require(
        isinstance(profiles, list) and bool(profiles),
        field,
        profiles,
        f"a list of MIG profiles for one {geo.model} GPU, each one of {known}",
    )
    for j, name in enumerate(profiles):
        require(
            not (isinstance(name, str) and MEDIA_VARIANT.search(name) and name in geo.profiles),
            f"{field}[{j}]",
            name,
            f"one of {known}: media-extension profiles (the GPU's media engines) are not planned (compute/mig.py)",
        )
        require(name in geo.profiles, f"{field}[{j}]", name, f"one of {known} ({geo.model}, docs/sources.md [G1])")
    for name in sorted(set(profiles)):
        prof, count = geo.profiles[name], profiles.count(name)
        require(count <= prof.max_instances, field, profiles, f"at most {prof.max_instances} x {name} per GPU")
    compute = sum(geo.profiles[n].compute for n in profiles)
    require(
        compute <= geo.compute_slices,
        field,
        profiles,
        f"profiles whose compute slices sum to at most {geo.compute_slices} (these sum to {compute})",
    )
    memory = sum(geo.profiles[n].memory for n in profiles)
    require(
        memory <= geo.memory_slices,
        field,
        profiles,
        f"profiles whose memory slices sum to at most {geo.memory_slices} (these sum to {memory})",
    )
    placed = place(geo, profiles)
    starts = "; ".join(f"{n} at {list(geo.profiles[n].starts)}" for n in sorted(set(profiles)))
    require(
        placed is not None,
        field,
        profiles,
        f"a mix whose GPU instances fit side by side on the {geo.memory_slices} memory slices; none does "
        f"({starts}: the starts nvidia-smi mig -lgipp lists, docs/sources.md [G3])",
    )
    return sorted(placed or [], key=lambda p: p.start)


def _hosts(value: Any, compute: list[str], field: str) -> list[str]:
    if value in (None, "all"):
        return list(compute)
    names = hostlist.expand(value) if isinstance(value, str) else value
    require(
        isinstance(names, list) and bool(names) and all(isinstance(n, str) for n in names),
        field,
        value,
        "all, a list of compute host names or a host list such as compute[01-04]",
    )
    for name in names:
        require(name in compute, field, name, f"a compute host ({hostlist.compress(compute)})")
    return sorted(set(names), key=compute.index)


def _gpus(value: Any, gpus_per_node: int, field: str) -> list[int]:
    if value in (None, "all"):
        return list(range(gpus_per_node))
    require(
        isinstance(value, list)
        and bool(value)
        and all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g < gpus_per_node for g in value)
        and len(set(value)) == len(value),
        field,
        value,
        f"all or a list of distinct GPU indexes 0..{gpus_per_node - 1}",
    )
    return sorted(int(g) for g in value)  # plain ints: the mig-parted YAML is dumped from them


def _parted_entries(layout: list[tuple[list[int], list[str]]], gpus_per_node: int) -> list[dict[str, Any]]:
    """mig-parted entries of one node layout: MIG devices per GPU set, the other GPUs without MIG."""
    out: list[dict[str, Any]] = []
    used: list[int] = []
    for gpus, profiles in layout:
        counts = {name: profiles.count(name) for name in sorted(set(profiles))}
        devices: Any = "all" if len(gpus) == gpus_per_node else gpus
        out.append({"devices": devices, "mig-enabled": True, "mig-devices": counts})
        used += gpus
    rest = [g for g in range(gpus_per_node) if g not in used]
    if rest:
        out.append({"devices": rest, "mig-enabled": False})
    return out


def _gres(layout: list[tuple[list[int], list[str]]]) -> str:
    """slurm.conf Gres of a node's MIG devices: gpu:<profile>:<n> per profile (its whole GPUs: node_gres)."""
    counts: dict[str, int] = {}
    for gpus, profiles in layout:
        for name in profiles:
            counts[name] = counts.get(name, 0) + len(gpus)
    return ",".join(f"gpu:{name}:{n}" for name, n in sorted(counts.items()))


def mig_plan(policy: Any, model: GpuModel, compute_hosts: list[str], gpus_per_node: int) -> dict[str, Any] | None:
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
    geo = geometry(model)
    per_host: dict[str, list[tuple[list[int], list[str]]]] = {}
    owner: dict[tuple[str, int], int] = {}
    entries = []
    for i, entry in enumerate(policy):
        f = f"{FIELD}[{i}]"
        require(isinstance(entry, dict), f, entry, "a mapping with nodes, gpus and profiles")
        hosts = _hosts(entry.get("nodes"), compute_hosts, f"{f}.nodes")
        gpus = _gpus(entry.get("gpus"), gpus_per_node, f"{f}.gpus")
        placed = check_mix(geo, entry.get("profiles"), f"{f}.profiles")
        profiles = [str(p) for p in entry["profiles"]]  # plain strings (an inventory's are tagged by Ansible)
        for host in hosts:
            for g in gpus:
                require(
                    (host, g) not in owner,
                    f"{f}.gpus",
                    entry.get("gpus", "all"),
                    f"GPUs no earlier entry partitions ({FIELD}[{owner.get((host, g))}] has GPU {g} of {host})",
                )
                owner[(host, g)] = i
            per_host.setdefault(host, []).append((gpus, profiles))
        entries.append(
            {
                "nodes": hostlist.compress(hosts),
                "gpus": "all" if len(gpus) == gpus_per_node else gpus,
                "profiles": profiles,
                "placement": [[p.profile, p.start] for p in placed],
            }
        )
    # one mig-parted config per distinct layout, named after the entries it is made of
    names: dict[str, str] = {}
    configs: dict[str, dict[str, Any]] = {}
    for host in compute_hosts:
        layout = per_host.get(host)
        if layout is None:
            names[host] = DISABLED
            continue
        used = sorted({owner[(host, g)] for gpus, _profiles in layout for g in gpus})
        name = "gpucluster-mig-" + "-".join(str(i) for i in used)
        names[host] = name
        config = configs.setdefault(
            name,
            {
                "hosts": [],
                "devices": _parted_entries(layout, gpus_per_node),
                "gres": _gres(layout),
                "mig_gpus": sum(len(g) for g, _profiles in layout),
                "whole_gpus": gpus_per_node - sum(len(g) for g, _profiles in layout),
                "instances": {},
            },
        )
        if not config["hosts"]:  # MIG devices per node, counted once per layout
            for gpus, profiles in layout:
                for p in profiles:
                    config["instances"][p] = config["instances"].get(p, 0) + len(gpus)
        config["hosts"].append(host)
    # mig-parted's config as data: its configs a list, in the file's order (all-disabled, then each layout
    # as the compute hosts first use it), which a mapping would lose in plan.json's sorted keys
    parted = {
        "version": PARTED_VERSION,
        "mig-configs": [{"name": DISABLED, "devices": [{"devices": "all", "mig-enabled": False}]}]
        + [{"name": name, "devices": c["devices"]} for name, c in configs.items()],
    }
    resources: dict[str, int] = {}
    for c in configs.values():
        for p, n in c["instances"].items():
            resources[K8S_PREFIX + p] = resources.get(K8S_PREFIX + p, 0) + n * len(c["hosts"])
    return {
        "model": model.key,
        "compute_slices": geo.compute_slices,
        "memory_slices": geo.memory_slices,
        "entries": entries,
        "configs": {name: dict(c, hosts=hostlist.compress(c["hosts"])) for name, c in configs.items()},
        "host_config": names,
        "config_file": CONFIG_FILE,
        "parted": parted,
        "mig_gpus": sum(c["mig_gpus"] * len(c["hosts"]) for c in configs.values()),
        "k8s_resources": dict(sorted(resources.items())),
    }


def mig_parted_config(parted: Mapping[str, Any]) -> str:
    """nvidia-mig-parted's config file (docs/sources.md [G6]) from the plan's ``gpu.mig.parted``.

    ``version``, then ``mig-configs`` in the list's order, each entry's keys in
    :data:`PARTED_ENTRY_KEYS`' order and its MIG devices by profile name, no YAML alias: every order is this
    function's or a list's, none a mapping's, so a plan read back from plan.json (keys sorted) renders
    the same bytes. The compute role's template (/etc/nvidia-mig-manager/config.yaml) and the
    Kubernetes path's ConfigMap both call it."""
    configs: dict[str, list[dict[str, Any]]] = {}
    for config in parted["mig-configs"]:
        entries = [{key: plain(entry[key]) for key in PARTED_ENTRY_KEYS if key in entry} for entry in config["devices"]]
        for entry in entries:
            if "mig-devices" in entry:
                entry["mig-devices"] = dict(sorted(entry["mig-devices"].items()))  # by profile name
        configs[str(config["name"])] = entries
    document = {"version": str(parted["version"]), "mig-configs": configs}  # plain(): no alias, no tagged value
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def mig_hosts(mig: dict[str, Any] | None) -> list[str]:
    """The compute hosts that apply a MIG layout."""
    return [h for h, name in (mig or {}).get("host_config", {}).items() if name != DISABLED]


def mig_enabled(mig: Mapping[str, Any] | None, host: str, index: int) -> bool:
    """Whether the plan puts GPU ``index`` of ``host`` in MIG mode: its layout's entry for that GPU (a
    layout may leave some GPUs whole). Reads only the host's own ``host_config`` key, so a host's slice
    of the plan (host_plan narrows ``gpu.mig.host_config``) answers for that host."""
    name = ((mig or {}).get("host_config") or {}).get(host, DISABLED)
    config = ((mig or {}).get("configs") or {}).get(name) or {}
    for entry in config.get("devices") or []:
        if entry.get("devices") == "all" or index in (entry.get("devices") or []):
            return bool(entry.get("mig-enabled"))
    return False


def node_gres(nodes_expr: str, mig: dict[str, Any] | None, whole_type: str, gpus: int) -> list[tuple[str, str]]:
    """(host list, Gres) for slurm.conf node lines: ``nodes_expr`` split by MIG layout, in host order.

    A node without MIG keeps ``gpu:<whole_type>:<gpus>``; a MIG node has ``gpu:<profile>:<n>`` per
    profile and its GPUs without MIG as ``gpu:<whole_type>:<rest>``."""
    if not mig:
        return [(nodes_expr, f"gpu:{whole_type}:{gpus}")]
    groups: dict[str, list[str]] = {}
    for host in hostlist.expand(nodes_expr):
        name = mig["host_config"].get(host, DISABLED)
        config = mig["configs"].get(name, {"gres": "", "whole_gpus": gpus})
        whole = [f"gpu:{whole_type}:{config['whole_gpus']}"] if config["whole_gpus"] else []
        gres = ",".join([config["gres"]] * bool(config["gres"]) + whole)
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


def gres_conf_lines(mig: dict[str, Any] | None) -> list[str]:
    """gres.conf on a MIG site: ``Include`` of the lines each node writes from its driver's MIG devices
    (:data:`GRES_MIG_CONF`; why: :data:`GRES_MIG_REASON`). Every compute node has the file (no line where
    the node has no MIG layout)."""
    return [f"Include {GRES_MIG_CONF}"] if mig_hosts(mig) else []


def planned_devices(mig: Mapping[str, Any] | None, host: str) -> dict[str, dict[str, int]]:
    """{GPU index (a string, as in JSON): {profile: MIG devices}} of ``host``'s layout; {} without one."""
    name = ((mig or {}).get("host_config") or {}).get(host, DISABLED)
    config = ((mig or {}).get("configs") or {}).get(name) or {}
    gpus: dict[str, dict[str, int]] = {}
    for entry in config.get("devices") or []:
        if not entry.get("mig-enabled"):
            continue
        indexes = (
            range(int(config["mig_gpus"]) + int(config["whole_gpus"]))
            if entry["devices"] == "all"
            else entry["devices"]
        )
        for index in indexes:
            gpus[str(index)] = {str(p): int(n) for p, n in sorted(entry["mig-devices"].items())}
    return gpus


def gres_mig(mig: dict[str, Any] | None, whole_type: str) -> dict[str, Any]:
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


def _profiles(mig: dict[str, Any] | None) -> list[str]:
    return sorted({p for c in (mig or {}).get("configs", {}).values() for p in c["instances"]})


def accounting_tres(mig: dict[str, Any] | None, whole_type: str | None = None) -> str:
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


def billing_weights(mig: dict[str, Any] | None, whole_type: str, site: Any = None) -> dict[str, Any]:
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


def without_mig(hosts: list[str], mig: dict[str, Any] | None) -> list[str]:
    """``hosts`` less the MIG nodes (their GRES lines come from :func:`gres_conf_lines`)."""
    skip = set(mig_hosts(mig))
    return [h for h in hosts if h not in skip]
