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
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import psu_redundant
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import SCHEMA, field_path

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
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin")
SYSTEM_TREES += ("/sys", "/usr")
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


def _ref(schema: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name = ""
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        schema = {**SCHEMA["$defs"][name], **{k: v for k, v in schema.items() if k != "$ref"}}
    return name, schema


def _typed(data: Any, schema: dict[str, Any], path: list[Any], kind: str) -> Iterator[tuple[list[Any], Any]]:
    """Every value in ``data`` whose schema is ``$defs/<kind>``, with its path."""
    name, schema = _ref(schema)
    if name == kind:
        yield path, data
        return
    if isinstance(data, dict):
        for key, value in data.items():
            sub = (schema.get("properties") or {}).get(key)
            if isinstance(sub, dict):
                yield from _typed(value, sub, [*path, key], kind)
    elif isinstance(data, list) and isinstance(schema.get("items"), dict):
        for i, value in enumerate(data):
            yield from _typed(value, schema["items"], [*path, i], kind)


def _check_paths(raw: dict[str, Any]) -> None:
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


def _check_names(raw: dict[str, Any], groups: dict[str, list[str]]) -> None:
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
        name = team.get("name")
        require(
            name not in K8S_NAMESPACES + SLURM_ACCOUNTS,
            f"gpucluster_tenants[{i}].name",
            name,
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


def _network(spec: Any) -> ipaddress.IPv4Network | None:
    if not isinstance(spec, dict) or not isinstance(spec.get("cidr"), str):
        return None
    try:
        net = ipaddress.ip_network(spec["cidr"], strict=True)
    except ValueError:
        return None  # plan/addresses.py names the field and says what a CIDR is
    return net if isinstance(net, ipaddress.IPv4Network) else None


def _check_pools(raw: dict[str, Any], counts: dict[str, int]) -> None:
    p = "gpucluster_network"
    pools = raw.get(p) if isinstance(raw.get(p), dict) else {}
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
        offset = pools[name].get("first_offset", 10)
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


def _planned(raw: dict[str, Any], count: int) -> set[str]:
    """The management addresses the plan gives the hosts (plan/addresses.py: first_offset + the host's index)."""
    spec = (raw.get("gpucluster_network") or {}).get("management")
    net = _network(spec)
    if net is None:
        return set()
    offset = spec.get("first_offset", 10)
    if not isinstance(offset, int):
        return set()
    return {str(net[offset + i]) for i in range(count) if offset + i < net.num_addresses - 1}


def _check_ntp(raw: dict[str, Any], hosts: list[str]) -> None:
    network = raw.get("gpucluster_network") if isinstance(raw.get("gpucluster_network"), dict) else {}
    servers = network.get("ntp_servers") or []
    cluster = raw.get("gpucluster_cluster") if isinstance(raw.get("gpucluster_cluster"), dict) else {}
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


def _check_node(raw: dict[str, Any]) -> None:
    p = "gpucluster_node"
    node = raw.get(p) if isinstance(raw.get(p), dict) else {}
    model = GPUS.get(str(node.get("gpu_model")))
    count = node.get("gpus_per_node")
    if model is not None and model.form_factor == "sxm" and isinstance(count, int):
        require(
            count <= SXM_BOARD_GPUS,
            f"{p}.gpus_per_node",
            count,
            f"at most {SXM_BOARD_GPUS} GPUs: one {model.name} baseboard (HGX) holds 4 or 8",
        )
    nics = [n for n in node.get("nics") or [] if isinstance(n, dict)]
    netdevs: dict[str, int] = {}
    for i, nic in enumerate(node.get("nics") or []):
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
    management = (raw.get("gpucluster_network") or {}).get("management")
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
        redundant, level = psu_redundant(psus, node.get("psu_redundancy"), f"{p}.psu_redundancy")
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


def _node_min_w(node: dict[str, Any], model: Any) -> float:
    """One node's draw with every GPU at its lowest power limit (0 when unknown)."""
    base, count = node.get("base_power_w"), node.get("gpus_per_node")
    if not isinstance(base, (int, float)) or not isinstance(count, int):
        return 0.0
    limits = node.get("gpu_limits") if isinstance(node.get("gpu_limits"), dict) else {}
    low = limits.get("power_min_w") or (model and (model.power_min_w or model.power_default_w)) or 0
    return float(base + count * low)


def _check_facility(raw: dict[str, Any]) -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.rules import check_facility

    check_facility(raw)  # the voltage and the breaker above zero, before the formula below divides by them
    p = "gpucluster_facility"
    fac = raw.get(p) if isinstance(raw.get(p), dict) else {}
    amps, volts, phases = fac.get("breaker_amps"), fac.get("circuit_voltage_v"), fac.get("circuit_phases")
    node = raw.get("gpucluster_node") if isinstance(raw.get("gpucluster_node"), dict) else {}
    need_w = _node_min_w(node, GPUS.get(str(node.get("gpu_model"))))
    psus = node.get("psu_count") if isinstance(node.get("psu_count"), int) else 1
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (amps, volts))
    if not numbers or phases not in (1, 3) or not need_w:
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


def _check_fabric(raw: dict[str, Any]) -> None:
    p = "gpucluster_fabric"
    fab = raw.get(p) if isinstance(raw.get(p), dict) else {}
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


# --- secrets: never in the inventory's site variables, the plan or its files (issue 37) ---------------------
#: Shapes of well-known credentials (the vendors' documented token formats): a value of one of these shapes
#: is a secret wherever it stands in the site variables. GitHub
#: (https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/), GitLab
#: (https://docs.gitlab.com/ee/security/tokens/#token-prefixes), AWS access key ids
#: (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids),
#: Slack (https://api.slack.com/authentication/token-types), NVIDIA NGC API keys (nvapi-), Hugging Face
#: (hf_), a JSON Web Token (RFC 7519: base64url header.payload.signature, the header starting '{"' = eyJ)
#: and a PEM private key.
SECRET_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (what, re.compile(pattern))
    for what, pattern in (
        ("a GitHub token", r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
        ("a GitLab token", r"\bgl(pat|dt|rt|ptt|cbt|imt|agent|oas|ft|soat)-[A-Za-z0-9_-]{16,}"),
        ("an AWS access key id", r"\b(AKIA|ASIA|AROA|AIDA)[0-9A-Z]{16}\b"),
        ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ("an NGC API key", r"\bnvapi-[A-Za-z0-9_-]{20,}"),
        ("a Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
        ("a JSON Web Token", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        ("a private key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"),
    )
)
#: In a NAME (a credential's name): a run of this many hex digits, or of this many base64 characters
#: mixing letters and digits with at least this much Shannon entropy per character, is a random string
#: (a key or token), not a name a person gives. Names are words joined by '_' or '-' (ngc, nvcr_pull,
#: registry_2024_ro): their runs are short.
SECRET_HEX_RUN = 32
SECRET_RANDOM_RUN = 20
SECRET_ENTROPY_BITS = 3.5
_HEX_RUN = re.compile(rf"[0-9A-Fa-f]{{{SECRET_HEX_RUN},}}")
_B64_RUN = re.compile(rf"[A-Za-z0-9+/=]{{{SECRET_RANDOM_RUN},}}")


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def secret_shape(value: Any, *, name: bool = False) -> str | None:
    """What ``value`` looks like when it looks like a secret ('a GitHub token'), else None.

    ``name``: ``value`` should be a name (a credential's name): long random runs count too."""
    if not isinstance(value, str):
        return None
    for what, pattern in SECRET_SHAPES:
        if pattern.search(value):
            return what
    if name:
        if _HEX_RUN.search(value):
            return "a long hexadecimal string (a key or token)"
        for run in _B64_RUN.findall(value):
            mixed = re.search(r"[0-9]", run) and re.search(r"[A-Za-z]", run)
            if mixed and _entropy(run) >= SECRET_ENTROPY_BITS:
                return "a long random string (a key or token)"
    return None


#: Fields that hold the NAME of a secret (the secret itself comes from the site's secret store).
SECRET_NAME_FIELDS = ("gpucluster_containers.registries[].credential", "gpucluster_secrets[]")


def value_strings(data: Any, path: list[Any]) -> Iterator[tuple[list[Any], str]]:
    """Every string in ``data`` (keys too), with its path below ``path``."""
    if isinstance(data, str):
        yield path, data
    elif isinstance(data, Mapping):
        for key, value in data.items():
            yield from value_strings(key, [*path, f"<key {len(path)}>"])
            yield from value_strings(value, [*path, key])
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            yield from value_strings(value, [*path, i])


def check_secrets(raw: Mapping[str, Any]) -> None:
    """Refuse a secret in the site variables, before anything else reads (or echoes) them: a value shaped
    like a known credential anywhere, and a credential's NAME that looks like a key or token. The error
    names the field and what the value looks like, never the value (the plan and its report are 0644)."""
    for path, text in value_strings(dict(raw), []):
        field = field_path(path)
        pattern = re.sub(r"\[\d+\]", "[]", field)
        what = secret_shape(text, name=pattern in SECRET_NAME_FIELDS)
        require(
            what is None,
            field,
            "<hidden>",
            f"no secret in the inventory: the value looks like a secret ({what}) and is not shown; "
            + (
                "name the credential (letters, digits, '_'); the secret itself stays in the site's secret store"
                " (Ansible Vault), never in the inventory or on a node (docs/containers.md, Credentials)"
                if pattern in SECRET_NAME_FIELDS
                else "keep secrets in the site's secret store (Ansible Vault) in the roles' secret variables, which"
                " the plan never reads"
            ),
        )


# --- package sources: every apt repository signed by a pinned key (issue 37) -----------------------------
#: The apt repositories the roles add, by their role variable: ``<name>`` the URIs, ``<name>_key`` the
#: signing key (an https:// URL, an ASCII-armored key or a keyring path on the host), ``<name>_key_fingerprint``
#: the key's pinned fingerprint(s), checked before apt trusts the key (module apt_signing_key),
#: ``<name>_http_mirror`` (default false) lets http:// URIs name the site's own mirror: apt still checks the
#: repository's Release signature against the pinned key (https://wiki.debian.org/SecureApt). The key
#: itself is only ever fetched over https.
PACKAGE_SOURCES = (
    "compute_gpu_repo",
    "compute_container_repo",
    "compute_doca_repo",
    "compute_beegfs_repo",
    "storage_beegfs_repo",
    "head_grafana_repo",
)
#: The names of the role variables :func:`check_package_sources` reads.
PACKAGE_SOURCE_VARIABLES = frozenset(
    f"{p}{s}" for p in PACKAGE_SOURCES for s in ("", "_key", "_key_fingerprint", "_http_mirror")
)
_FINGERPRINT = re.compile(r"[0-9A-F]{40}|[0-9A-F]{64}")
ARMORED_KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----"


def key_fingerprints(value: Any) -> list[str] | None:
    """The pinned fingerprints of ``value`` (one, or a list; spaces and case ignored: 40 hex digits for a
    v4 key, 64 for v5/v6), or None when it is no such list."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        return None
    out = [re.sub(r"\s+", "", v).upper().removeprefix("0X") for v in items]
    return out if all(_FINGERPRINT.fullmatch(v) for v in out) else None


def check_package_sources(variables: Mapping[str, Any], where: str = "group all") -> None:
    """Raise PlanError unless every package repository set in ``variables`` (one host's variables) is
    signed by a key with a pinned fingerprint and reached over https (http only for a declared mirror)."""
    for name in PACKAGE_SOURCES:
        uris = variables.get(name)
        if uris is None or uris == [] or uris == "":
            continue
        on = f" (set on {where})"
        uri_list = [uris] if isinstance(uris, str) else uris
        require(
            isinstance(uri_list, list) and all(isinstance(u, str) for u in uri_list),
            name,
            uris,
            "a list of apt repository URIs" + on,
        )
        mirror = variables.get(f"{name}_http_mirror", False)
        require(isinstance(mirror, bool), f"{name}_http_mirror", mirror, "true or false" + on)
        for i, uri in enumerate(uri_list):
            scheme = uri.partition("://")[0].lower() if "://" in uri else ""
            require(
                scheme == "https" or (scheme == "http" and mirror),
                f"{name}[{i}]",
                uri,
                "an https:// URI"
                + ("" if scheme != "http" else f" (http:// only for the site's own mirror: {name}_http_mirror: true)")
                + on,
            )
        key = variables.get(f"{name}_key", "")
        text = key.strip() if isinstance(key, str) else ""
        kind = (
            "url"
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text)
            else "armored"
            if text.startswith(ARMORED_KEY)
            else "path"
            if text.startswith("/")
            else ""
        )
        require(
            kind != "" and (kind != "url" or text.lower().startswith("https://")),
            f"{name}_key",
            key if len(text) <= 120 else text[:60] + "...",
            "the repository's signing key: an https:// URL, an ASCII-armored key (" + ARMORED_KEY + ") or a"
            " keyring path on the host; without it apt trusts any key of its keyring (or none), and a key fetched"
            " over http could be anyone's" + on,
        )
        pinned = variables.get(f"{name}_key_fingerprint")
        require(
            key_fingerprints(pinned) is not None,
            f"{name}_key_fingerprint",
            pinned,
            f"the full fingerprint of {name}_key (40 hex digits, spaces allowed; a list for several keys): the key"
            " is checked against it on the host before apt trusts it" + on,
        )


def check_values(raw: dict[str, Any], groups: dict[str, list[str]], *, hosts: list[str], storage_hosts: int) -> None:
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
