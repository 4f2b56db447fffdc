"""Values valid alone and wrong together, or wrong in scale (issue 40, "round three").

Run by site.load_site after the schema (types, forms) and values.py (reserved names, system folders, address
kinds), before any engine module derives a value, so each error names the field the user wrote:

- outside the container lab, volatile and linked system folders (``/var/run`` is a link to ``/run``, a
  tmpfs emptied at boot; ``/tmp``, ``/var/tmp`` are cleaned; ``/dev/shm`` is memory) as any data, staging,
  state or mount path; anywhere, a path component longer than NAME_MAX (255 bytes);
- the storage paths: home, checkpoints and datasets apart (none inside another, none the same), the
  checkpoints on the shared file system of a shared storage type (on the NVMe array for local_nvme);
- mount options per purpose: the Slurm controllers' shared state must be mounted read-write;
- sizes in their units' physical ranges: Lustre stripe sizes and counts, rated storage bandwidth above zero
  (an override such as ``allow_storage_below_need`` lowers a floor, never makes a rate negative), a circuit
  voltage above zero checked before any formula divides by it;
- a section for another fabric or storage type (a ``gpucluster_fabric.roce`` block on an InfiniBand site, an
  ``infiniband`` section on a RoCE or TCP site, an ``nfs`` section on a Lustre site) and storage server
  groups of another storage type;
- a QOS preemption cycle (A preempts B, B preempts A), with Slurm's built-in QOS merged in;
- a node as bought: an SXM board holds 4 or 8 GPUs, the compute NICs are counted against the GPUs the
  user set (more NICs than ``gpus_per_node`` names ``gpus_per_node``), a compute NIC no slower than the fabric;
- a fabric pool's ``first_offset`` inside its rail (named, not the derived subnet);
- the cluster's name a DNS-1123 label on the Kubernetes path (it names objects), and never ending in
  '-', '.' or '_'; ``localhost`` as an inventory host (the plan runs there); a host both a compute node and
  a storage server;
- every registry credential NAME one of the secrets the site declares (``gpucluster_secrets``).

Pure Python, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeGuard

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import (
    BEEGFS_SERVERS,
    COMPUTE,
    LUSTRE_SERVERS,
    NFS_SERVER,
    NVMEOF_TARGET,
    STORAGE_GROUPS,
    STORAGE_TYPES,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, require

#: Folders whose content does not survive a reboot or is memory (FHS 3.0 §3.15, §5.13 and §5.15: /var/run
#: and /var/lock are compatibility links to /run; /tmp and /var/tmp are cleaned; /dev/shm is a tmpfs):
#: no data, staging, state or mount path may lie under one (/run, /dev and /tmp themselves: values.py).
VOLATILE = ("/var/run", "/var/lock", "/tmp", "/var/tmp", "/dev/shm", "/run")
#: Linux's NAME_MAX: the longest path component (limits.h, 255 bytes).
NAME_MAX = 255
#: Lustre: a stripe size is a multiple of 64 KiB of at most 4 GiB, a file has at most 2000 stripes
#: (lfs-setstripe(1) --stripe-size, https://github.com/lustre/lustre-release/blob/master/Documentation/man1/
#: lfs-setstripe.1; LOV_MAX_STRIPE_COUNT in lustre/include/uapi/linux/lustre/lustre_user.h).
STRIPE_UNIT = 64 * 1024
STRIPE_SIZE_MAX = 4 * 1024**3
STRIPE_COUNT_MAX = 2000
#: Rated storage bandwidth, GB/s: above zero and below a petabyte per second (the largest file systems of
#: the TOP500 deliver some TB/s).
RATED_GBPS_MAX = 1_000_000
#: Low-voltage circuits (IEC 60364: up to 1000 V AC).
VOLTAGE_MAX = 1000
#: GPUs on one SXM baseboard: HGX boards come with 4 or 8 (docs/sources.md [IV7], values.SXM_BOARD_GPUS).
SXM_BOARD_SIZES = (4, 8)
#: Slurm's QOS the plan always creates (slurm/accounting.py BUILTIN_QOS): name -> the QOS it preempts.
BUILTIN_PREEMPT = {"preemptible": [], "normal": ["preemptible"], "high": ["preemptible"]}
#: the storage server groups each storage type uses (inventory/choices.py)
SERVER_GROUPS = {
    "nfs": frozenset({NFS_SERVER}),
    "lustre": LUSTRE_SERVERS,
    "nvmeof": frozenset({NVMEOF_TARGET}),
    "beegfs": BEEGFS_SERVERS,
    "local_nvme": frozenset(),
}
STORAGE_SECTIONS = STORAGE_TYPES
#: a secret's name, as compute/containers.py reads a registry's credential name
SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


def _map(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _clean(path: str) -> str:
    return "/" + "/".join(part for part in path.split("/") if part)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def check_paths(raw: Mapping[str, object]) -> None:
    """No data path on a volatile folder, no component longer than NAME_MAX."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import SCHEMA, field_path
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.values import PATH_FIELDS_EXEMPT, _typed

    # the container lab (gpucluster_lab, accepted from the lab's overlay only) may keep its data anywhere
    lab = _map(raw.get("gpucluster_lab")).get("enabled") is True
    for path, value in _typed(raw, SCHEMA, [], "abs_path"):
        field = field_path(path)
        if not isinstance(value, str) or field in PATH_FIELDS_EXEMPT:
            continue
        longest = max((len(part.encode()) for part in value.split("/")), default=0)
        require(
            longest <= NAME_MAX,
            field,
            value if len(value) <= 80 else f"{value[:80]}... ({len(value)} characters)",
            f"a path whose every component is at most {NAME_MAX} bytes (Linux's NAME_MAX); one has {longest}",
        )
        clean = _clean(value)
        folder = None if lab else next((v for v in VOLATILE if _under(clean, v)), None)
        require(
            folder is None,
            field,
            value,
            f"a folder that survives a reboot, not under {', '.join(VOLATILE)} ({value} is under {folder}: "
            "/var/run and /var/lock are links to /run, a tmpfs emptied at boot; /tmp and /var/tmp are cleaned; "
            "/dev/shm is memory)",
        )


def check_storage(raw: Mapping[str, object], groups: Mapping[str, list[str]]) -> None:
    """Sections and server groups of the storage's own type; rated rates; the paths apart; layouts' sizes."""
    p = "gpucluster_storage"
    storage = _map(raw.get(p))
    kind = storage.get("type")
    if isinstance(kind, str) and kind in SERVER_GROUPS:
        for other in STORAGE_SECTIONS:
            require(
                other == kind or other not in storage,
                f"{p}.{other}",
                f"<a {other} section>",
                f"only the section of the site's storage type ({p}.type {kind}: {p}.{kind}); the {other} section "
                "would be ignored: remove it, or set type to the storage the site has",
            )
        used = SERVER_GROUPS[kind]
        for group in STORAGE_GROUPS:
            members = groups.get(group) or []
            require(
                not members or group in used,
                f"groups.{group}",
                sorted(members),
                f"storage server groups of the site's storage type ({p}.type {kind}: "
                f"{', '.join(sorted(used)) or 'none'}): hosts in {group} would get no storage role",
            )
    for key in ("rated_write_gbps", "rated_read_gbps"):
        rate = storage.get(key)
        if _number(rate):
            require(
                0 < rate <= RATED_GBPS_MAX,
                f"{p}.{key}",
                rate,
                f"a rate in GB/s above 0 and at most {RATED_GBPS_MAX} (what the storage delivers; "
                "gpucluster_workload.allow_storage_below_need lowers the floor, never the rate below zero)",
            )
    paths = {k: v for k, v in _map(storage.get("paths")).items() if isinstance(v, str)}
    names = sorted(paths)
    for i, one in enumerate(names):
        for other in names[i + 1 :]:
            a, b = _clean(paths[one]), _clean(paths[other])
            inner, outer = (one, other) if _under(a, b) else (other, one)
            require(
                not (_under(a, b) or _under(b, a)),
                f"{p}.paths.{inner}",
                paths[inner],
                f"a folder of its own, apart from {p}.paths.{outer} ({paths[outer]}): home, checkpoints and "
                "datasets get their own layouts, quotas and purge rules",
            )
    _check_checkpoints(storage, paths.get("checkpoints"))
    layouts = _map(_map(storage.get("lustre")).get("layouts"))
    for name, components in layouts.items():
        for i, component in enumerate(components if isinstance(components, list) else []):
            comp = _map(component)
            where = f"{p}.lustre.layouts.{name}[{i}]"
            size = comp.get("stripe_size")
            if _number(size):
                require(
                    0 < size <= STRIPE_SIZE_MAX and size % STRIPE_UNIT == 0,
                    f"{where}.stripe_size",
                    size,
                    f"a multiple of 64 KiB ({STRIPE_UNIT} bytes) of at most 4 GiB ({STRIPE_SIZE_MAX} bytes) "
                    "(lfs setstripe --stripe-size)",
                )
            count = comp.get("stripe_count")
            if _number(count):
                require(
                    count == -1 or 1 <= count <= STRIPE_COUNT_MAX,
                    f"{where}.stripe_count",
                    count,
                    f"-1 (every OST) or 1 to {STRIPE_COUNT_MAX} (Lustre's most stripes per file)",
                )


def storage_mounts(storage: Mapping[str, object]) -> list[str]:
    """Where the storage of the site's type is mounted on a compute node, as site.py's Storage.mount_points
    reads it (the section's ``mount_point`` and its exports'), Lustre's default ``/lustre/<fsname>`` too."""
    kind = storage.get("type")
    section = _map(storage.get(kind)) if isinstance(kind, str) else {}
    exports = section.get("exports")
    found = [_map(e).get("mount_point") for e in exports] if isinstance(exports, list) else []
    found.append(section.get("mount_point"))
    if kind == "lustre" and not isinstance(section.get("mount_point"), str):
        found.append(f"/lustre/{section.get('fsname', 'lustre')}")  # site.py's Lustre default
    return [m for m in found if isinstance(m, str) and m.startswith("/")]


def _check_checkpoints(storage: Mapping[str, object], checkpoints: object) -> None:
    """The checkpoint path on the file system every node mounts (a shared type: storage/checkpoint.py
    SHARED_TYPES), or on the node's NVMe array (local_nvme: tier1 saves to local NVMe, one node)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.checkpoint import SHARED_TYPES

    kind = storage.get("type")
    mounts = storage_mounts(storage)
    if not isinstance(checkpoints, str) or not mounts or kind not in (*SHARED_TYPES, "local_nvme"):
        return
    where = (
        f"the shared file system of {kind} ({', '.join(mounts)}): every node of a job writes its shard there "
        "and every node reads it back after a restart (the async drain copies to it)"
        if kind in SHARED_TYPES
        else f"the node's NVMe array (gpucluster_storage.local_nvme.mount_point {mounts[0]}): tier1 saves "
        "checkpoints there; a path on the root disk fills it"
    )
    require(
        any(_under(_clean(checkpoints), _clean(m)) for m in mounts),
        "gpucluster_storage.paths.checkpoints",
        checkpoints,
        f"a folder on {where}",
    )


def check_fabric(raw: Mapping[str, object]) -> None:
    """No section of another fabric type; every compute NIC at least the fabric's link rate."""
    p = "gpucluster_fabric"
    fabric = _map(raw.get(p))
    kind = fabric.get("type")
    require(
        kind == "roce" or fabric.get("roce") is None,
        f"{p}.roce",
        "<a roce section>",
        f"a roce section only on a RoCE fabric ({p}.type roce, here {kind}): its traffic class, PFC and ECN "
        "settings would be ignored; remove it, or set type to the fabric the site has",
    )
    require(
        kind == "infiniband" or fabric.get("infiniband") is None,
        f"{p}.infiniband",
        "<an infiniband section>",
        f"an infiniband section only on an InfiniBand fabric ({p}.type infiniband, here {kind}): its subnet "
        "manager, partition key and service level would be ignored; remove it, or set type to the fabric the site has",
    )
    rate = fabric.get("link_rate_gbps")
    nics = _map(raw.get("gpucluster_node")).get("nics")
    if not _number(rate) or kind in (None, "none"):
        return
    for i, item in enumerate(nics if isinstance(nics, list) else []):
        nic = _map(item)
        own = nic.get("rate_gbps")
        if nic.get("purpose") == "compute" and _number(own):
            require(
                own >= rate,
                f"gpucluster_node.nics[{i}].rate_gbps",
                own,
                f"at least the fabric's link rate ({p}.link_rate_gbps {rate:g} Gb/s): the bandwidth floors and "
                "the cabling assume every compute NIC runs at it; lower link_rate_gbps for a slower fabric",
            )


def check_facility(raw: Mapping[str, object]) -> None:
    """A circuit's voltage, phases and breaker in their physical ranges, before power.py divides by them."""
    p = "gpucluster_facility"
    fac = _map(raw.get(p))
    volts = fac.get("circuit_voltage_v")
    if _number(volts):
        require(
            0 < volts <= VOLTAGE_MAX,
            f"{p}.circuit_voltage_v",
            volts,
            f"a circuit voltage in V above 0 and at most {VOLTAGE_MAX} (low voltage; line-to-line on 3 phases)",
        )
    amps = fac.get("breaker_amps")
    if _number(amps):
        require(amps > 0, f"{p}.breaker_amps", amps, "a breaker rating in A above 0")


def check_node(raw: Mapping[str, object], tier: object, fabric_type: object) -> None:
    """An SXM board of 4 or 8 GPUs; more compute NICs than GPUs names the GPU count the user set."""
    p = "gpucluster_node"
    node = _map(raw.get(p))
    count = node.get("gpus_per_node")
    model = GPUS.get(str(node.get("gpu_model")))
    if not isinstance(count, int) or isinstance(count, bool):
        return
    if model is not None and model.form_factor == "sxm" and model.nvlink_domain_gpus in (None, 8):
        require(
            count in SXM_BOARD_SIZES,
            f"{p}.gpus_per_node",
            count,
            f"the GPUs of one SXM baseboard of {node.get('gpu_model')}: "
            f"{' or '.join(str(n) for n in SXM_BOARD_SIZES)} (HGX boards hold 4 or 8; a node has one board)",
        )
    listed = node.get("nics") or []
    nics = (
        [n for n in listed if isinstance(n, dict) and n.get("purpose") == COMPUTE] if isinstance(listed, list) else []
    )
    one_per_gpu = node.get("one_compute_nic_per_gpu", True) is not False
    if one_per_gpu and tier != "tier1" and fabric_type not in (None, "none") and len(nics) > count:
        require(
            False,
            f"{p}.gpus_per_node",
            count,
            f"the node's GPU count, one compute NIC per GPU: {len(nics)} compute NICs are listed, so "
            f"{len(nics)} GPUs (or list {count} compute NICs)",
        )


def check_network(raw: Mapping[str, object]) -> None:
    """A pool's ``first_offset`` inside its network (the fabric's: inside one rail)."""
    p = "gpucluster_network"
    pools = _map(raw.get(p))
    for name in ("management", "bmc", "storage", "fabric"):
        pool = _map(pools.get(name))
        offset, cidr = pool.get("first_offset"), pool.get("cidr")
        if not isinstance(offset, int) or isinstance(offset, bool) or not isinstance(cidr, str) or "/" not in cidr:
            continue
        prefix = pool.get("rail_prefix") if name == "fabric" else cidr.rsplit("/", 1)[1]
        if not isinstance(prefix, (int, float, str)):
            continue  # int() of it: a TypeError
        try:
            size = 2 ** (32 - int(prefix))
        except (TypeError, ValueError):
            continue
        what = f"one rail (a /{prefix}: rail_prefix)" if name == "fabric" else f"the network (a /{prefix})"
        require(
            1 <= offset <= size - 3,
            f"{p}.{name}.first_offset",
            offset,
            f"an offset of the first host address inside {what}: 1 to {size - 3}, with room for a host "
            "before the broadcast address",
        )


def check_qos(raw: Mapping[str, object]) -> None:
    """No QOS preemption cycle, with the built-in QOS merged by name as slurm/accounting.py merges them."""
    p = "gpucluster_slurm.qos"
    items = _map(raw.get("gpucluster_slurm")).get("qos")
    edges = {name: list(targets) for name, targets in BUILTIN_PREEMPT.items()}
    where: dict[str, str] = {}
    for item in (_map(i) for i in (items if isinstance(items, list) else [])):
        name, preempt = item.get("name"), item.get("preempt")
        if isinstance(name, str) and isinstance(preempt, list):
            # a QOS preempting itself is slurm/accounting.py's own error (it names the QOS): not a cycle here
            edges[name] = [str(t) for t in preempt if str(t) != name]
            where[name] = f"{p}[{name}].preempt"
    for start in sorted(edges):
        path = _cycle(start, edges)
        if path:
            culprit = next((n for n in path if n in where), start)
            require(
                False,
                where.get(culprit, f"{p}"),
                list(edges[culprit]),
                f"a preemption order without a cycle ({' preempts '.join(path)}): Slurm would requeue each "
                "QOS's jobs for the other's, in turn",
            )


def _cycle(start: str, edges: dict[str, list[str]]) -> list[str]:
    """A cycle through ``start`` (names, start repeated at the end), or []."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in edges.get(node, []):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return []


def check_slurm_state(raw: Mapping[str, object]) -> None:
    """The Slurm controllers' shared state mounted read-write (slurmctld writes it every few seconds)."""
    mount = _map(_map(raw.get("gpucluster_slurm")).get("state_save_mount"))
    options = mount.get("options")
    if isinstance(options, str):
        words = [w.strip() for w in options.split(",")]
        require(
            "ro" not in words,
            "gpucluster_slurm.state_save_mount.options",
            options,
            "read-write mount options (rw, the default): slurmctld writes its state there, and a backup "
            "controller takes over from it",
        )


def check_names(raw: Mapping[str, object], groups: Mapping[str, list[str]], scheduler: object) -> None:
    """The cluster's name fit for every object it names; no host named localhost; no compute storage server."""
    name = _map(raw.get("gpucluster_cluster")).get("name")
    if isinstance(name, str) and name:
        require(
            name[-1] not in "-._",
            "gpucluster_cluster.name",
            name,
            "a name ending in a letter or digit (it names build/plan/<name>, Slurm's ClusterName, Kubernetes objects)",
        )
        if scheduler == "kubernetes":
            require(
                bool(DNS_LABEL.fullmatch(name)),
                "gpucluster_cluster.name",
                name,
                "a DNS-1123 label on the Kubernetes path (lowercase letters, digits and '-', at most 63): it "
                "names the cluster's Kubernetes objects",
            )
    for group in sorted(groups, key=lambda g: (g in ("all", "ungrouped"), g)):
        require(
            "localhost" not in (groups.get(group) or []),
            f"groups.{group}",
            "localhost",
            "a host other than localhost: the plan runs on the controller as localhost (connection local), so "
            "a host of that name would be the controller itself; name the host",
        )
    compute = set(groups.get(COMPUTE) or [])
    for group in STORAGE_GROUPS:
        both = sorted(compute & set(groups.get(group) or []))
        require(
            not both,
            f"groups.{group}",
            both,
            f"storage servers that are no compute node (here also in compute): a {group} host serves the file "
            "system to the jobs and must not run them",
        )


def check_credentials(raw: Mapping[str, object]) -> None:
    """Every registry credential NAME one of the secrets the site declares (``gpucluster_secrets``), at plan
    time: the secret store is the site's, so the inventory names what it holds and the plan checks against
    that list instead of a credential nobody provides being found later, by a user's failed pull."""
    p = "gpucluster_secrets"
    declared = raw.get(p)
    if declared is not None:
        if not isinstance(declared, list):
            raise PlanError(p, declared, "a list of secret NAMES ([ngc, registry_ro])")
        seen: set[str] = set()
        for i, name in enumerate(declared):
            if not (isinstance(name, str) and SECRET_NAME.fullmatch(name)):
                raise PlanError(
                    f"{p}[{i}]",
                    name,
                    "a secret's NAME in the site's secret store (a letter or '_', then letters, digits, '_'; at most "
                    "64), never its value",
                )
            require(name not in seen, f"{p}[{i}]", name, "each secret name once")
            seen.add(name)
    registries = _map(raw.get("gpucluster_containers")).get("registries")
    names = sorted(str(n) for n in declared) if isinstance(declared, list) else []
    for i, entry in enumerate(registries if isinstance(registries, list) else []):
        credential = _map(entry).get("credential")
        if not isinstance(credential, str):
            continue  # none: anonymous; another type: compute/containers.py names it
        require(
            declared is not None,
            f"gpucluster_containers.registries[{i}].credential",
            credential,
            f"the name of a secret the site declares, but it declares none: add {p}: [{credential}] to "
            "group_vars/all/ (the NAMES of the secrets its secret store holds, never their values; "
            "docs/inventory.md, gpucluster_secrets)",
        )
        require(
            credential in names,
            f"gpucluster_containers.registries[{i}].credential",
            credential,
            f"one of the secrets the site declares ({p}: {', '.join(names) or 'none'}): add it there once "
            "the secret store holds it, or correct the name",
        )


def check_rules(raw: Mapping[str, object], groups: Mapping[str, list[str]]) -> None:
    """Raise PlanError for the first value of round three's rules (module docstring)."""
    cluster = _map(raw.get("gpucluster_cluster"))
    check_names(raw, groups, cluster.get("scheduler", "slurm"))
    check_paths(raw)
    check_network(raw)
    check_facility(raw)
    check_node(raw, cluster.get("tier"), _map(raw.get("gpucluster_fabric")).get("type"))
    check_fabric(raw)
    check_storage(raw, groups)
    check_qos(raw)
    check_slurm_state(raw)
    check_credentials(raw)
