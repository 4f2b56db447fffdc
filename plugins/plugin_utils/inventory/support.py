"""The support matrix: the operating systems the roles are written and tested for, and the kernel, systemd
and Python they rely on. Data with sources, no I/O; the plan carries it (``plan.support``) and the
preflight (playbooks/preflight.yml, the ``os_support`` filter) checks every host's facts against it
before any change.

- **Debian 12 (bookworm), x86_64: tested.** Every role installs with apt from Debian's archive and
  Debian's package names; every lab scenario runs on a debootstrap of bookworm (tools/lab/setup.sh).
  Debian 12 ships Linux 6.1 (docs/sources.md [F12]), systemd 252 and Python 3.11 ([OS1]). Paths of the
  x86_64 multiarch tree are part of the plan (compute/containers.py ``PYXIS_PLUGIN``:
  /usr/lib/x86_64-linux-gnu/...), so other architectures are not supported.
- **Kernel >= 5.12**: GPUDirect RDMA over DMA-BUF, the path the plan prefers (compute/bringup.py
  ``DMABUF_MIN_KERNEL``), needs the RDMA subsystem's DMA-BUF memory registration of Linux 5.12 ([F8]).
- **systemd >= 249**: the common role's networkd.conf drop-in sets ``ManageForeignRoutes=no`` (systemd
  246) and ``ManageForeignRoutingPolicyRules=no`` (systemd 249) so that systemd-networkd keeps the
  management interface's routes and rules ([OS2]); an older systemd-networkd would drop them (the host's
  management route) when it takes the plan's storage and fabric interfaces.
- **systemd as the service manager**: every service is a systemd unit (slurmd, chrony, the health
  check's timer, the mount units).
- **Python >= 3.10 on the hosts**: the collection's modules use ``zip(strict=True)`` (PEP 618, Python 3.10;
  tests/config.yml ``modules.python_requires``).

Anything else (another distribution, another Debian release, another architecture) is refused by the
preflight, naming the host, what it runs and this list: nothing else is tested here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import SupportSection


@dataclass(frozen=True)
class System:
    """One supported operating system, matched on Ansible's facts."""

    distribution: str  # ansible_distribution
    major_version: str  # ansible_distribution_major_version
    codename: str  # ansible_distribution_release
    architectures: tuple[str, ...]  # ansible_architecture
    kernel: str  # the release's own kernel series (for the messages; the floor is Requirements.kernel_min)
    systemd: int  # the release's systemd
    python: str  # the release's python3
    #: where it is tested here
    tested: str
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.major_version} ({self.codename}) {'/'.join(self.architectures)}"


@dataclass(frozen=True)
class Requirements:
    """What every host must have, whatever its distribution."""

    kernel_min: tuple[int, int]
    systemd_min: int
    service_manager: str
    python_min: tuple[int, int]
    sources: dict[str, str] = field(default_factory=dict)


SYSTEMS: tuple[System, ...] = (
    System(
        distribution="Debian",
        major_version="12",
        codename="bookworm",
        architectures=("x86_64",),
        kernel="6.1",  # docs/sources.md [F12]: linux-image-amd64 -> linux-image-6.1.0-*-amd64
        systemd=252,  # docs/sources.md [OS1]: systemd 252.39-1~deb12u2
        python="3.11",  # docs/sources.md [OS1]: python3 3.11.2-1+b1
        tested="every lab scenario (make molecule): debootstrap of bookworm, tools/lab/setup.sh",
        sources={
            "kernel": "docs/sources.md [F12]",
            "systemd": "docs/sources.md [OS1]",
            "python": "docs/sources.md [OS1]",
            "architectures": "x86_64 multiarch paths in the plan (compute/containers.py PYXIS_PLUGIN)",
        },
    ),
)

REQUIREMENTS = Requirements(
    kernel_min=(5, 12),  # docs/sources.md [F8]: DMA-BUF memory registration (compute/bringup.py DMABUF_MIN_KERNEL)
    systemd_min=249,  # docs/sources.md [OS2]: networkd.conf ManageForeignRoutingPolicyRules= (common role)
    service_manager="systemd",
    python_min=(3, 10),  # PEP 618 zip(strict=True) in the modules (tests/config.yml)
    sources={
        "kernel_min": "docs/sources.md [F8] (GPUDirect RDMA over DMA-BUF, compute/bringup.py)",
        "systemd_min": "docs/sources.md [OS2] (roles/common/templates/networkd-gpucluster.conf.j2)",
        "service_manager": "every service of the roles is a systemd unit",
        "python_min": "PEP 618 zip(strict=True) in plugins/modules (tests/config.yml modules.python_requires)",
    },
)


def _version(numbers: tuple[int, ...]) -> str:
    return ".".join(str(n) for n in numbers)


def support_matrix() -> SupportSection:
    """The supported systems and the floors every host must meet (plan.support), with their sources, and the
    one-line list the preflight's messages name (summary)."""
    req = REQUIREMENTS
    systems = []
    for system in SYSTEMS:
        entry = asdict(system)
        entry["architectures"] = list(system.architectures)
        entry["label"] = system.label
        systems.append(entry)
    floors = (
        f"kernel >= {_version(req.kernel_min)}, {req.service_manager} >= {req.systemd_min},"
        f" Python >= {_version(req.python_min)}"
    )
    return {
        "systems": systems,
        "kernel_min": _version(req.kernel_min),
        "systemd_min": req.systemd_min,
        "service_manager": req.service_manager,
        "python_min": _version(req.python_min),
        "sources": dict(req.sources),
        "summary": f"{' or '.join(s.label for s in SYSTEMS)}; {floors}",
    }
