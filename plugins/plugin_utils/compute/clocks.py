"""GPU clock locks and power limits: never outside the model's limits.

Policies:
- ``max_performance``: lock the SM clock at the model's maximum (``-lgc max,max``), the
  memory clock at its maximum where the model supports ``-lmc``, power limit = default.
- ``fixed``: lock the SM clock (and optionally memory) at the site's value.
- ``power_capped``: no clock lock; the power limit is the site's cap.
Any policy may also set ``power_cap_w``. Settings are volatile (docs/sources.md §1.3), so the
compute role applies them from a oneshot unit at boot.

The power limit a policy asks for (:func:`requested_power_limit`) is not always the one
applied: in a plan, :func:`power.decide_power_limit` lowers it when the rack budget cannot
hold it, and :func:`gpu_clocks` takes that decision (``power_limit``) so that ``-pl``, the
DCGM policy and the power alert all read one value, ``power_limit_w``.
"""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import ClocksSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import PowerLimit
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import gpu_limits
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import CLOCK_POLICIES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
)

#: what _known reports -> the gpucluster_node.gpu_limits key that supplies it
_LIMIT_KEYS = {
    "maximum SM clock": "max_sm_mhz",
    "maximum memory clock": "max_mem_mhz",
    "minimum power limit": "power_min_w",
    "default power limit": "power_default_w",
    "maximum power limit": "power_max_w",
}


def _known(value: int | None, field: str, what: str, gpu: GpuModel) -> int:
    """``value``; else PlanError naming the inventory key that supplies it (gpucluster_node.gpu_limits.<key>),
    not the policy field that needed it (``field``)."""
    if value is None:
        key = _LIMIT_KEYS[what]
        raise PlanError(
            f"{gpu_limits.FIELD}.{key}",
            None,
            f"the {what} of {gpu.key}, read from the hardware ({gpu_limits.query(key)}), needed by {field}: "
            f"the catalog has no sourced value for {gpu.key}; or choose a policy that does not need it",
        )
    return value


def _power_cap(gpu: GpuModel, cap: object, field: str) -> int:
    low = _known(gpu.power_min_w, field, "minimum power limit", gpu)
    high = _known(gpu.power_max_w, field, "maximum power limit", gpu)
    return int(check_range(cap, field, low, high, integer=True, unit=" W"))


def requested_power_limit(
    gpu: GpuModel, policy: str, power_cap_w: object = None, field: str = "gpucluster_gpu_policy"
) -> tuple[int, str]:
    """The per-GPU limit ``policy`` asks for and its source ("site_cap" or "model_default"), before any
    rack budget; PlanError for a cap outside the model's limits or a power_capped policy without one.
    ``policy``: one of CLOCK_POLICIES, checked by the caller (the site model, or :func:`gpu_clocks`)."""
    if policy == "power_capped" and power_cap_w is None:
        raise PlanError(f"{field}.power_cap_w", None, "a power limit in W, required by clock_policy power_capped")
    if power_cap_w is not None:
        return _power_cap(gpu, power_cap_w, f"{field}.power_cap_w"), "site_cap"
    return _known(gpu.power_default_w, f"{field}.power_cap_w", "default power limit", gpu), "model_default"


def _power(
    gpu: GpuModel,
    policy: str,
    power_cap_w: float | None,
    power_limit: PowerLimit | None,
    requested: tuple[int, str] | None,
    field: str,
) -> tuple[int, str, str, int | None]:
    """(the applied per-GPU limit, its source, the reason, what a reset restores): the power plan's decision
    (``power_limit``), else the limit the policy asks for."""
    requested_w, source = requested or requested_power_limit(gpu, policy, power_cap_w, field)
    reset_power = gpu.power_default_w
    if power_limit is None:
        power = requested_w
        reason = (
            f"{field}.power_cap_w sets {power} W per GPU"
            if source == "site_cap"
            else f"the {gpu.key} default power limit, {power} W per GPU"
        )
    else:
        if power_limit.power_limit_w_uncapped != requested_w:
            raise PlanError(
                f"{field}.power_cap_w",
                power_cap_w,
                f"the limit the power plan was computed for ({power_limit.power_limit_w_uncapped} W)",
            )
        power = power_limit.power_limit_w
        if power != requested_w:  # lowered by the rack budget: still never outside the model's limits
            power = _power_cap(gpu, power, f"{field}.power_cap_w")
        source, reason = power_limit.power_limit_source, power_limit.power_limit_reason
        # stopping the unit must not lift the rack over its budget: never reset above what the rack holds
        reset_power = power_limit.reset_power_limit_w
    return power, source, reason, reset_power


def gpu_clocks(
    gpu: GpuModel,
    policy: str,
    *,
    sm_mhz: int | None = None,
    mem_mhz: int | None = None,
    power_cap_w: float | None = None,
    power_limit: PowerLimit | None = None,
    requested: tuple[int, str] | None = None,
    field: str = "gpucluster_gpu_policy",
) -> ClocksSection:
    """nvidia-smi settings for ``policy`` on ``gpu``; PlanError for anything outside its limits.

    ``power_limit`` is the plan's decision (:func:`power.decide_power_limit`); without it the limit is
    the one the policy asks for (the site's ``power_cap_w`` or the model default). ``requested``: what
    :func:`requested_power_limit` answered for this policy and cap, when the caller has asked it already
    (the plan asks once, for the power plan too, and its site model has checked the policy); without it
    the policy is checked and the limit asked here.
    """
    if requested is None:
        check_choice(policy, f"{field}.clock_policy", CLOCK_POLICIES)
    notes: list[str] = []
    lock_sm: list[int] | None = None
    lock_mem: list[int] | None = None
    if policy == "max_performance":
        top = _known(gpu.max_sm_mhz, f"{field}.clock_policy {policy}", "maximum SM clock", gpu)
        lock_sm = [top, top]
        if gpu.memory_clock_lock and gpu.max_mem_mhz:
            lock_mem = [gpu.max_mem_mhz, gpu.max_mem_mhz]
        if gpu.key in ("h100_sxm", "h200_sxm"):
            notes.append(
                f"SM clock locked at {top} MHz, the device's clocks.max.sm; 2505 MHz (quoted in some "
                "articles) is not a supported H100 clock, and 1830 MHz is NVIDIA's TFLOPS clock, not a lock limit"
            )
    elif policy == "fixed":
        if sm_mhz is None:
            raise PlanError(f"{field}.sm_mhz", None, "an SM clock in MHz, required by clock_policy fixed")
        top = _known(gpu.max_sm_mhz, f"{field}.sm_mhz", "maximum SM clock", gpu)
        sm = int(check_range(sm_mhz, f"{field}.sm_mhz", 1, top, integer=True, unit=f" MHz ({gpu.key} clocks.max.sm)"))
        lock_sm = [sm, sm]
    if mem_mhz is not None:
        if not gpu.memory_clock_lock:
            raise PlanError(f"{field}.mem_mhz", mem_mhz, f"unset: {gpu.key} does not support memory clock locks")
        top_mem = _known(gpu.max_mem_mhz, f"{field}.mem_mhz", "maximum memory clock", gpu)
        mem = int(check_range(mem_mhz, f"{field}.mem_mhz", 1, top_mem, integer=True, unit=" MHz"))
        lock_mem = [mem, mem]
    power, source, reason, reset_power = _power(gpu, policy, power_cap_w, power_limit, requested, field)
    if lock_sm and gpu.power_default_w is not None and power < gpu.power_default_w:
        # a clock lock does not lift the power limit: NVML nvmlClocksEventReasonSwPowerCap, "the clocks have
        # been optimized to ensure not to exceed currently set power limits"
        # (docs.nvidia.com/deploy/nvml-api/api/group__nvmlClocksEventReasons.html)
        notes.append(
            f"power limit {power} W is below the {gpu.key} default {gpu.power_default_w} W: under load the "
            f"GPU may run below the {lock_sm[1]} MHz clock lock (clock event reason SW power cap)"
        )
    apply_args = ["-pm 1"]
    reset_args = []
    if lock_sm:
        apply_args.append(f"-lgc {lock_sm[0]},{lock_sm[1]}")
        reset_args.append("-rgc")
    if lock_mem:
        apply_args.append(f"-lmc {lock_mem[0]},{lock_mem[1]}")
        reset_args.append("-rmc")
    apply_args.append(f"-pl {power}")
    if reset_power is not None:
        reset_args.append(f"-pl {reset_power}")
    return {
        "policy": policy,
        "persistence": True,
        "lock_gpu_clocks": lock_sm,
        "lock_memory_clocks": lock_mem,
        "power_limit_w": power,
        "power_limit_source": source,
        "power_limit_reason": reason,
        "apply_args": apply_args,
        "reset_args": reset_args,
        "notes": notes,
    }
