"""Lustre: PFL layouts per directory, client tunables bounded by RAM, LNet networks.

Sources: docs/sources.md §4 (lfs-setstripe man page [L1], lustre-release source [L2],
wiki striping guidance [L3], NERSC [L4], vendor tuning [L5], lctl/lnet [L6]).
- Stripe sizes must be multiples of 64 KiB [L1]; stripe counts are bounded by the OST
  count (tiers.md correction: the count follows the OSTs and the file pattern, not "8 for
  64 readers").
- max_pages_per_rpc=1024 is 4 MiB RPCs with 4 KiB pages (not "1 MB", tiers.md), already
  the default since 2.10 [L2]: the plan leaves it alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import yaml

from ansible_collections.gpucluster.tiers.plugins.module_utils.lustre_yaml import (  # target side: lustre_layout
    EOF_END,
    GIB,
    MIB,
    STRIPE_UNIT,
    setstripe_args,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.fs_model import (
    Layout,
    LayoutComponent,
    LnetConfig,
    LustreMount,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.nfs import (
    CLIENT_MOUNT_BEFORE,
    systemd_mount_unit_name,
)


def check_stripe(count: object, size: object, ost_count: int, field: str) -> None:
    """count: -1 (all OSTs) or 1..ost_count; size: a positive multiple of 64 KiB."""
    if count != -1:
        check_range(count, f"{field}.stripe_count", 1, ost_count, integer=True, unit=f" (the {ost_count} OSTs)")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0 or size % STRIPE_UNIT:
        raise PlanError(f"{field}.stripe_size", size, "a positive multiple of 64 KiB (65536 bytes)")


def _component(start: int, end: int, count: int, size: int, layout: str = "raid0") -> LayoutComponent:
    return {"start": start, "end": end, "stripe_count": count, "stripe_size": size, "layout": layout}


def default_layouts(ost_count: int) -> dict[str, list[LayoutComponent]]:
    """PFL components per directory role, bounded by ``ost_count``.

    - checkpoints: sharded checkpoints are tens of GB per rank: [0,64M) 1 stripe, [64M,4G)
      up to 4, beyond up to 16 OSTs with 16 MiB stripes ([L3] large files 4-8+, [L4] 1-10 GB
      shared files -> 8 OSTs, 10-100 GB -> 24; capped at 16 for file-per-rank shards).
    - datasets: read-mostly shards of hundreds of MB: [0,256M) 1 stripe, beyond up to 8 x 4M.
    - home: small files: first 1 MiB on the MDT (Data-on-MDT [L1]), the rest 1 stripe.
    """

    def c(n: int) -> int:
        return min(n, ost_count)

    return {
        "checkpoints": [
            _component(0, 64 * MIB, 1, 4 * MIB),
            _component(64 * MIB, 4 * GIB, c(4), 4 * MIB),
            _component(4 * GIB, EOF_END, c(16), 16 * MIB),
        ],
        "datasets": [
            _component(0, 256 * MIB, 1, 4 * MIB),
            _component(256 * MIB, EOF_END, c(8), 4 * MIB),
        ],
        "home": [
            _component(0, 1 * MIB, 0, 1 * MIB, "mdt"),
            _component(1 * MIB, EOF_END, 1, 1 * MIB),
        ],
    }


def _check_components(components: object, ost_count: int, field: str) -> list[LayoutComponent]:
    if not isinstance(components, list) or not components:
        raise PlanError(field, components, "a list of components {end, stripe_count, stripe_size}")
    out = []
    start = 0
    for i, comp in enumerate(components):
        f = f"{field}[{i}]"
        if not isinstance(comp, dict):
            raise PlanError(f, comp, "a mapping {end, stripe_count, stripe_size}")
        end = comp.get("end", EOF_END)
        last = i == len(components) - 1
        if last and end != EOF_END:
            raise PlanError(f"{f}.end", end, "-1 (to the end of file) for the last component")
        if not last and (not isinstance(end, int) or end <= start or end % STRIPE_UNIT):
            raise PlanError(f"{f}.end", end, f"a multiple of 64 KiB above the previous end ({start})")
        layout = comp.get("layout", "raid0")
        count = comp.get("stripe_count", 1)
        size = comp.get("stripe_size", 4 * MIB)
        if layout == "mdt":
            if i != 0:
                raise PlanError(f"{f}.layout", layout, "mdt only for the first component (Data-on-MDT)")
            count = 0
        else:
            check_stripe(count, size, ost_count, f)
        out.append(_component(start, end, count, size, layout))
        start = end
    return out


def lustre_layouts(
    *,
    ost_count: int,
    paths: Mapping[str, str],
    overrides: Mapping[str, object] | None = None,
    field: str = "gpucluster_storage",
) -> dict[str, Layout]:
    """Per directory role: {path, components, setstripe_args}."""
    osts = int(check_range(ost_count, f"{field}.lustre.osts_per_oss", 1, 65536, integer=True))
    defaults = default_layouts(osts)
    out: dict[str, Layout] = {}
    for role, path in sorted(paths.items()):
        if overrides and role in overrides:
            comps = _check_components(overrides[role], osts, f"{field}.lustre.layouts.{role}")
        else:
            comps = defaults.get(role, defaults["datasets"])
        # setstripe_args (module_utils, the target side's too) reads plain mappings
        out[role] = {"path": path, "components": comps, "setstripe_args": setstripe_args([dict(c) for c in comps])}
    for role in overrides or {}:
        if role not in paths:
            raise PlanError(f"{field}.lustre.layouts.{role}", role, "a role listed in gpucluster_storage.paths")
    return out


def lustre_client_tunables(*, client_ram_gib: float, field: str = "gpucluster_node.memory_gib") -> dict[str, int]:
    """lctl parameters for a client with ``client_ram_gib`` of RAM, within the source's bounds [L2].

    - osc.*.max_rpcs_in_flight: 32 (vendor tuning [L5]; default 8, limit 256).
    - osc.*.max_dirty_mb: 512 ([L5]); must stay < 2048 and <= RAM/4.
    - llite.*.max_read_ahead_mb: min(1024, RAM/32) (the 2.14+ default formula; <= RAM/2).
    - llite.*.max_read_ahead_per_file_mb: max_read_ahead_mb/4 capped at 256 (2.14+ default).
    - ldlm.namespaces.*.lru_size: 0 = dynamic LRU resize.
    """
    ram = check_range(client_ram_gib, field, 1, 1048576, unit=" GiB")
    ram_mb = int(ram * 1024)
    dirty = min(512, ram_mb // 4, 2047)
    read_ahead = max(1, min(1024, ram_mb // 32))
    per_file = max(1, min(256, read_ahead // 4))
    return {
        "osc.*.max_rpcs_in_flight": 32,
        "osc.*.max_dirty_mb": dirty,
        "llite.*.max_read_ahead_mb": read_ahead,
        "llite.*.max_read_ahead_per_file_mb": per_file,
        "ldlm.namespaces.*.lru_size": 0,
    }


def _scoped(tunables: dict[str, int], fsname: str) -> list[str]:
    """``PARAM=VALUE`` of each tunable, its device glob narrowed to file system ``fsname``: the
    client's devices are named ``<fsname>-OSTnnnn-osc-<id>``, ``<fsname>-<id>`` (llite) [L6]."""
    out = []
    for key, value in tunables.items():
        scoped = key.replace("osc.*", f"osc.{fsname}-OST*").replace("llite.*", f"llite.{fsname}-*")
        scoped = scoped.replace("ldlm.namespaces.*", f"ldlm.namespaces.{fsname}-*")
        out.append(f"{scoped}={value}")
    return out


def lctl_set_param_commands(tunables: dict[str, int], fsname: str) -> list[str]:
    """Permanent settings, run on the MGS, scoped to this file system [L6]."""
    return [f"lctl set_param -P {p}" for p in _scoped(tunables, fsname)]


#: The oneshot that sets the client tunables once the file system is mounted (lctl set_param, not -P:
#: a client's own settings, lost at unmount, so it runs after every mount)
TUNABLES_UNIT = "gpucluster-lustre-tunables.service"
#: lctl of the Lustre client utilities (lustre-release's Debian packaging: lustre-client-utils)
LCTL = "/usr/sbin/lctl"


def client_mount(
    *,
    mgs_nid: str,
    fsname: str,
    mount_point: object,
    tunables: dict[str, int],
    field: str = "gpucluster_storage.lustre.mount_point",
) -> LustreMount:
    """A client's mount of the file system (mount.lustre(8): ``MGSNID:/FSNAME``) and what its units need:
    the systemd unit name of the mount point (``unit_name``: systemd-escape --path --suffix=mount), what the
    mount comes before, and the client tunables as ``lctl set_param`` arguments scoped to ``fsname``."""
    ok = isinstance(mount_point, str) and re.fullmatch(r"(/[^/\s]+)+", mount_point) is not None
    if not isinstance(mount_point, str) or not ok or ".." in mount_point.split("/"):
        raise PlanError(field, mount_point, "an absolute path without spaces, '..' or a final '/'")
    unit_name = systemd_mount_unit_name(mount_point)
    return {
        "what": f"{mgs_nid}:/{fsname}",
        "where": mount_point,
        "type": "lustre",
        "options": "defaults,_netdev,flock",
        "unit_name": unit_name,
        "unit_path": f"/etc/systemd/system/{unit_name}",
        "before": list(CLIENT_MOUNT_BEFORE),
        "tunables_unit": TUNABLES_UNIT,
        "set_param": _scoped(tunables, fsname),
    }


_MOUNT_ORDER_NOTE = """\
# Order (systemd.unit(5), https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html;
# systemd.mount(5), https://www.freedesktop.org/software/systemd/man/latest/systemd.mount.html):
# - LNet first: lnet.service (Lustre's client package) loads lnet and imports /etc/lnet.conf with the
#   planned NIDs. Wants=, not Requires=: where it is missing or failed, mount.lustre still loads lnet
#   with /etc/modprobe.d/lustre.conf's networks= (the same planned interfaces).
# - Before= slurmd, the checkpoint drain and the container runtimes is ordering only: this unit pulls
#   none of them in and none requires it, so a mount that cannot happen (no Lustre client, the lab)
#   delays them by its timeout at most and never stops slurmd from starting. The drain checks the
#   mount itself (remote_mount) and copies nothing into an empty mount point.
"""


def _pct(value: str) -> str:
    """``value`` in a unit setting that resolves specifiers (systemd.unit(5) "Specifiers"): '%' doubled."""
    return value.replace("%", "%%")


def mount_unit_text(mount: LustreMount) -> str:
    """The systemd mount unit of the plan's ``storage.lustre.client_mount``: rendered on the way to the
    clients (filter gpucluster.tiers.lustre_client_unit), not stored in the plan."""
    what, where = _pct(mount["what"]), _pct(mount["where"])
    return (
        "# Planned by gpucluster.tiers: the Lustre client mount of the cluster's shared storage.\n"
        + _MOUNT_ORDER_NOTE
        + "[Unit]\n"
        f"Description=Lustre {what} at {where}\n"
        "Documentation=man:mount.lustre(8) man:systemd.mount(5)\n"
        "Wants=network-online.target lnet.service\n"
        "After=network-online.target lnet.service\n"
        f"Before={' '.join(mount['before'])}\n"
        "\n"
        "[Mount]\n"
        f"What={what}\n"
        f"Where={where}\n"
        f"Type={mount['type']}\n"
        f"Options={_pct(mount['options'])}\n"
        "TimeoutSec=90\n"
        "\n"
        "[Install]\n"
        "WantedBy=remote-fs.target\n"
    )


def tunables_unit_text(mount: LustreMount) -> str:
    """The oneshot that applies the client tunables (``set_param``) after each mount of ``mount``
    (``lctl set_param``, lctl-set_param(8) [L6]); started by the mount (WantedBy), skipped where
    the Lustre utilities are not installed."""
    unit = mount["unit_name"]
    return (
        "# Planned by gpucluster.tiers: the Lustre client tunables (bounded by the node's RAM, report.md),\n"
        "# set after each mount: lctl set_param without -P is this client's own and ends with the mount.\n"
        "[Unit]\n"
        f"Description=Lustre client tunables for {_pct(mount['where'])}\n"
        "Documentation=man:lctl-set_param(8)\n"
        f"Requires={unit}\n"
        f"After={unit}\n"
        f"Before={' '.join(mount['before'])}\n"
        f"ConditionPathExists={LCTL}\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"ExecStart={LCTL} set_param {_pct(' '.join(mount['set_param']))}\n"
        "\n"
        "[Install]\n"
        f"WantedBy={unit}\n"
    )


def _yaml_str(value: str) -> str:
    """``value`` as a YAML scalar that reads back as that string: plain when it can be (ib0), quoted when
    a plain scalar would read as something else ('yes', 'null', '1')."""
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 16).removesuffix("\n...\n").strip()


def lnet_config(*, interfaces: list[str], net: str = "o2ib0", field: str = "gpucluster_storage.lustre") -> LnetConfig:
    """LNet networks as modprobe options and as an lnetctl import file [L6]."""
    if not re.match(r"^(o2ib|tcp)\d*\Z", str(net)):
        raise PlanError(f"{field}.lnet_net", net, "o2ibN (InfiniBand/RoCE) or tcpN")
    if not interfaces or not all(interfaces):
        raise PlanError("gpucluster_node.nics", interfaces, "at least one storage (or compute) NIC for LNet")
    ifaces = ",".join(interfaces)
    return {
        "net": net,
        "interfaces": list(interfaces),
        "modprobe": f'options lnet networks="{net}({ifaces})"',
    }


def lnet_conf_yaml(lnet: LnetConfig) -> str:
    """The lnetctl import file (/etc/lnet.conf) of an LNet config of the plan (``net``, ``interfaces``:
    storage.lustre.lnet or server_lnet) [L6]: rendered on the way to the host (filter
    gpucluster.tiers.lnet_conf), not stored in the plan."""
    yaml_lines = ["net:", f"    - net type: {lnet['net']}", "      local NI(s):"]
    for iface in lnet["interfaces"]:
        yaml_lines += ["        - interfaces:", f"              0: {_yaml_str(iface)}"]
    return "\n".join(yaml_lines) + "\n"
