"""Values an inventory may not hold even when their form is right (issue 30, "dangerous values").

The schema (schema.py) has checked every value's type and form, and that no string holds a control
character and no number is NaN or infinite. This module refuses what has the right form but cannot be
meant, before any other part of the engine reads it, so that each error names the field the user
wrote (a /29 management network blames its ``cidr``, not a ``first_offset`` derived from it):

- names the systems reserve: Kubernetes' initial namespaces and Slurm's ``root`` account as team
  names, the operating system's users as team members, host names YAML reads as something else;
- system folders (``/``, ``/etc``, ``/usr``, ``/var``, ...) as any mount point, export, data,
  staging or state path;
- address pools of a special kind (loopback, multicast, link-local, "this network", reserved) or too
  small for the hosts; NTP servers that are no address or are the cluster's own hosts;
- a node that cannot exist: more GPUs than the model's board holds, two NICs on one netdev, a
  management interface that is none of the node's NICs, a link rate no fabric runs at, an odd switch
  radix, PSUs that cannot power one node after the redundant ones fail (``psu_redundancy``, default
  N+1) even with every GPU at its lowest limit, or a breaker that cannot; between that and the
  planned draw, compute/power.py lowers the GPUs' power limit.

Pure Python (no I/O): ``ipaddress`` for addresses, the GPU catalog for the board, compute/power.py's
circuit formula for the breaker.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterator, Mapping

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import psu_redundant
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS, GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import SCHEMA, field_path

# the secrets' and package sources' checks, importable from here as before (inventory/secrets.py, sources.py)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.secrets import (
    check_secrets,
    secret_shape,
    value_strings,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.sources import (
    PACKAGE_SOURCE_VARIABLES,
    PACKAGE_SOURCES,
    check_package_sources,
    key_fingerprints,
)

#: Kubernetes' four initial namespaces (docs/sources.md [IV1]): a team of that name would get its
#: RoleBinding and quota inside the control plane's own namespace.
K8S_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
#: Slurm's root account, the top of every association tree (docs/sources.md [IV2]).
SLURM_ACCOUNTS = ("root",)
#: The users of a Debian/Ubuntu or RHEL system (base-passwd, setup) and the daemons this collection
#: installs (docs/sources.md [IV3]): a team member of that name would run jobs as a system account.
# fmt: off
SYSTEM_USERS = frozenset(
    {
        "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy",
        "www-data", "backup", "list", "irc", "gnats", "nobody", "nogroup", "adm", "shutdown", "halt",
        "operator", "ftp", "sshd", "messagebus", "polkitd", "dbus", "tss", "chrony", "_chrony", "ntp",
        "_apt", "systemd-network", "systemd-resolve", "systemd-timesync", "systemd-coredump", "syslog",
        "slurm", "munge", "mysql", "prometheus", "node-exporter", "nvidia-persistenced", "rpc", "rpcuser",
        "statd", "_rpc", "nfsnobody", "grafana", "alertmanager", "beegfs", "lustre",
    }
)
# fmt: on
#: Folders of the operating system (FHS 3.0, docs/sources.md [IV4]): none may be a mount point, an
#: export, a data, staging or state path. Nothing under the first group may be either: they hold the
#: system's programs and configuration or are kernel file systems (/proc, /sys, /dev, /run).
SYSTEM_TREES: tuple[str, ...] = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc")
SYSTEM_TREES += ("/run", "/sbin", "/sys", "/usr")
SYSTEM_FOLDERS = ("/", "/root", "/tmp", "/var", "/var/lib", "/var/log", "/var/tmp", *SYSTEM_TREES)
#: abs_path fields that name a file the collection reads, not a folder it mounts, exports or fills: each has
#: its own, narrower rule (conn_auth_file: a file under /etc/beegfs/, storage/beegfs.py ``auth_file``).
PATH_FIELDS_EXEMPT = ("gpucluster_storage.beegfs.conn_auth_file",)
#: IPv4 networks no address pool may touch (IANA special-purpose registry, RFC 6890; docs/sources.md [IV5]).
SPECIAL_NETWORKS = (
    ("0.0.0.0/8", "'this network' (0.0.0.0/8, RFC 1122: unspecified source addresses)"),
    ("127.0.0.0/8", "loopback (127.0.0.0/8)"),
    ("169.254.0.0/16", "link-local (169.254.0.0/16)"),
    ("224.0.0.0/4", "multicast (224.0.0.0/4)"),
    ("240.0.0.0/4", "reserved (240.0.0.0/4, with the broadcast address 255.255.255.255)"),
)
#: Data rates a port runs at (docs/sources.md [IV6]): InfiniBand 4x SDR..XDR (IBTA, as
#: module_utils/ibfabric.LANE_GBPS) and the 2x HDR100/NDR200 ports; Ethernet (IEEE 802.3) for RoCE and TCP.
INFINIBAND_GBPS = (10, 20, 40, 56, 100, 200, 400, 800)
ETHERNET_GBPS = (1, 2.5, 5, 10, 25, 40, 50, 100, 200, 400, 800)
LINK_GBPS = {"infiniband": INFINIBAND_GBPS, "roce": ETHERNET_GBPS, "tcp": ETHERNET_GBPS}
#: GPUs on one SXM baseboard: NVIDIA HGX H100/H200/B200 come with 4 or 8 (docs/sources.md [IV7]).
SXM_BOARD_GPUS = 8
#: NEC 80 % continuous-load rule, as compute/power.py's CONTINUOUS_LOAD_FACTOR.
CONTINUOUS_LOAD = 0.8

#: Host names YAML 1.1 (PyYAML, Ansible) or 1.2 reads as something else than text when unquoted.
# fmt: off
_YAML_WORDS = {
    "y": "true", "yes": "true", "on": "true", "true": "true",
    "n": "false", "no": "false", "off": "false", "false": "false",
    "null": "null (no value)",
}
# fmt: on
_YAML_NUMBER = re.compile(r"[0-9][0-9_]*|0x[0-9a-f_]+|0o[0-7_]+|0b[01_]+|[0-9][0-9_]*e[0-9]+|[0-9]+e-?[0-9]+")


def yaml_reading(name: str) -> str | None:
    """What YAML reads an unquoted host name as, when not as text ('010' -> 'the number 8'); else None."""
    low = name.lower()
    if low in _YAML_WORDS:
        return _YAML_WORDS[low]
    if not _YAML_NUMBER.fullmatch(low):
        return None
    digits = low.replace("_", "")
    try:  # YAML 1.1 (PyYAML, Ansible) reads 010 as octal
        value: float = int(digits, 8) if re.fullmatch(r"0[0-7]+", digits) else int(digits, 0)
    except ValueError:
        try:
            value = float(digits)
        except ValueError:
            return "a number"
    return f"the number {value:g}"


def _ref(schema: Mapping[str, JsonValue]) -> tuple[str, Mapping[str, JsonValue]]:
    name = ""
    while "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[1]
        schema = {**SCHEMA["$defs"][name], **{k: v for k, v in schema.items() if k != "$ref"}}
    return name, schema


def _typed(
    data: object, schema: Mapping[str, JsonValue], path: list[object], kind: str
) -> Iterator[tuple[list[object], object]]:
    """Every value in ``data`` whose schema is ``$defs/<kind>``, with its path."""
    name, schema = _ref(schema)
    if name == kind:
        yield path, data
        return
    items = schema.get("items")
    if isinstance(data, dict):
        properties = schema.get("properties")
        for key, value in data.items():
            sub = properties.get(key) if isinstance(properties, dict) else None
            if isinstance(sub, dict):
                yield from _typed(value, sub, [*path, key], kind)
    elif isinstance(data, list) and isinstance(items, dict):
        for i, value in enumerate(data):
            yield from _typed(value, items, [*path, i], kind)


def _mapping(value: object) -> Mapping[str, object]:
    """``value`` if it is a mapping, else empty (what the schema refused is its error, not this module's)."""
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    """``value`` if it is a list, else empty (as :func:`_mapping`)."""
    return value if isinstance(value, list) else []


def _number(value: object) -> int | float | None:
    """``value`` if it is a number (not true/false), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _check_paths(raw: Mapping[str, object]) -> None:
    for path, value in _typed(raw, SCHEMA, [], "abs_path"):
        field = field_path(path)
        if field in PATH_FIELDS_EXEMPT or not isinstance(value, str):
            continue
        clean = "/" + "/".join(part for part in value.split("/") if part)
        tree = next((t for t in SYSTEM_TREES if clean == t or clean.startswith(t + "/")), None)
        require(
            clean not in SYSTEM_FOLDERS and tree is None,
            field,
            value,
            "a folder other than / and the system's own (/etc, /usr, /var, /var/lib, /var/log, /tmp, /root, /boot,"
            " /bin, /sbin, /lib*, /proc, /sys, /dev, /run) and not under /etc, /usr, /boot, /bin, /sbin, /lib*, /proc,"
            " /sys, /dev or /run: the plan mounts over it, exports it, fills it or makes it world-writable"
            + (f" ({value} is under {tree})" if tree and clean != tree else ""),
        )


def _check_names(raw: Mapping[str, object], groups: Mapping[str, list[str]]) -> None:
    for group in sorted(groups, key=lambda g: (g in ("all", "ungrouped"), g)):
        hosts = groups[group]
        for name in hosts or []:
            reading = yaml_reading(str(name)) if isinstance(name, str) else type(name).__name__
            require(
                reading is None,
                f"groups.{group}",
                name,
                f"a host name YAML reads as text; unquoted, {name!r} is read as {reading}: rename the host (for"
                f' example node-{name}) or, at least, quote it in hosts.yml ("{name}":)',
            )
    teams = raw.get("gpucluster_tenants")
    for i, team in enumerate(teams if isinstance(teams, list) else []):
        if not isinstance(team, dict):
            continue
        team_name = team.get("name")
        require(
            team_name not in K8S_NAMESPACES + SLURM_ACCOUNTS,
            f"gpucluster_tenants[{i}].name",
            team_name,
            f"a team name none of the systems reserves: not a Kubernetes system namespace "
            f"({', '.join(K8S_NAMESPACES)}) nor Slurm's root account",
        )
        for j, user in enumerate(team.get("users") or []):
            require(
                user not in SYSTEM_USERS,
                f"gpucluster_tenants[{i}].users[{j}]",
                user,
                "a person's user name, not a system or service account (root, daemon, nobody, slurm, munge, ...)",
            )


def _network(spec: object) -> ipaddress.IPv4Network | None:
    if not isinstance(spec, dict) or not isinstance(spec.get("cidr"), str):
        return None
    try:
        net = ipaddress.ip_network(spec["cidr"], strict=True)
    except ValueError:
        return None  # plan/addresses.py names the field and says what a CIDR is
    return net if isinstance(net, ipaddress.IPv4Network) else None


def _check_pools(raw: Mapping[str, object], counts: dict[str, int]) -> None:
    p = "gpucluster_network"
    pools = _mapping(raw.get(p))
    for name in ("management", "bmc", "storage", "fabric"):
        net = _network(pools.get(name))
        if net is None:
            continue
        field = f"{p}.{name}.cidr"
        for special, what in SPECIAL_NETWORKS:
            require(
                not net.overlaps(ipaddress.ip_network(special)),
                field,
                str(net),
                f"a private or routable unicast network (RFC 1918 such as 10.0.0.0/8), not {what}",
            )
        offset = _mapping(pools[name]).get("first_offset", 10)
        hosts = counts.get(name)
        if hosts is None or not isinstance(offset, int) or isinstance(offset, bool) or not 1 <= offset <= 254:
            continue  # the fabric pool is cut into rails (plan/addresses.py); an odd first_offset is its own error
        # host addresses first_offset .. first_offset + hosts - 1; the last address is the broadcast
        need = offset + hosts + 1
        prefix = 32 - max(2, math.ceil(math.log2(need)))
        require(
            net.num_addresses >= need,
            field,
            str(net),
            f"a network with room for {hosts} hosts from first_offset {offset}: a /{prefix} or larger (a "
            f"/{net.prefixlen} has {net.num_addresses} addresses in all)",
        )


def _planned(raw: Mapping[str, object], count: int) -> set[str]:
    """The management addresses the plan gives the hosts (plan/addresses.py: first_offset + the host's index)."""
    spec = _mapping(raw.get("gpucluster_network")).get("management")
    net = _network(spec)
    if net is None:
        return set()
    offset = _mapping(spec).get("first_offset", 10)
    if not isinstance(offset, int):
        return set()
    return {str(net[offset + i]) for i in range(count) if offset + i < net.num_addresses - 1}


def _check_ntp(raw: Mapping[str, object], hosts: list[str]) -> None:
    network = _mapping(raw.get("gpucluster_network"))
    servers = network.get("ntp_servers") or []
    cluster = _mapping(raw.get("gpucluster_cluster"))
    domain = str(cluster.get("domain") or "cluster.internal").lower()
    names = {h for host in hosts for h in (host, f"{host}.{domain}")}
    addresses = _planned(raw, len(hosts))
    for i, server in enumerate(servers if isinstance(servers, list) else []):
        if not isinstance(server, str):
            continue
        field = f"gpucluster_network.ntp_servers[{i}]"
        allowed = (
            "an NTP server outside the cluster: an IPv4 address (four numbers 0-255), an IPv6 address or a host name"
        )
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
        if ":" in server or re.fullmatch(r"[0-9.]+", server):
            try:
                address = ipaddress.ip_address(server)
            except ValueError:
                require(False, field, server, allowed)
        if address is not None:
            require(
                not (address.is_loopback or address.is_unspecified or address.is_multicast or address.is_reserved),
                field,
                server,
                f"{allowed}; not a loopback, unspecified, multicast or reserved address",
            )
            require(
                str(address) not in addresses,
                field,
                server,
                f"{allowed}; {server} is a cluster host's management address (the head serves time to the"
                " cluster and follows these servers)",
            )
        require(
            server.lower().rstrip(".") not in names,
            field,
            server,
            f"{allowed}; {server} is a host of this cluster (the head serves time to the cluster and follows these"
            " servers)",
        )


def _check_node(raw: Mapping[str, object]) -> None:
    p = "gpucluster_node"
    node = _mapping(raw.get(p))
    model = GPUS.get(str(node.get("gpu_model")))
    count = node.get("gpus_per_node")
    if model is not None and model.form_factor == "sxm" and isinstance(count, int):
        require(
            count <= SXM_BOARD_GPUS,
            f"{p}.gpus_per_node",
            count,
            f"at most {SXM_BOARD_GPUS} GPUs: one {model.name} baseboard (HGX) holds 4 or 8",
        )
    nics = [n for n in _list(node.get("nics")) if isinstance(n, dict)]
    netdevs: dict[str, int] = {}
    for i, nic in enumerate(_list(node.get("nics"))):
        if not isinstance(nic, dict):
            continue
        netdev = str(nic.get("netdev", nic.get("name")))
        require(
            netdev not in netdevs,
            f"{p}.nics[{i}].netdev",
            netdev,
            f"a netdev no other NIC of the node has ({p}.nics[{netdevs.get(netdev)}] is {netdev})",
        )
        netdevs[netdev] = i
        rate = nic.get("rate_gbps")
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            rates = sorted(set(INFINIBAND_GBPS + ETHERNET_GBPS))
            require(
                rate in rates,
                f"{p}.nics[{i}].rate_gbps",
                rate,
                f"a port rate in Gb/s of InfiniBand or Ethernet: one of {', '.join(f'{r:g}' for r in rates)}",
            )
    management = _mapping(raw.get("gpucluster_network")).get("management")
    interface = management.get("interface") if isinstance(management, dict) else None
    if interface is not None and nics:
        require(
            interface in netdevs,
            "gpucluster_network.management.interface",
            interface,
            f"the netdev of one of the node's NICs ({', '.join(netdevs)}), the management one",
        )
    psus, rating = node.get("psu_count"), node.get("psu_rating_w")
    need_w = _node_min_w(node, model)
    if isinstance(psus, int) and isinstance(rating, (int, float)) and need_w:
        # the PSUs left after the redundant ones fail (psu_redundancy, compute/power.py) must carry the node
        level_given = node.get("psu_redundancy")
        redundant, level = psu_redundant(
            psus, str(level_given) if level_given is not None else None, f"{p}.psu_redundancy"
        )
        alive = psus - redundant
        # blame the count when each PSU is a real server PSU (>= 1 kW) and there are too few of them
        blame = ("psu_count", psus) if rating >= 1000 else ("psu_rating_w", rating)
        require(
            alive * rating >= need_w,
            f"{p}.{blame[0]}",
            blame[1],
            f"PSUs that power one node after {redundant} of them fail (psu_redundancy {level}): (psu_count -"
            f" {redundant}) x psu_rating_w >= {need_w:g} W (base_power_w + {count} GPUs at their lowest power"
            f" limit); ({psus} - {redundant}) x {rating:g} W is {alive * rating:g} W: at least"
            f" {math.ceil(need_w / rating) + redundant} PSUs of {rating:g} W, or {psus} of >="
            f" {math.ceil(need_w / max(1, alive))} W",
        )


def _node_min_w(node: Mapping[str, object], model: GpuModel | None) -> float:
    """One node's draw with every GPU at its lowest power limit (0 when unknown)."""
    base, count = node.get("base_power_w"), node.get("gpus_per_node")
    if not isinstance(base, (int, float)) or not isinstance(count, int):
        return 0.0
    measured = _number(_mapping(node.get("gpu_limits")).get("power_min_w"))
    low = measured or (model and (model.power_min_w or model.power_default_w)) or 0
    return float(base + count * low)


def _check_facility(raw: Mapping[str, object]) -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.rules import check_facility

    check_facility(raw)  # the voltage and the breaker above zero, before the formula below divides by them
    p = "gpucluster_facility"
    fac = _mapping(raw.get(p))
    amps, volts, phases = (
        _number(fac.get("breaker_amps")),
        _number(fac.get("circuit_voltage_v")),
        fac.get("circuit_phases"),
    )
    node = _mapping(raw.get("gpucluster_node"))
    need_w = _node_min_w(node, GPUS.get(str(node.get("gpu_model"))))
    psu_count = node.get("psu_count")
    psus = psu_count if isinstance(psu_count, int) else 1
    if amps is None or volts is None or phases not in (1, 3) or not need_w:
        return
    circuit_w = volts * amps * (math.sqrt(3) if phases == 3 else 1.0) * CONTINUOUS_LOAD
    share_w = need_w / max(1, psus)
    least = math.ceil(share_w / (volts * (math.sqrt(3) if phases == 3 else 1.0) * CONTINUOUS_LOAD))
    require(
        circuit_w >= share_w,
        f"{p}.breaker_amps",
        amps,
        f"a breaker whose circuit powers one PSU's share of a node ({share_w:.0f} W: one of {psus} PSUs of a"
        f" {need_w:g} W node): >= {least} A at {volts:g} V, {phases} phase, 80% continuous load",
    )


def _check_fabric(raw: Mapping[str, object]) -> None:
    p = "gpucluster_fabric"
    fab = _mapping(raw.get(p))
    rates = LINK_GBPS.get(str(fab.get("type")))
    rate = fab.get("link_rate_gbps")
    if rates and isinstance(rate, (int, float)) and not isinstance(rate, bool):
        require(
            rate in rates,
            f"{p}.link_rate_gbps",
            rate,
            f"a port rate of the fabric type {fab.get('type')}, in Gb/s: one of {', '.join(f'{r:g}' for r in rates)}",
        )
    radix = fab.get("switch_radix")
    if isinstance(radix, int) and not isinstance(radix, bool):
        require(
            radix % 2 == 0,
            f"{p}.switch_radix",
            radix,
            "an even number of switch ports (a fat-tree leaf gives half to hosts, half to spines; switches have"
            " 32, 36, 40, 48, 64 ... ports)",
        )


def check_values(
    raw: Mapping[str, object], groups: Mapping[str, list[str]], *, hosts: list[str], storage_hosts: int
) -> None:
    """Raise PlanError for the first value of the inventory that has its form but cannot be meant.

    ``hosts``: every host of a known group (the hosts the plan addresses, in any order);
    ``storage_hosts``: how many get a storage address (storage and compute hosts)."""
    _check_names(raw, groups)
    _check_paths(raw)
    _check_pools(raw, {"management": len(hosts), "bmc": len(hosts), "storage": storage_hosts})
    _check_ntp(raw, hosts)
    _check_node(raw)
    _check_facility(raw)
    _check_fabric(raw)


__all__ = [
    "K8S_NAMESPACES",
    "PACKAGE_SOURCES",
    "PACKAGE_SOURCE_VARIABLES",
    "SYSTEM_FOLDERS",
    "SYSTEM_TREES",
    "SYSTEM_USERS",
    "check_package_sources",
    "check_secrets",
    "check_values",
    "key_fingerprints",
    "secret_shape",
    "value_strings",
    "yaml_reading",
]
