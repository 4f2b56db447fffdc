"""Hardware catalog: what each GPU model can do, with the source of every number.

Numbers come from ../shared/reference/dossier.md section 1 (tags such as [S1] name the
dossier's sources). Where the dossier found no value the field is None, and the engine
refuses to plan anything that needs it unless the inventory (or gpu_facts, read from the
hardware at run time) supplies it: the hardware wins over this table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError


@dataclass(frozen=True)
class GpuModel:
    key: str
    name: str  # nvidia-smi product name
    form_factor: str  # sxm | pcie
    max_sm_mhz: int | None  # nvidia-smi clocks.max.sm: the upper bound of -lgc
    max_mem_mhz: int | None  # nvidia-smi clocks.max.mem: the upper bound of -lmc
    power_min_w: int | None
    power_default_w: int | None
    power_max_w: int | None
    memory_gb: float
    memory_bw_tbs: float | None
    nvlink_gen: int | None
    nvlink_gbs: int | None  # per GPU, bidirectional
    temp_max_operating_c: int | None
    temp_slowdown_c: int | None
    temp_shutdown_c: int | None
    memory_clock_lock: bool  # nvidia-smi -lmc: NVML says Ampere or newer fully supported devices [S26]
    sources: dict[str, str] = field(default_factory=dict)


GPUS: dict[str, GpuModel] = {
    "h100_sxm": GpuModel(
        key="h100_sxm",
        name="NVIDIA H100 80GB HBM3",
        form_factor="sxm",
        # dossier 1.1 [S1][S2]: nvidia-smi "Max Clocks / SM" 1980 MHz. The articles' "-lgc 2505"
        # is not a supported clock; 1830 MHz [S10] is NVIDIA's TFLOPS clock, not the lock limit.
        max_sm_mhz=1980,
        max_mem_mhz=2619,  # dossier 1.1 [S1][S2]
        power_min_w=200,  # dossier 1.1 [S1][S2]: 200-700 W, 700 W default
        power_default_w=700,
        power_max_w=700,
        memory_gb=80,  # dossier 1.1 [S10][S11]: 80 GB HBM3, 3.35 TB/s
        memory_bw_tbs=3.35,
        nvlink_gen=4,  # dossier 1.1 [S11][S12][S18]: NVLink4, 900 GB/s bidirectional
        nvlink_gbs=900,
        temp_max_operating_c=87,  # dossier 1.2 [S2]: 92 / 89 / 87 C (H800 = H100 SXM5 board)
        temp_slowdown_c=89,
        temp_shutdown_c=92,
        memory_clock_lock=True,
        sources={"clocks": "dossier 1.1 [S1][S2]", "power": "dossier 1.1 [S1][S2]", "thermal": "dossier 1.2 [S2]"},
    ),
    "h100_pcie": GpuModel(
        key="h100_pcie",
        name="NVIDIA H100 PCIe",
        form_factor="pcie",
        max_sm_mhz=1755,  # dossier 1.1 [S12]: 1755 MHz boost (spec; no nvidia-smi log found)
        max_mem_mhz=1593,  # dossier 1.1: 1593 MHz, confidence L
        power_min_w=None,  # dossier 1.1: min not verified
        power_default_w=350,  # dossier 1.1 [S14][S15]: 350 W max TDP
        power_max_w=350,
        memory_gb=80,  # dossier 1.1 [S10][S14]: 80 GB HBM2e, 2.0 TB/s
        memory_bw_tbs=2.0,
        nvlink_gen=4,  # dossier 1.1 [S12]: NVLink4 bridge 600 GB/s
        nvlink_gbs=600,
        temp_max_operating_c=None,  # dossier 1.2: not found
        temp_slowdown_c=None,
        temp_shutdown_c=None,
        memory_clock_lock=True,
        sources={"clocks": "dossier 1.1 [S12]", "power": "dossier 1.1 [S14][S15]"},
    ),
    "h100_nvl": GpuModel(
        key="h100_nvl",
        name="NVIDIA H100 NVL",
        form_factor="pcie",
        max_sm_mhz=1785,  # dossier 1.1 [S3]
        max_mem_mhz=2619,  # dossier 1.1 [S3]
        power_min_w=200,  # dossier 1.1 [S3]: observed default 310 W, range 200-400 W (marketed 350-400 W [S16])
        power_default_w=310,
        power_max_w=400,
        memory_gb=94,  # dossier 1.1 [S10]: 94 GB HBM3, 3.9 TB/s
        memory_bw_tbs=3.9,
        nvlink_gen=4,  # dossier 1.1: NVLink4 bridge 600 GB/s (confidence L)
        nvlink_gbs=600,
        # dossier 1.2 [S3]: T.Limit form only (-8/-2/0 C headroom); T.Limit point ~87 C
        temp_max_operating_c=87,
        temp_slowdown_c=89,
        temp_shutdown_c=None,  # do not convert the T.Limit shutdown headroom blindly (dossier 1.2)
        memory_clock_lock=True,
        sources={"clocks": "dossier 1.1 [S3]", "power": "dossier 1.1 [S3][S16]", "thermal": "dossier 1.2 [S3]"},
    ),
    "h200_sxm": GpuModel(
        key="h200_sxm",
        name="NVIDIA H200",
        form_factor="sxm",
        max_sm_mhz=1980,  # dossier 1.1 [S4]
        max_mem_mhz=3201,  # dossier 1.1 [S4]
        power_min_w=200,  # dossier 1.1 [S4]: 200-700 W, 700 W default
        power_default_w=700,
        power_max_w=700,
        memory_gb=141,  # dossier 1.1 [S10][S17]: 141 GB HBM3e, 4.8 TB/s
        memory_bw_tbs=4.8,
        nvlink_gen=4,  # dossier 1.1 [S17]: 18 links, 900 GB/s
        nvlink_gbs=900,
        temp_max_operating_c=87,  # dossier 1.2 [S4]: T.Limit form; T.Limit point 28+59 = 87 C
        temp_slowdown_c=89,
        temp_shutdown_c=None,
        memory_clock_lock=True,
        sources={"clocks": "dossier 1.1 [S4]", "power": "dossier 1.1 [S4]", "thermal": "dossier 1.2 [S4]"},
    ),
    "a100_sxm4": GpuModel(
        key="a100_sxm4",
        name="NVIDIA A100-SXM4-80GB",
        form_factor="sxm",
        max_sm_mhz=1410,  # dossier 1.1 [S5]
        max_mem_mhz=1593,  # dossier 1.1 [S5]
        power_min_w=100,  # dossier 1.1 [S5]: 100-400 W, 400 W default
        power_default_w=400,
        power_max_w=400,
        memory_gb=80,  # dossier 1.1 [S10]: 80 GB HBM2e, 2.039 TB/s
        memory_bw_tbs=2.039,
        nvlink_gen=3,  # dossier 1.1 [S18]: NVLink3 600 GB/s
        nvlink_gbs=600,
        temp_max_operating_c=85,  # dossier 1.2 [S5]: 92 / 89 / 85 C
        temp_slowdown_c=89,
        temp_shutdown_c=92,
        memory_clock_lock=True,
        sources={"clocks": "dossier 1.1 [S5]", "power": "dossier 1.1 [S5]", "thermal": "dossier 1.2 [S5]"},
    ),
    "a100_pcie": GpuModel(
        key="a100_pcie",
        name="NVIDIA A100 80GB PCIe",
        form_factor="pcie",
        max_sm_mhz=1410,  # dossier 1.1 [S6]
        max_mem_mhz=1512,  # dossier 1.1 [S6]
        power_min_w=150,  # dossier 1.1 [S6]: 150-300 W, 300 W default
        power_default_w=300,
        power_max_w=300,
        memory_gb=80,  # dossier 1.1 [S10]: 1.935 TB/s
        memory_bw_tbs=1.935,
        nvlink_gen=3,  # dossier 1.1: NVLink3 bridge 600 GB/s (confidence L)
        nvlink_gbs=600,
        temp_max_operating_c=85,  # dossier 1.2 [S6]
        temp_slowdown_c=89,
        temp_shutdown_c=92,
        memory_clock_lock=True,
        sources={"clocks": "dossier 1.1 [S6]", "power": "dossier 1.1 [S6]", "thermal": "dossier 1.2 [S6]"},
    ),
    "b200": GpuModel(
        key="b200",
        name="NVIDIA B200",
        form_factor="sxm",
        max_sm_mhz=1965,  # dossier 1.1 [S10]: device-reported max SM
        max_mem_mhz=3996,  # dossier 1.1 [S10]
        power_min_w=None,  # dossier 1.1: not found
        power_default_w=1000,  # dossier 1.1 [S10][S19]: 1000 W max TGP, observed cap 1000 W
        power_max_w=1000,
        memory_gb=180,  # dossier 1.1 [S10][S19]: 180 GB usable, 8.0 TB/s
        memory_bw_tbs=8.0,
        nvlink_gen=5,  # dossier 1.1 [S18]: NVLink5 1.8 TB/s bidirectional
        nvlink_gbs=1800,
        temp_max_operating_c=None,  # dossier 1.2 / 10.8: not found for B200
        temp_slowdown_c=None,
        temp_shutdown_c=None,
        memory_clock_lock=True,
        sources={"clocks": "dossier 1.1 [S10]", "power": "dossier 1.1 [S10][S19]"},
    ),
    "l40s": GpuModel(
        key="l40s",
        name="NVIDIA L40S",
        form_factor="pcie",
        max_sm_mhz=2520,  # dossier 1.1 [S7]
        max_mem_mhz=9001,  # dossier 1.1 [S7]: GDDR6 "effective"
        power_min_w=100,  # dossier 1.1 [S7]: 100-350 W, 350 W default
        power_default_w=350,
        power_max_w=350,
        memory_gb=48,  # dossier 1.1 [S10]: 48 GB GDDR6, 864 GB/s
        memory_bw_tbs=0.864,
        nvlink_gen=None,  # dossier 1.1 [S7]: none (PCIe Gen4 x16)
        nvlink_gbs=None,
        temp_max_operating_c=87,  # dossier 1.2 [S7]: T.Limit form; T.Limit point 30+57 = 87 C
        temp_slowdown_c=89,
        temp_shutdown_c=None,
        memory_clock_lock=True,
        sources={"clocks": "dossier 1.1 [S7]", "power": "dossier 1.1 [S7]", "thermal": "dossier 1.2 [S7]"},
    ),
    "rtx_pro_6000": GpuModel(
        key="rtx_pro_6000",
        name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
        form_factor="pcie",
        max_sm_mhz=None,  # dossier 1.1: not found
        max_mem_mhz=None,
        power_min_w=None,  # dossier 1.1 [S22]: default = max = 600 W observed; min not found
        power_default_w=600,
        power_max_w=600,
        memory_gb=96,  # dossier 1.1 [S22]: 96 GB GDDR7; bandwidth conflicting (1.597 vs 1.792 TB/s [S23])
        memory_bw_tbs=None,
        nvlink_gen=None,  # dossier 1.1: none (PCIe Gen5 x16)
        nvlink_gbs=None,
        temp_max_operating_c=None,  # dossier 1.2: not found
        temp_slowdown_c=None,
        temp_shutdown_c=None,
        memory_clock_lock=False,
        sources={"power": "dossier 1.1 [S22]", "memory": "dossier 1.1 [S22][S23]"},
    ),
}


def gpu_model(key: str, field: str = "gpucluster_node.gpu_model") -> GpuModel:
    """The catalog entry for ``key``; PlanError listing the known models otherwise."""
    if key not in GPUS:
        raise PlanError(field, key, "one of " + ", ".join(sorted(GPUS)))
    return GPUS[key]


def gpu_model_as_dict(model: GpuModel) -> dict[str, Any]:
    return asdict(model)
