"""XID errors and what the self-healing loop does about each (compute/healing.py reads :data:`XID_ACTIONS`).

The source is NVIDIA's Xid catalog for Ampere and newer GPUs ("Analyzing Xid Errors with the Xid
Catalog", docs/sources.md [XID1]): per XID its "Resolution Bucket (Immediate Action)". NVML's GPU
recovery action (``nvmlDeviceGpuRecoveryAction_t``, [XID2]; the A100 memory error management guide's
"Recovery action flag", [XID3]) names the same remedies. Each bucket maps to one of the healing loop's
actions (:data:`BUCKET_ACTIONS`):

==========================  ===================================  ==========
catalog bucket              NVML recovery action                 action
==========================  ===================================  ==========
RESTART_APP, IGNORE         NONE ("the GPU can be immediately     none
                            used again")
RESET_GPU                   GPU_RESET ("nvidia-smi -r")          gpu_reset
                            DRAIN_AND_RESET                      gpu_reset
RESTART_BM, RESTART_VM      NODE_REBOOT                          reboot
CONTACT_SUPPORT, UPDATE_SWFW DRAIN_P2P (an operator's decision)  replace
==========================  ===================================  ==========

An XID not in the table gets :data:`UNKNOWN_XID_ACTION` (``replace``: a person looks at it) unless the
site overrides it (``gpucluster_healing.remediation.actions.xid.<n>``). Every action runs under the
drain and ends with a re-validation; a node that fails it again within the retry limit is replaced.
A reason naming several XIDs takes the most severe action of them (``ACTIONS`` is mildest first).
"""

from __future__ import annotations

#: the healing loop's actions, mildest first (the contract's order)
ACTIONS = ("none", "gpu_reset", "reboot", "replace")
UNKNOWN_XID_ACTION = "replace"

#: NVIDIA's catalog bucket (Immediate Action) -> our action (docs/sources.md [XID1], [XID2])
BUCKET_ACTIONS: dict[str, str] = {
    "RESTART_APP": "none",
    "IGNORE": "none",
    "RESET_GPU": "gpu_reset",
    "RESTART_BM": "reboot",
    "RESTART_VM": "reboot",
    "CONTACT_SUPPORT": "replace",
    "UPDATE_SWFW": "replace",
}

#: XID -> (the catalog's Immediate Action bucket, our action, its description). Source of every row:
#: NVIDIA's Xid catalog for Ampere and newer, docs/sources.md [XID1]. A WORKFLOW_* bucket (NVIDIA's own
#: procedure) and the rows where we act beyond the bucket say why in their comment.
XID_TABLE: dict[int, tuple[str, str, str]] = {
    8: ("RESTART_APP", "none", "GPU stopped processing"),  # [XID1] XID 8
    13: ("RESTART_APP", "none", "Graphics Engine Exception"),  # [XID1] XID 13 (WORKFLOW_XID_13: an application fault)
    14: ("IGNORE", "none", "fake or injected error"),  # [XID1] XID 14
    31: ("RESTART_APP", "none", "GPU memory page fault"),  # [XID1] XID 31 (WORKFLOW_XID_31: an application fault)
    32: ("RESTART_APP", "none", "Invalid or corrupted push buffer stream"),  # [XID1] XID 32
    43: ("IGNORE", "none", "GPU stopped processing (the GPU remains healthy)"),  # [XID1] XID 43
    # [XID1] XID 45: WORKFLOW_XID_45, "not solo: follow the other Xid" (the most severe XID of a reason wins)
    45: ("WORKFLOW_XID_45", "none", "Preemptive cleanup, due to previous errors"),
    46: ("RESET_GPU", "gpu_reset", "GPU stopped processing"),  # [XID1] XID 46
    # [XID1] XID 48: WORKFLOW_XID_48, "a GPU reset or node reboot is needed to clear this error"
    48: ("WORKFLOW_XID_48", "gpu_reset", "Double Bit ECC Error"),
    62: ("RESET_GPU", "gpu_reset", "Internal micro-controller halt"),  # [XID1] XID 62
    # [XID1] XID 63: IGNORE; a remapped row is activated by the next GPU reset ([XID3], "Row-remapping pending
    # flag"): the node is drained and idle, so we reset now
    63: ("IGNORE", "gpu_reset", "GPU memory remapping event"),
    64: ("RESET_GPU", "gpu_reset", "GPU memory remapping failure"),  # [XID1] XID 64
    # [XID1] XID 74: WORKFLOW_NVLINK_ERR, "a GPU reset or node reboot is needed to clear this error"
    74: ("WORKFLOW_NVLINK_ERR", "gpu_reset", "NVLink error"),
    78: ("UPDATE_SWFW", "replace", "vGPU start error"),  # [XID1] XID 78
    79: ("RESTART_BM", "reboot", "GPU has fallen off the bus"),  # [XID1] XID 79
    92: ("IGNORE", "none", "High single-bit ECC error rate"),  # [XID1] XID 92
    # [XID1] XID 94: RESTART_APP, "it is recommended to reset the GPU when convenient": drained, it is
    94: ("RESTART_APP", "gpu_reset", "Contained memory error"),
    95: ("RESET_GPU", "gpu_reset", "Uncontained memory error"),  # [XID1] XID 95
    119: ("RESET_GPU", "gpu_reset", "GSP RPC timeout"),  # [XID1] XID 119
    120: ("RESET_GPU", "gpu_reset", "GSP error"),  # [XID1] XID 120
    140: ("RESET_GPU", "gpu_reset", "ECC unrecovered error"),  # [XID1] XID 140
    # [XID1] XID 154: "summarises the recovery action required for other Xids" ([XID2]): those XIDs decide
    154: ("XID_154", "none", "GPU recovery action changed"),
}

#: XID (as a string: a JSON key) -> action
XID_ACTIONS: dict[str, str] = {str(x): action for x, (_bucket, action, _what) in sorted(XID_TABLE.items())}

__all__ = ["ACTIONS", "BUCKET_ACTIONS", "UNKNOWN_XID_ACTION", "XID_ACTIONS", "XID_TABLE"]
