"""The typed shapes of the shared storage types' sections of plan.storage: ``nfs``, ``nvmeof``, ``beegfs`` and
``lustre`` (storage/model.py's StorageSection holds the one a site has)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import (
    Directory,
    LocalNvme,
    MdArray,
    StorageCeilings,
    TargetProtection,
)

# --- NFS (storage/nfs.py) ---


class NfsLinks(TypedDict):
    proto: str
    port: int
    rdma_offered: bool
    rdma_note: str
    ceilings: NotRequired[StorageCeilings]


class NfsExport(TypedDict):
    path: str
    mount_point: str
    export_id: int
    pseudo: str
    access: str
    access_type: str
    squash: str
    ganesha_squash: str
    clients: str
    options: str
    exports_line: str


class NfsMount(TypedDict):
    what: str
    where: str
    type: str
    options: str
    unit_name: str
    unit_path: str


class Nfs(TypedDict):
    server: str
    server_impl: str
    service: str
    network: str
    server_address: str
    clients: str
    exports: list[NfsExport]
    server_directories: list[Directory]
    client_mounts: list[NfsMount]
    links: NotRequired[NfsLinks]


# --- NVMe-oF (storage/nvmeof.py) ---


class NvmetNamespaceDevice(TypedDict):
    path: str
    uuid: str


class NvmetNamespace(TypedDict):
    nsid: int
    enable: int
    device: NvmetNamespaceDevice


class NvmetAttr(TypedDict):
    allow_any_host: str


class NvmetSubsystem(TypedDict):
    nqn: str
    attr: NvmetAttr
    namespaces: list[NvmetNamespace]
    allowed_hosts: list[str]


class NvmetAddr(TypedDict):
    trtype: str
    adrfam: str
    traddr: str
    trsvcid: str
    treq: str


class NvmetPort(TypedDict):
    portid: int
    addr: NvmetAddr
    subsystems: list[str]
    referrals: list[str]


class NvmetHost(TypedDict):
    nqn: str


class NvmetConfig(TypedDict):
    """A target's nvmetcli JSON (/etc/nvmet/config.json)."""

    hosts: list[NvmetHost]
    subsystems: list[NvmetSubsystem]
    ports: list[NvmetPort]


class NvmeofTarget(TypedDict):
    address: str
    config: NvmetConfig
    devices: list[str]


class NvmeofNamespace(TypedDict):
    target: str
    subsystem: str
    nsid: int
    device: str
    by_id: str


class NvmeofClient(TypedDict):
    host_nqn: str
    host_id: str
    namespaces: list[NvmeofNamespace]
    scratch: LocalNvme


class Nvmeof(TypedDict):
    transport: str
    trsvcid: int
    network: str
    targets: dict[str, NvmeofTarget]
    target_config_path: str
    target_modules: list[str]
    discovery_conf_path: str
    discovery_addresses: list[str]
    nr_io_queues: int
    ctrl_loss_tmo: int
    clients: dict[str, NvmeofClient]
    namespaces_per_client: int
    unexported: int


# --- BeeGFS (storage/beegfs.py) ---

#: one key of a BeeGFS service's configuration file
ConfValue = str | int | bool


class StripePattern(TypedDict):
    chunksize: int
    numtargets: int


class BeegfsPattern(StripePattern):
    path: str
    argv: list[str]
    command: str


class BeegfsSettings(TypedDict):
    mgmtd: dict[str, ConfValue]
    meta: dict[str, ConfValue]
    storage: dict[str, ConfValue]
    client: dict[str, ConfValue]


class Beegfs(TypedDict):
    mgmtd: str
    meta: list[str]
    storage: list[str]
    network: str
    mgmtd_address: str
    mount_point: str
    client_before: list[str]
    rdma: bool
    target_count: int
    storage_directories: list[str]
    server_directories: dict[str, list[str]]
    conn_auth_file: str
    files: dict[str, str]
    ports: dict[str, int]
    server_interfaces: list[str]
    client_interfaces: list[str]
    settings: BeegfsSettings
    patterns: dict[str, BeegfsPattern]


# --- Lustre (storage/lustre.py, lustre_targets.py, lustre_plan.py) ---


class LayoutComponent(TypedDict):
    start: int
    end: int
    stripe_count: int
    stripe_size: int
    layout: str


class Layout(TypedDict):
    path: str
    components: list[LayoutComponent]
    setstripe_args: str


class LnetConfig(TypedDict):
    net: str
    interfaces: list[str]
    modprobe: str


class ServerNid(TypedDict):
    interface: str
    address: str
    nid: str


class LustreMount(TypedDict):
    what: str
    where: str
    type: str
    options: str
    unit_name: str
    unit_path: str
    before: list[str]
    tunables_unit: str
    set_param: list[str]


class LustreTarget(TypedDict):
    name: str
    kind: str
    index: int
    device: str
    members: list[str]
    array: MdArray | None
    protection: TargetProtection
    mount_point: str
    mount_options: str
    mkfs_argv: list[str]
    fstab: str


class Lustre(TypedDict):
    fsname: str
    mount_point: str
    mgs: str
    mds: list[str]
    oss: list[str]
    ost_count: int
    osts_per_oss: int
    layouts: dict[str, Layout]
    client_tunables: dict[str, int]
    set_param_commands: list[str]
    lnet: LnetConfig
    server_lnet: LnetConfig
    mgs_nid: str
    server_nids: dict[str, list[ServerNid]]
    client_mount: LustreMount
    targets: dict[str, list[LustreTarget]]
    protection_warnings: list[str]
    allow_format: bool
    allow_format_devices: dict[str, list[str]]
