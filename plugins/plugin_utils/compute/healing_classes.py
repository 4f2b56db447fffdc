"""plan["healing"]'s remediation classes: the table the head's loop classifies a drain reason by, each class's
action, and the loop's metrics (compute/healing.py plans the rest of the section).

The classes come in order: the first whose ``match`` finds the drain reason (the text after ``reason_prefix``)
wins; ``xid`` takes its action per XID from NVIDIA's recovery actions (compute/xid.py). A site may override
any class's action (``gpucluster_healing.remediation.actions``). No I/O; pure functions of plain data.
"""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import xid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import ClassRule, RemediationClass
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_range, require

FIELD = "gpucluster_healing"
ACTIONS = xid.ACTIONS

#: The loop's metrics (node-exporter textfile on the head): name -> (type, labels, help). The head
#: program's ``METRICS`` must be equal (a unit test compares them).
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "gpucluster_heal_events_total": ("counter", ("node", "class", "action"), "healing events from the history"),
    "gpucluster_heal_node_state": ("gauge", ("node", "state"), "1 while a node is remediating, validating or replace"),
    "gpucluster_heal_last_run_timestamp_seconds": ("gauge", (), "when the healing loop last ran"),
    "gpucluster_active_check_last_timestamp_seconds": (
        "gauge",
        ("node", "check", "result"),
        "when a node last finished an active check, by result",
    ),
    "gpucluster_active_check_value": ("gauge", ("node", "check", "unit"), "the last figure of an active check"),
}

#: The remediation classes, in order: the first whose ``match`` finds the drain reason (the text after
#: ``reason_prefix``) wins. Each regex is written against the problems gpucluster-healthcheck writes
#: (roles/compute/files/gpucluster-healthcheck, its ``problems`` lines) and the active check's reasons.
#: ``written``: a literal reason of each format (the unit tests match every class against them).
CLASSES: tuple[ClassRule, ...] = (
    {
        "class": "check",
        "match": r"\bcheck (?P<check>[a-z_]+) ",
        "action": "reboot",
        "why": "an active check below its floor or unable to run: a reboot clears a stuck driver or link state",
        "written": ["check allreduce 312.4 GB/s < floor 460 GB/s", "check dcgm failed: dcgmi missing"],
    },
    {
        "class": "xid",
        "match": r"\bxid (?P<xid>\d+)\b",
        "action": None,  # by_xid, else default
        "why": "NVIDIA's Xid catalog, Resolution Bucket (Immediate Action) (compute/xid.py)",
        "written": ["gpu3 xid 79", "0000:3b:00.0 xid 48"],
    },
    {
        "class": "ecc",
        "match": r"\bgpu\d+ dbe ecc \d+",
        "action": "gpu_reset",
        "why": "uncorrectable ECC: a GPU reset activates the pending row remap (docs/sources.md [XID3])",
        "written": ["gpu0 dbe ecc 2"],
    },
    {
        "class": "gpu_count",
        "match": r"(?:^|, )\d+/\d+ gpus\b(?! listed)",
        "action": "reboot",
        "why": "a GPU missing from nvidia-smi (fallen off the bus, like XID 79): only a reboot brings it back",
        "written": ["7/8 gpus"],
    },
    {
        "class": "thermal",
        "match": r"\bgpu\d+ -?\d+(?:\.\d+)?C >= -?\d+(?:\.\d+)?C",
        "action": "none",
        "why": "a hot GPU: idle under the drain it cools down; the re-validation shows whether it holds",
        "written": ["gpu2 91C >= 87C"],
    },
    {
        "class": "coolant",
        "match": r"\bcoolant (?:supply|return|flow) ",
        "action": "none",
        "why": "the facility's loop, not the node: re-validate once the loop is back",
        "written": ["coolant supply 46C > 45C", "coolant return 61.5C > 60C", "coolant flow 8 < 10lpm"],
    },
    {
        "class": "fabric_port",
        "match": r"\b[\w.-]+/\d+ (?:missing|[A-Z][A-Z_]*|\d+(?:\.\d+)?<\d+(?:\.\d+)?Gb)(?=,|\s|$)",
        "action": "reboot",
        "why": "an HCA port down, missing or below its rate: a reboot re-trains the link (a cable stays a ticket)",
        "written": ["mlx5_0/1 DOWN", "mlx5_3/1 missing", "mlx5_1/1 200<400Gb", "mlx5_2/1 POLLING"],
    },
    {
        "class": "bringup",
        "match": (
            r"\bgpu\d+ fabric |\bgpu\d+ nvlink \d+/\d+|\bnvlink \d+/\d+ gpus listed|\bnot loaded\b"
            r"|\bnot running\b|\bGPUDirect RDMA\b|\bnvidia-smi (?:missing|rc )"
        ),
        "action": "reboot",
        "why": "Fabric Manager, NVLink, the GPUDirect module or the driver did not come up: a reboot brings it up",
        "written": [
            "gpu0 fabric In Progress",
            "gpu1 fabric status Failure (nvlsm)",
            "gpu0 nvlink 16/18",
            "nvlink 7/8 gpus listed",
            "nvidia_peermem not loaded",
            "ib_umad not loaded (nvlsm)",
            "nvlsm not running",
            "GPUDirect RDMA by DMA-BUF: no NVIDIA driver loaded (/proc/driver/nvidia/version)",
            "nvidia-smi missing",
            "nvidia-smi rc 9",
        ],
    },
    {
        "class": "dcgm",
        "match": r"\bdcgm (?:diag r\d+ no answer|\S.* fail\b)",
        "action": "gpu_reset",
        "why": "dcgmi diag failed after a job: reset the GPUs, then the re-validation runs the diag again",
        "written": ["dcgm Memory fail gpu0", "dcgm diag r1 no answer in 120s"],
    },
)


def check_bool(value: object, field: str) -> bool:
    """``value`` when it is true or false; PlanError naming ``field`` otherwise."""
    require(isinstance(value, bool), field, value, "true or false")
    return bool(value)


def check_mapping(raw: object, field: str, keys: tuple[str, ...]) -> dict[str, object]:
    """An inventory mapping (None: empty) with only ``keys``; PlanError naming ``field`` otherwise."""
    raw = {} if raw is None else raw
    require(isinstance(raw, dict), field, raw, f"a mapping with keys {', '.join(keys)}")
    if not isinstance(raw, dict):  # narrowed by the require above
        raise AssertionError(raw)
    unknown = sorted(set(raw) - set(keys), key=str)
    require(not unknown, f"{field}.{unknown[0] if unknown else ''}", unknown, f"only the keys {', '.join(keys)}")
    return {str(k): v for k, v in raw.items()}


def _override(value: object, field: str) -> str:
    require(value in ACTIONS, field, value, "one of " + ", ".join(ACTIONS))
    return str(value)


def _xid_actions(got: dict[str, object], field: str) -> tuple[dict[str, str], str]:
    """The action per XID (NVIDIA's, overridden by the site's ``xid`` list) and for any other XID."""
    by_xid = dict(xid.XID_ACTIONS)
    default = xid.UNKNOWN_XID_ACTION
    xid_raw = got.get("xid")
    if xid_raw is not None:
        require(isinstance(xid_raw, list), f"{field}.xid", xid_raw, "a list of {xid, action} (xid: 1 to 999)")
        if not isinstance(xid_raw, list):  # narrowed by the require above
            raise AssertionError(xid_raw)
        for i, item in enumerate(xid_raw):
            where = f"{field}.xid[{i}]"
            require(isinstance(item, dict) and set(item) == {"xid", "action"}, where, item, "a mapping {xid, action}")
            code = int(check_range(item["xid"], f"{where}.xid", 1, 999, integer=True))
            by_xid[str(code)] = _override(item["action"], f"{where}.action")
    if "xid_default" in got:
        default = _override(got["xid_default"], f"{field}.xid_default")
    return by_xid, default


def remediation_classes(raw_actions: object) -> list[RemediationClass]:
    """The classes as planned: each its ``match`` and action (the site's override, else the table's); ``xid``
    its action per XID. ``raw_actions``: ``gpucluster_healing.remediation.actions`` (None: the defaults)."""
    names = (*(c["class"] for c in CLASSES), "xid_default")
    field = f"{FIELD}.remediation.actions"
    got = check_mapping(raw_actions, field, names)
    by_xid, default = _xid_actions(got, field)
    out: list[RemediationClass] = []
    for cls in CLASSES:
        name = cls["class"]
        entry: RemediationClass
        if name == "xid":
            entry = {
                "class": name,
                "match": cls["match"],
                "by_xid": dict(sorted(by_xid.items(), key=lambda kv: int(kv[0]))),
                "default": default,
                # several XIDs in one reason: the most severe action of them (the order of "actions")
                "combine": "most_severe",
                "source": "docs/sources.md [XID1] [XID2] (compute/xid.py)",
                "why": cls["why"],
            }
        else:
            action = _override(got[name], f"{field}.{name}") if name in got else str(cls["action"])
            entry = {"class": name, "match": cls["match"], "action": action, "why": cls["why"]}
        out.append(entry)
    return out


__all__ = ["ACTIONS", "CLASSES", "METRICS", "check_bool", "check_mapping", "remediation_classes"]
