"""BeeGFS (a tier3 alternative to Lustre): management, metadata, storage and client configuration.

docs/tiers.md, tier3: "parallel FS (Lustre/BeeGFS)". The keys are those of the configuration files
BeeGFS 7.4 ships (docs/sources.md [B1]: beegfs-mgmtd.conf, beegfs-meta.conf, beegfs-storage.conf,
beegfs-client.conf); a key the plan does not set keeps the shipped default, so the files hold only
what the cluster decides: the management host, the directories, the interfaces, RDMA, the shared
secret's path and the worker counts.

- ``sysMgmtdHost``: the management host's address on the storage network (the management network
  without a storage network), as the NFS and NVMe-oF plans choose theirs.
- ``connAuthFile``: BeeGFS 7.3+ refuses to start without it unless ``connDisableAuthentication``
  [B1]; the secret never enters the plan (the storage role writes it, like the munge key).
- ``connInterfacesFile`` (servers and clients) and ``connRDMAInterfacesFile`` (clients, the RDMA
  NICs for outbound RDMA) [B1]: the clients' storage NICs, else their first compute NIC, as for
  LNet; the servers' own interfaces (``gpucluster_storage.server_interfaces``), never the clients'.
- ``tuneNumWorkers``: the shipped defaults (mgmtd 4, meta 0 = automatic, storage 12 [B1]) unless
  the inventory sets them.
- Stripe patterns: ``beegfs-ctl --setpattern --chunksize=<bytes> --numtargets=<n> <dir>`` [B2].
  BeeGFS has one pattern per directory, Lustre a progressive layout per directory; the pattern is
  the Lustre layout's last component (the large-file part that carries most of the bytes) from
  storage/lustre.py's default_layouts for the same target count: one decision, not two. A chunk
  size must be a power of two of at least 64 KiB [B2].
- beegfs-mounts.conf: ``<mount point> <client config>`` per line, read by beegfs-client.service [B3].

The plan holds data; the files are rendered on the way to the hosts: the services' conf files by the
filter gpucluster.tiers.beegfs_conf (:func:`service_conf_text`), beegfs-mounts.conf and the interface
files (a name a line) by the roles' templates from ``mount_point``, ``files`` and the interface lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils.lustre_yaml import EOF_END
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import lustre
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.fs_model import (
    Beegfs,
    BeegfsPattern,
    BeegfsSettings,
    ConfValue,
    LayoutComponent,
    StripePattern,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.nfs import CLIENT_MOUNT_BEFORE

CONF_DIR = "/etc/beegfs"
#: The files the roles write (paths as the BeeGFS packages install them [B1][B3]).
FILES = {
    "mgmtd": f"{CONF_DIR}/beegfs-mgmtd.conf",
    "meta": f"{CONF_DIR}/beegfs-meta.conf",
    "storage": f"{CONF_DIR}/beegfs-storage.conf",
    "client": f"{CONF_DIR}/beegfs-client.conf",
    "mounts": f"{CONF_DIR}/beegfs-mounts.conf",
    "server_interfaces": f"{CONF_DIR}/server-interfaces",
    "client_interfaces": f"{CONF_DIR}/client-interfaces",
    "rdma_interfaces": f"{CONF_DIR}/client-rdma-interfaces",
}
DEFAULT_AUTH_FILE = f"{CONF_DIR}/conn.auth"
#: The shipped defaults of tuneNumWorkers [B1].
DEFAULT_WORKERS = {"mgmtd": 4, "meta": 0, "storage": 12}
#: STRIPEPATTERN_MIN_CHUNKSIZE (common/storage/striping/StripePattern.h) [B2].
MIN_CHUNK = 64 * 1024
#: The shipped service ports (connMgmtdPortTCP/UDP 8008, connMetaPort 8005, connStoragePort 8003,
#: connClientPort 8004) [B1]: the plan keeps them (docs list them for the site's firewalls).
PORTS = {"mgmtd": 8008, "meta": 8005, "storage": 8003, "client": 8004}


def _abs(value: object, field: str) -> str:
    if not (
        isinstance(value, str) and value.startswith("/") and value != "/" and " " not in value and "," not in value
    ):
        raise PlanError(field, value, "an absolute path other than /, without spaces or commas")
    return value.rstrip("/")


#: The one folder conn_auth_file may name a file in: BeeGFS's own configuration folder, where its
#: documentation puts the secret (connAuthFile = /etc/beegfs/connauthfile,
#: https://doc.beegfs.io/latest/advanced_topics/authentication.html) and where nothing but BeeGFS's files lie.
AUTH_DIR = CONF_DIR + "/"


def auth_file(value: object, field: str) -> str:
    """``conn_auth_file``: a dedicated file under /etc/beegfs/ (issue 37).

    The storage role makes the file on the management host when it is missing and copies WHATEVER it holds
    there to every BeeGFS server and client (tenant nodes), overwriting the file of that name: a path like
    /etc/shadow or /root/.ssh/id_ed25519 would spread the management host's secret to every node (and
    replace the nodes' own). So: an absolute, normalised path (no '.', '..' or '//') of a file below
    /etc/beegfs/ (BeeGFS's own folder, root's), not one of the configuration files the roles write nor any
    other ``*.conf``, without spaces or commas (a value of beegfs-*.conf's key)."""
    parts = value.split("/") if isinstance(value, str) else []
    name = parts[-1] if parts else ""
    require(
        isinstance(value, str)
        and value.startswith(AUTH_DIR)
        and all(p not in ("", ".", "..") for p in parts[1:])
        and " " not in value
        and "," not in value
        and value not in FILES.values()
        and not name.endswith(".conf")
        and bool(name),
        field,
        value,
        f"a file of its own under {AUTH_DIR} (for example {DEFAULT_AUTH_FILE}), normalised (no '.', '..' or '//'),"
        " not a BeeGFS configuration file (*.conf) and without spaces or commas: the storage role copies the"
        " management host's file of that path to every BeeGFS server and client",
    )
    return str(value)


def stripe_pattern(components: Sequence[LayoutComponent], target_count: int, field: str) -> StripePattern:
    """The BeeGFS pattern of a Lustre layout: its last component's stripe size and count.

    A count of -1 (all OSTs) is all targets; a Data-on-MDT-only layout has no last raid0 component
    and is refused."""
    last = components[-1]
    require(
        last.get("layout", "raid0") == "raid0" and last.get("end") == EOF_END,
        field,
        last,
        "a layout whose last component is raid0 to the end of file",
    )
    count = target_count if last["stripe_count"] == -1 else int(last["stripe_count"])
    size = int(last["stripe_size"])
    if size < MIN_CHUNK or size & (size - 1):
        raise PlanError(f"{field}.stripe_size", size, "a power of two of at least 64 KiB (BeeGFS chunk size)")
    return {"chunksize": size, "numtargets": count}


def _human(size: int) -> str:
    """A chunk size as beegfs-ctl reads it (``16m``, ``512k``)."""
    mib = 1024 * 1024
    return f"{size // mib}m" if size % mib == 0 else f"{size // 1024}k"


def stripe_patterns(paths: Mapping[str, str], target_count: int) -> dict[str, BeegfsPattern]:
    """Per directory role: {path, chunksize, numtargets, command}, from lustre.lustre_layouts for ``target_count``."""
    layouts = lustre.lustre_layouts(ost_count=target_count, paths=paths)
    out: dict[str, BeegfsPattern] = {}
    for role, layout in layouts.items():
        pattern = stripe_pattern(layout["components"], target_count, f"gpucluster_storage.paths.{role}")
        argv = [
            "beegfs-ctl",
            "--setpattern",
            f"--chunksize={_human(pattern['chunksize'])}",
            f"--numtargets={pattern['numtargets']}",
            layout["path"],
        ]
        out[role] = {
            "path": layout["path"],
            "chunksize": pattern["chunksize"],
            "numtargets": pattern["numtargets"],
            "argv": argv,
            "command": " ".join(argv),
        }
    return out


def conf_text(settings: Mapping[str, ConfValue], what: str) -> str:
    """A BeeGFS ``key = value`` file; booleans as BeeGFS writes them (true/false)."""
    lines = [f"# Planned by gpucluster.tiers: {what}. Keys not set here keep the shipped defaults."]
    for key, value in settings.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


#: Each service's configuration file: what its header names, and its keys' order (the order beegfs_plan
#: sets them); a key not named follows, by name. The plan stores the settings (``storage.beegfs.settings``),
#: the files are rendered on the way to the hosts (filter gpucluster.tiers.beegfs_conf).
SERVICE_CONF: dict[str, tuple[str, tuple[str, ...]]] = {
    "mgmtd": (
        "BeeGFS management service",
        ("storeMgmtdDirectory", "storeAllowFirstRunInit", "connAuthFile", "connInterfacesFile",
         "connMgmtdPortTCP", "connMgmtdPortUDP", "tuneNumWorkers"),
    ),
    "meta": (
        "BeeGFS metadata service",
        ("sysMgmtdHost", "connAuthFile", "connInterfacesFile", "connMgmtdPortTCP", "connMgmtdPortUDP",
         "connUseRDMA", "storeMetaDirectory", "storeAllowFirstRunInit", "tuneNumWorkers"),
    ),
    "storage": (
        "BeeGFS storage service",
        ("sysMgmtdHost", "connAuthFile", "connInterfacesFile", "connMgmtdPortTCP", "connMgmtdPortUDP",
         "connUseRDMA", "storeStorageDirectory", "storeAllowFirstRunInit", "tuneNumWorkers"),
    ),
    "client": (
        "BeeGFS client",
        ("sysMgmtdHost", "connAuthFile", "connMgmtdPort", "connInterfacesFile", "connRDMAInterfacesFile",
         "connUseRDMA"),
    ),
}  # fmt: skip


def service_conf_text(settings: Mapping[str, ConfValue], service: str) -> str:
    """The configuration file of a BeeGFS ``service`` (mgmtd, meta, storage, client) from its settings
    (the plan's ``storage.beegfs.settings.<service>``), keys in :data:`SERVICE_CONF`'s order whatever
    the mapping's order (a plan read back from plan.json, keys sorted, renders the same bytes)."""
    what, order = SERVICE_CONF[check_choice(service, "service", sorted(SERVICE_CONF))]
    rank = {key: i for i, key in enumerate(order)}
    ordered = {k: settings[k] for k in sorted(settings, key=lambda k: (rank.get(k, len(rank)), k))}
    return conf_text(ordered, what)


def _workers(bg: Mapping[str, object], field: str) -> dict[str, int]:
    given = bg.get("tune_num_workers") or {}
    if not isinstance(given, dict):
        raise PlanError(f"{field}.tune_num_workers", given, "a mapping {mgmtd, meta, storage}")
    out = {}
    for service, default in DEFAULT_WORKERS.items():
        # meta: 0 lets beegfs-meta pick from the CPU count [B1]
        out[service] = int(check_range(
            given.get(service, default), f"{field}.tune_num_workers.{service}", 0 if service == "meta" else 1, 1024,
            integer=True,
        ))  # fmt: skip
    unknown = sorted(set(given) - set(DEFAULT_WORKERS))
    require(not unknown, f"{field}.tune_num_workers", unknown, "keys mgmtd, meta, storage")
    return out


def beegfs_plan(
    *,
    beegfs: Mapping[str, object],
    mgmtd: list[str],
    meta: list[str],
    storage: list[str],
    addresses: Mapping[str, Any],
    lab: Mapping[str, object],
    paths: Mapping[str, str],
    client_interfaces: list[str],
    rdma: bool,
    server_interfaces: Sequence[str] = (),
    field: str = "gpucluster_storage.beegfs",
) -> Beegfs:
    """Servers' and clients' configuration, the mount, and the stripe patterns per directory (``addresses``:
    plan/addresses.py's, typed by the plan package)."""
    require(len(mgmtd) == 1, "groups.beegfs_mgmtd", mgmtd, "exactly one host in group beegfs_mgmtd")
    require(bool(meta), "groups.beegfs_meta", meta, "at least one host in group beegfs_meta")
    require(bool(storage), "groups.beegfs_storage", storage, "at least one host in group beegfs_storage")
    pools = addresses["pools"]
    default_net = "storage" if "storage" in pools else "management"  # the lab too: it has the network
    network = check_choice(
        beegfs.get("network") or default_net, f"{field}.network", [n for n in ("storage", "management") if n in pools]
    )
    mgmtd_host = addresses["hosts"][mgmtd[0]].get(network)
    require(bool(mgmtd_host), f"{field}.network", network, f"a network on which {mgmtd[0]} has an address")
    mount_point = _abs(beegfs.get("mount_point", "/mnt/beegfs"), f"{field}.mount_point")
    mgmtd_dir = _abs(beegfs.get("mgmtd_directory", "/data/beegfs/mgmtd"), f"{field}.mgmtd_directory")
    meta_dir = _abs(beegfs.get("meta_directory", "/data/beegfs/meta"), f"{field}.meta_directory")
    dirs = beegfs.get("storage_directories")
    if not (isinstance(dirs, list) and dirs and len(set(dirs)) == len(dirs)):
        raise PlanError(
            f"{field}.storage_directories", dirs, "a list of storage target directories on each storage host, each once"
        )
    targets = [_abs(d, f"{field}.storage_directories[{i}]") for i, d in enumerate(dirs)]
    auth = auth_file(beegfs.get("conn_auth_file", DEFAULT_AUTH_FILE), f"{field}.conn_auth_file")
    # the servers' own interfaces (never the clients' names): beegfs.server_interfaces, else the storage servers'
    server_ifaces = beegfs.get("server_interfaces") or list(server_interfaces)
    if not (isinstance(server_ifaces, list) and server_ifaces and all(isinstance(i, str) and i for i in server_ifaces)):
        raise PlanError(
            f"{field}.server_interfaces" if beegfs.get("server_interfaces") else "gpucluster_storage.server_interfaces",
            server_ifaces,
            "a list of the BeeGFS servers' own storage interface names",
        )
    use_rdma = beegfs.get("rdma", rdma)
    if not isinstance(use_rdma, bool):
        raise PlanError(f"{field}.rdma", use_rdma, "true or false")
    settings = _settings(
        mgmtd_host, auth, mgmtd_dir, meta_dir, targets, use_rdma=use_rdma, workers=_workers(beegfs, field)
    )
    target_count = len(storage) * len(targets)
    return {
        "mgmtd": mgmtd[0],
        "meta": list(meta),
        "storage": list(storage),
        "network": network,
        "mgmtd_address": mgmtd_host,
        "mount_point": mount_point,
        # beegfs-client.service mounts beegfs-mounts.conf: its drop-in orders it before these, as the
        # Lustre and NFS mount units are (ordering only, nfs.CLIENT_MOUNT_BEFORE)
        "client_before": list(CLIENT_MOUNT_BEFORE),
        "rdma": use_rdma,
        "target_count": target_count,
        "storage_directories": targets,
        "server_directories": {"mgmtd": [mgmtd_dir], "meta": [meta_dir], "storage": targets},
        "conn_auth_file": auth,
        "files": dict(FILES),
        "ports": dict(PORTS),
        # the interface files, a name a line (connInterfacesFile; the clients' connRDMAInterfacesFile lists the
        # client interfaces again when rdma) and beegfs-mounts.conf (mount_point, files.client): the templates
        "server_interfaces": list(server_ifaces),
        "client_interfaces": list(client_interfaces),
        "settings": settings,
        "patterns": stripe_patterns(paths, target_count),
    }


def _settings(
    mgmtd_host: str,
    auth: str,
    mgmtd_dir: str,
    meta_dir: str,
    targets: list[str],
    *,
    use_rdma: bool,
    workers: Mapping[str, int],
) -> BeegfsSettings:
    """Each service's configuration keys (plan.storage.beegfs.settings; service_conf_text renders them)."""
    common: dict[str, ConfValue] = {
        "connAuthFile": auth,
        "connInterfacesFile": FILES["server_interfaces"],
        "connMgmtdPortTCP": PORTS["mgmtd"],
        "connMgmtdPortUDP": PORTS["mgmtd"],
    }
    mgmtd_conf: dict[str, ConfValue] = {
        "storeMgmtdDirectory": mgmtd_dir,
        "storeAllowFirstRunInit": True,
        **common,
        "tuneNumWorkers": workers["mgmtd"],
    }
    server: dict[str, ConfValue] = {"sysMgmtdHost": mgmtd_host, **common, "connUseRDMA": use_rdma}
    meta_conf = {**server, "storeMetaDirectory": meta_dir, "storeAllowFirstRunInit": True}
    meta_conf["tuneNumWorkers"] = workers["meta"]
    storage_conf = {**server, "storeStorageDirectory": ",".join(targets), "storeAllowFirstRunInit": True}
    storage_conf["tuneNumWorkers"] = workers["storage"]
    client_conf: dict[str, ConfValue] = {
        "sysMgmtdHost": mgmtd_host,
        "connAuthFile": auth,
        "connMgmtdPort": PORTS["mgmtd"],
        "connInterfacesFile": FILES["client_interfaces"],
        "connRDMAInterfacesFile": FILES["rdma_interfaces"] if use_rdma else "",
        "connUseRDMA": use_rdma,
    }
    return {"mgmtd": mgmtd_conf, "meta": meta_conf, "storage": storage_conf, "client": client_conf}
