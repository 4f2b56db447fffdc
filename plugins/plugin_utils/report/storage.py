"""The report's sections on storage: sizing, floors and ceilings, Lustre, data protection, NFS links, NVMe-oF,
BeeGFS and checkpoint staging (each a function of the plan; report/sections.py lists them in report order)."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.model import Row, Section
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.text import fmt, pair, sentences
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import raid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.checkpoint_report import drain_rows
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.nvmeof import discovery_conf_text


def storage_section(plan: Plan) -> Section:
    st = plan["storage"]
    sz = st["sizing"]
    inp = sz.get("inputs") or {}
    ckpt_gb = sz["checkpoint_bytes"] / 1e9
    rate = sz["rated_write_gbps"] or sz["write_floor_gbps"]
    rate_from = "rated" if sz["rated_write_gbps"] else "tier floor"

    def given(key: str, text: str, fallback: str) -> str:
        return text if key in inp else fallback

    params = inp.get("model_params_b")
    ckpt_how = given(
        "model_params_b",
        f"{fmt(params)} B params x {fmt(inp.get('bytes_per_param'))} bytes",
        "parameters x bytes per parameter",
    )
    write_how = given(
        "overlap_target",
        f"{fmt(ckpt_gb)} GB / ({inp.get('overlap_target', 0):.2f} x {fmt(inp.get('interval_min'))} min)",
        "checkpoint / (overlap target x interval)",
    )
    idle_how = given(
        "io_wait_fraction",
        f"{inp.get('gpus')} GPUs x 24 h x ${inp.get('gpu_hour_cost_usd', 0):.2f}/GPU-h x "
        f"{inp.get('io_wait_fraction', 0):.2f} I/O wait",
        "GPUs x 24 h x $/GPU-h x I/O wait",
    )
    check = st.get("check") or []
    keeps_up = sz["required_write_gbps"] <= rate
    return Section(
        "Storage sizing",
        [
            ["checkpoint (TB)", sz["checkpoint_tb"], ckpt_how],
            ["write needed (GB/s)", sz["required_write_gbps"], write_how],
            [
                "write (GB/s)",
                pair(("floor", "rated"), [sz["write_floor_gbps"], sz["rated_write_gbps"]], "GB/s"),
                "tier floor / gpucluster_storage.rated_write_gbps",
            ],
            [
                "checkpoint write time (s)",
                sz["write_time_s"],
                f"{fmt(ckpt_gb)} GB / {fmt(rate)} GB/s ({rate_from})",
            ],
            [
                "storage keeps up",
                "yes" if keeps_up else ("no, planned anyway" if not check else "no"),
                f"{fmt(sz['required_write_gbps'])} GB/s needed vs {fmt(rate)} GB/s {rate_from}",
            ],
            [
                "daily write volume (TB)",
                sz["daily_write_tb"],
                f"{fmt(sz['checkpoint_tb'])} TB x {fmt(sz['checkpoints_per_day'])} checkpoints a day",
            ],
            ["GPU idle cost per day (USD)", sz["idle_cost_per_day_usd"], idle_how],
        ],
        sentences(check),
    )


def storage_ceiling_section(plan: Plan) -> Section | None:
    """The storage floors beside their ceiling, each with its source (storage/sizing.py storage_ceiling,
    validation/floors.py storage_floor_within): the ceiling is what the data servers' planned storage interfaces
    carry, each card at min(its ports' line rates, its PCIe slot), or the local drives' links."""
    st, val, tier = plan["storage"], plan["validation"], plan["tier"]
    read, write = st["ceilings"]["read_gbps"], st["ceilings"]["write_gbps"]
    if read is None or write is None:
        return None
    rows: list[Row] = []
    for rw, ceiling in (("read", read), ("write", write)):
        floor = val.get(f"storage_{rw}_gbps")
        rows.append(
            [
                f"{rw} (GB/s)",
                pair(("floor", "ceiling"), [floor, ceiling["gbs"]], "GB/s"),
                f"floor: the {tier['name']} reference design (gpucluster_cluster.tier, docs/tiers.md); "
                + (
                    f"ceiling: {ceiling['link']}"
                    if rw == "read"
                    else "ceiling: the same links (read and write share them)"
                ),
            ]
        )
    ceiling = read
    group = ceiling.get("server_group")
    for card in ceiling.get("cards") or []:
        rows.append(
            [
                f"card {card['card']} (each of groups.{group})",
                f"{fmt(card['gbs'])} GB/s",
                f"ports {', '.join(card['ports'])}: {card['text']}",
            ]
        )
    if ceiling.get("not_planned"):
        rows.append(
            [
                "described, not planned",
                ", ".join(ceiling["not_planned"]),
                "in gpucluster_storage.server_nics, not a planned storage interface: no storage address, not counted",
            ]
        )
    intro = (
        "A storage floor above its ceiling stops the plan (the field, its value, the floor and the ceiling): the "
        "floor is never lowered to fit. Read and write share the links; NVMe-oF, RDMA and TCP carry no more than "
        "the line rate or the PCIe slot."
    )
    return Section("Storage floors and ceilings", rows, intro)


def lustre_section(plan: Plan) -> Section | None:
    """The Lustre layouts, client tunables and LNet (storage/lustre.py)."""
    st = plan["storage"]
    if "lustre" not in st:
        return None
    lu = st["lustre"]
    rows: list[Row] = [
        [f"layout {role}", f"{lay['path']}: lfs setstripe {lay['setstripe_args']}", f"{lu['ost_count']} OSTs"]
        for role, lay in lu["layouts"].items()
    ]
    rows += [[k, v, "bounded by client RAM"] for k, v in lu["client_tunables"].items()]
    rows.append(["LNet", lu["lnet"]["modprobe"], "storage NICs"])
    return Section("Lustre", rows)


def protection_section(plan: Plan) -> Section | None:
    """storage/raid.py: what one NVMe failure costs (issue 38)."""
    st = plan["storage"]
    if "protection" not in st:
        return None
    return Section("Data protection", raid.protection_rows(st["protection"]), raid.PROTECTION_INTRO)


def nfs_section(plan: Plan) -> Section | None:
    """storage/nfs.py: the links the storage floors are checked against."""
    st = plan["storage"]
    links = st["nfs"].get("links") if "nfs" in st else None
    if not links:
        return None
    rows: list[Row] = [
        [
            "protocol",
            f"{links['proto']} (port {links['port']})",
            links["rdma_note"] or "gpucluster_storage.nfs.proto",
        ],
    ]
    ceiling = links["ceilings"]["read_gbps"] if "ceilings" in links else None
    if ceiling:  # the server's ports: "Storage floors and ceilings"
        rows.append(["storage ceiling (GB/s)", ceiling["gbs"], ceiling["link"]])
    return Section("NFS links", rows)


def nvmeof_section(plan: Plan) -> Section | None:
    """storage/nvmeof.py: per-node remote namespaces."""
    st = plan["storage"]
    if "nvmeof" not in st:
        return None
    nv = st["nvmeof"]
    rows = [[f"target {t}", f"{len(x['devices'])} devices at {x['address']}:{nv['trsvcid']}", f"{nv['transport']}"]
            for t, x in nv["targets"].items()]  # fmt: skip
    first_line = discovery_conf_text(nv).splitlines()[0]  # the targets' lines differ in the address only
    rows += [
        ["namespaces per node", str(nv["namespaces_per_client"]), "targets x devices / nodes"],
        ["unexported devices", str(nv["unexported"]), "left over when the devices do not divide evenly"],
        ["nvme connect-all", first_line, f"{nv['discovery_conf_path']}, a line a target"],
    ]
    intro = "Block devices, not a shared file system: each compute node gets its own namespaces (remote scratch)."
    return Section("NVMe-oF", rows, intro)


def beegfs_section(plan: Plan) -> Section | None:
    """storage/beegfs.py: patterns from the Lustre layouts' decision."""
    st = plan["storage"]
    if "beegfs" not in st:
        return None
    bg = st["beegfs"]
    rows = [[f"pattern {role}", p["command"], f"{bg['target_count']} targets (Lustre layout's last component)"]
            for role, p in bg["patterns"].items()]  # fmt: skip
    rows += [
        ["management", f"{bg['mgmtd']} ({bg['mgmtd_address']})", f"{bg['network']} network"],
        ["metadata / storage hosts", f"{', '.join(bg['meta'])} / {', '.join(bg['storage'])}", "inventory groups"],
        ["RDMA", "yes" if bg["rdma"] else "no", "gpucluster_storage.beegfs.rdma or the fabric type"],
    ]
    return Section("BeeGFS", rows)


def drain_section(plan: Plan) -> Section | None:
    """Async checkpoints: local staging, drain to the shared path (storage/checkpoint.py)."""
    st = plan["storage"]
    if "checkpoint_drain" not in st:
        return None
    rows = drain_rows(st["checkpoint_drain"], st["sizing"]["checkpoint_bytes"], plan["cluster"]["compute_nodes"],
                      st["sizing"]["inputs"]["interval_min"])  # fmt: skip
    return Section("Checkpoint staging and drain", rows)
