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
CONTACT_SUPPORT, UPDATE_SW  DRAIN_P2P (an operator's decision)   replace
==========================  ===================================  ==========

An XID not in the table gets :data:`UNKNOWN_XID_ACTION` (``replace``: a person looks at it) unless the
site overrides it (``gpucluster_healing.remediation.actions.xid.<n>``). Every action runs under the
drain and ends with a re-validation; a node that fails it again within the retry limit is replaced.
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
    "UPDATE_SW": "replace",
}

#: XID -> (catalog bucket, mnemonic or description): docs/sources.md [XID1], the catalog row of each XID
XID_BUCKETS: dict[int, tuple[str, str]] = {
    8: ("RESTART_APP", "GPU stopped processing"),  # [XID1] XID 8
    13: ("RESTART_APP", "Graphics Engine Exception"),  # [XID1] XID 13
    31: ("RESTART_APP", "GPU memory page fault"),  # [XID1] XID 31
    43: ("RESTART_APP", "GPU stopped processing"),  # [XID1] XID 43
    45: ("RESTART_APP", "Preemptive cleanup, due to previous errors"),  # [XID1] XID 45
    48: ("RESET_GPU", "Double Bit ECC Error"),  # [XID1] XID 48
    63: ("RESET_GPU", "Row remapping recorded: reset the GPU to activate"),  # [XID1] XID 63
    64: ("RESET_GPU", "Row remapping failed to record"),  # [XID1] XID 64
    74: ("RESET_GPU", "NVLink error"),  # [XID1] XID 74
    79: ("RESTART_BM", "GPU has fallen off the bus"),  # [XID1] XID 79
    92: ("IGNORE", "High single-bit ECC error rate"),  # [XID1] XID 92
    94: ("RESTART_APP", "Contained ECC error"),  # [XID1] XID 94
    95: ("RESET_GPU", "Uncontained ECC error"),  # [XID1] XID 95
    119: ("RESET_GPU", "GSP RPC timeout"),  # [XID1] XID 119
    120: ("RESET_GPU", "GSP error"),  # [XID1] XID 120
}

#: XID (as a string: a JSON key) -> action
XID_ACTIONS: dict[str, str] = {str(x): BUCKET_ACTIONS[bucket] for x, (bucket, _what) in sorted(XID_BUCKETS.items())}

__all__ = ["ACTIONS", "BUCKET_ACTIONS", "UNKNOWN_XID_ACTION", "XID_ACTIONS", "XID_BUCKETS"]
