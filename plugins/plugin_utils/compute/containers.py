"""Training jobs in containers: the runtime a compute node gets and what every job container sees.

Inventory ``gpucluster_containers`` (optional; ``runtime: none`` by default):

- ``runtime``: ``pyxis`` (Enroot + the Pyxis SPANK plugin: ``srun --container-image=nvcr.io#nvidia/pytorch:...``,
  docs/sources.md [CR2] [CR3]), ``oci`` (Slurm's own ``srun --container=<OCI bundle>`` through ``oci.conf``
  and runc, with the NVIDIA Container Toolkit's OCI hook, [CR1] [CR4]) or ``none``. The Kubernetes path
  installs nothing (the GPU Operator carries the toolkit): ``none`` there, and its Ray templates use the
  same mounts and environment (kubernetes/manifests.py).
- ``registries``: ``[{host, credential}]``: a registry and the NAME of its credential in the site's secret
  store, for the record; the secret itself never enters the inventory or the plan, and no node gets it:
  neither runtime reads a system-wide credential (Slurm's oci runs local bundles and pulls nothing; Enroot
  reads only the user's own ``$ENROOT_CONFIG_PATH/.credentials`` [CR2]), so each user keeps their own key.
- ``pyxis_source``: ``{url, sha256}``: the Pyxis release tarball (https) the compute role builds when the
  site has no Pyxis package, and its sha256, checked before the build.
- ``cache``: ``{path, size_gb, local_capacity_gb}``: where images are cached on the node's local NVMe
  (default ``<gpucluster_storage.local_scratch>/containers``), how much it may hold (default
  :data:`CACHE_SIZE_GB`), and the usable size of that local scratch when the site knows it (the cache
  and the async checkpoints' staging space share it).
- ``mounts``: extra host paths every job container gets, each inside a planned file system (the shared
  paths or the local scratch).

What the plan gives every job container, whatever the runtime (the same lists for Slurm and Kubernetes):
the mounts (the shared file system's planned paths, the checkpoint staging folder, the extra ones), the
environment (nccl.conf's keys and values: the HCAs, the socket interface, ...) and the devices (the GPUs,
the RDMA devices of the fabric).

Pure functions of plain data; no I/O.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    ContainerCache,
    ContainersConfig,
    ContainersSection,
    EnrootPlan,
    OciPlan,
    PyxisSource,
    Registry,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)

FIELD = "gpucluster_containers"
RUNTIMES = ("pyxis", "oci", "none")
#: Default image cache size per node: an NGC PyTorch image is ~10 GB compressed, ~20 GB as an Enroot
#: squashfs (docs/sources.md [CR5]); 200 GB keeps about ten of them (a project choice).
CACHE_SIZE_GB = 200
#: The cache's folder under the local scratch when the site names none (a project choice).
CACHE_DIR = "containers"
#: The plan's container settings as the OCI wrapper reads them (oci runtime; roles/compute).
CONFIG_FILE = "/etc/gpucluster/containers.json"
#: The program oci.conf's RunTimeRun calls: adds the plan's mounts, environment and devices to the
#: bundle Slurm generated, then runs runc (roles/compute/files/gpucluster-oci-run).
OCI_WRAPPER = "/usr/local/libexec/gpucluster/gpucluster-oci-run"
#: The job containers' bundles and state, on tmpfs: root's, mode 0755 (no user can create anything in
#: it, so no user can plant a folder or a link that root later uses; docs/containers.md "Who runs runc").
OCI_RUN_DIR = "/run/gpucluster-containers"
OCI_RUN_DIR_MODE = "0755"
#: Slurm's per-step bundle folder (ContainerPath, oci.conf [CR1]: %j job, %s step, %t task): slurmstepd
#: makes it as root (mode 0750) and hands it to the job's user; the epilog removes a job's folders.
OCI_CONTAINER_PATH = f"{OCI_RUN_DIR}/job-%j.%s.%t"
#: runc's state (--root) inside that folder: the user's to write, so runc only ever runs as the user on
#: it (the wrapper drops root first); runc makes it (mode 0700).
OCI_STATE_ROOT = f"{OCI_CONTAINER_PATH}/runc"
#: The container id Slurm passes to the runtime: node, user, job, step, task ([CR1] "OCI Pattern").
OCI_ID = "%n.%u.%j.%s.%t"
#: Enroot's runtime folders (tmpfs): root's, one ``user-<uid>`` folder per user made by root.
ENROOT_RUNTIME_ROOT = "/run/enroot"
ENROOT_ROOT_MODE = "0755"
#: The SPANK plugin line of Pyxis ([CR3]: "required /usr/local/lib/slurm/spank_pyxis.so" in plugstack.conf).
PYXIS_PLUGIN = "/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_pyxis.so"
#: Enroot's NVIDIA hook (enroot+caps ships hooks.d/98-nvidia.sh; it calls nvidia-container-cli, [CR2] [CR4]).
ENROOT_NVIDIA_HOOK = "/etc/enroot/hooks.d/98-nvidia.sh"
#: The NVIDIA Container Toolkit's OCI prestart hook (nvidia-container-toolkit, [CR4]).
OCI_NVIDIA_HOOK = "/usr/bin/nvidia-container-runtime-hook"
#: GPU device nodes besides /dev/nvidiaN ([CR4]: what nvidia-container-cli mounts for compute).
GPU_CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
#: The RDMA devices (uverbs, rdma_cm) of an InfiniBand or RoCE fabric: the folder, whatever the HCA count.
RDMA_DEVICE_DIR = "/dev/infiniband"

_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_HOST = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?\Z")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z")


@dataclass(frozen=True)
class Mount:
    """A host path every job container gets at the same path."""

    source: str
    target: str
    options: str  # "rw" or "ro"
    why: str


def _inside(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/")


def _abs(value: object, field: str, what: str) -> str:
    require(
        isinstance(value, str) and value.startswith("/") and "\n" not in value and " " not in value,
        field,
        value,
        f"an absolute path without spaces ({what})",
    )
    return posixpath.normpath(str(value))


def _registries(raw: object) -> list[Registry]:
    field = f"{FIELD}.registries"
    require(isinstance(raw, list), field, raw, "a list of {host, credential}")
    if not isinstance(raw, list):  # narrowed by the require above
        raise AssertionError(raw)
    out: list[Registry] = []
    for i, entry in enumerate(raw):
        where = f"{field}[{i}]"
        require(isinstance(entry, dict), where, entry, "a mapping {host, credential}")
        secret_keys = sorted(set(entry) & {"password", "token", "secret", "username", "auth"})
        require(
            not secret_keys,
            f"{where}.{secret_keys[0] if secret_keys else ''}",
            "<hidden>",
            "no secret in the inventory: name the credential (credential: NAME); the secret stays in the "
            "site's secret store and each user's own Enroot credentials file (docs/containers.md, Credentials)",
        )
        host = entry.get("host")
        require(
            isinstance(host, str) and bool(_HOST.match(host)), f"{where}.host", host, "a registry host name (nvcr.io)"
        )
        cred = entry.get("credential")
        require(
            cred is None or (isinstance(cred, str) and bool(_NAME.match(cred))),
            f"{where}.credential",
            cred,
            "the name of a credential in the site's secret store (letters, digits, '_'), or none (anonymous)",
        )
        out.append({"host": str(host), "credential": cred})
    hosts = [r["host"] for r in out]
    require(len(set(hosts)) == len(hosts), field, hosts, "each registry host once")
    return out


def _pyxis_source(raw: object) -> PyxisSource | None:
    """The Pyxis release tarball the role builds when the site has no Pyxis package: an https URL and the
    sha256 the site checked (the role verifies the download against it before building as root)."""
    field = f"{FIELD}.pyxis_source"
    if raw is None:
        return None
    require(isinstance(raw, dict), field, raw, "a mapping {url, sha256}")
    if not isinstance(raw, dict):  # narrowed by the require above
        raise AssertionError(raw)
    unknown = sorted(set(raw) - {"url", "sha256"})
    require(not unknown, f"{field}.{unknown[0] if unknown else ''}", unknown, "keys url, sha256")
    url = raw.get("url")
    require(
        isinstance(url, str) and url.startswith("https://") and not any(c.isspace() for c in url) and len(url) > 8,
        f"{field}.url",
        url,
        "an https:// URL of a Pyxis release tarball (no http, no path)",
    )
    sha = raw.get("sha256")
    require(
        isinstance(sha, str) and bool(_SHA256.match(sha.lower())),
        f"{field}.sha256",
        sha,
        "the tarball's sha256 (64 hexadecimal digits, as sha256sum prints it): required, the download is "
        "checked against it before Pyxis is built as root",
    )
    return {"url": str(url), "sha256": str(sha).lower()}


def _cache(raw: object, local_scratch: str | None, shared_roots: list[str], staging_bytes: int) -> ContainerCache:
    field = f"{FIELD}.cache"
    require(isinstance(raw, dict), field, raw, "a mapping {path, size_gb, local_capacity_gb}")
    if not isinstance(raw, dict):  # narrowed by the require above
        raise AssertionError(raw)
    require(
        bool(local_scratch),
        "gpucluster_storage.local_scratch",
        local_scratch,
        "the node-local NVMe scratch folder: the container image cache lives there",
    )
    scratch = posixpath.normpath(str(local_scratch))
    path = _abs(raw.get("path", posixpath.join(scratch, CACHE_DIR)), f"{field}.path", "on the local NVMe scratch")
    for root in shared_roots:
        require(
            not _inside(path, root),
            f"{field}.path",
            path,
            f"a folder on the node-local NVMe scratch {scratch}, not on the shared file system {root} "
            "(every node would write its own cache into one file system)",
        )
    require(
        _inside(path, scratch) and path != scratch,
        f"{field}.path",
        path,
        f"a folder inside the node-local NVMe scratch {scratch} (gpucluster_storage.local_scratch)",
    )
    size = int(check_range(raw.get("size_gb", CACHE_SIZE_GB), f"{field}.size_gb", 1, 1_000_000, integer=True))
    capacity = raw.get("local_capacity_gb")
    staging_gb = staging_bytes / 1e9
    if capacity is not None:
        capacity = int(check_range(capacity, f"{field}.local_capacity_gb", 1, 10_000_000, integer=True))
        require(
            size + staging_gb <= capacity,
            f"{field}.size_gb",
            size,
            f"at most {max(capacity - staging_gb, 0):.0f} GB: the local scratch {scratch} holds {capacity} GB "
            f"({field}.local_capacity_gb) and the checkpoint staging takes {staging_gb:.0f} GB of it",
        )
    return {
        "path": path,
        "size_gb": size,
        "filesystem": scratch,
        "local_capacity_gb": capacity,
        "staging_gb": round(staging_gb, 1),
    }


def _mounts(
    extra: object, paths: dict[str, str], staging: str | None, shared_roots: list[str], local_scratch: str | None
) -> list[Mount]:
    field = f"{FIELD}.mounts"
    out = [Mount(p, p, "rw", f"gpucluster_storage.paths.{k}") for k, p in sorted(paths.items())]
    if staging:
        out.append(Mount(staging, staging, "rw", "checkpoint staging (gpucluster_workload.checkpoint_async)"))
    require(isinstance(extra, list), field, extra, "a list of absolute host paths")
    if not isinstance(extra, list):  # narrowed by the require above
        raise AssertionError(extra)
    planned = [*shared_roots, *paths.values(), *([local_scratch] if local_scratch else [])]
    for i, raw in enumerate(extra):
        path = _abs(raw, f"{field}[{i}]", "a host path inside a planned file system")
        require(
            any(_inside(path, root) for root in planned),
            f"{field}[{i}]",
            raw,
            "a path inside a planned file system: " + ", ".join(sorted(set(planned))),
        )
        out.append(Mount(path, path, "rw", f"{field}[{i}]"))
    seen: dict[str, str] = {}
    unique = []
    for m in out:
        if m.target not in seen:
            seen[m.target] = m.why
            unique.append(m)
    return unique


def devices(gpus_per_node: int, fabric_type: str) -> list[str]:
    """The device nodes a job container gets: the GPUs, their control devices, the RDMA devices."""
    gpus = [f"/dev/nvidia{i}" for i in range(gpus_per_node)]
    rdma = [RDMA_DEVICE_DIR] if fabric_type in RDMA_FABRICS else []
    return [*gpus, *GPU_CONTROL_DEVICES, *rdma]


def enroot_user_roots(cache_path: str) -> dict[str, str]:
    """Enroot's folders by setting: each a folder of root's (mode 0755), in which root makes each job
    user's ``user-<uid>`` folder (mode 0700, the user's) before the job (the Prolog). Enroot itself makes
    its folders with ``mkdir -p`` as the user ([CR2]): in a folder every user may write, the first user
    to name another's folder would own it, so no such folder exists here."""
    return {
        "ENROOT_RUNTIME_PATH": ENROOT_RUNTIME_ROOT,
        "ENROOT_CACHE_PATH": f"{cache_path}/enroot-cache",
        "ENROOT_DATA_PATH": f"{cache_path}/enroot-data",
        "ENROOT_TEMP_PATH": f"{cache_path}/enroot-tmp",
    }


def enroot_conf(cache_path: str) -> dict[str, str]:
    """enroot.conf ([CR2]): runtime, image cache, container data and temporary files per user (the image
    cache too: a layer one user wrote is never another's), on the local NVMe (runtime on tmpfs), each in
    a folder root made for that user; home mounted, the GPUs and RDMA through the hooks."""
    per_user = {key: f"{root}/user-$(id -u)" for key, root in enroot_user_roots(cache_path).items()}
    return {
        **per_user,
        "ENROOT_SQUASH_OPTIONS": "-noI -noD -noF -noX -no-duplicates",
        "ENROOT_MOUNT_HOME": "yes",
        "ENROOT_RESTRICT_DEV": "yes",
        "ENROOT_ROOTFS_WRITABLE": "yes",
        # per-user limits of an import: parallel layer downloads and decompression
        "ENROOT_MAX_CONNECTIONS": "10",
        "ENROOT_MAX_PROCESSORS": "$(nproc)",
    }


def oci_conf() -> dict[str, str]:
    """oci.conf ([CR1], Slurm 22.05 keys): every runtime command through the plan's wrapper (which adds the
    plan's mounts, environment and devices to the bundle, and runs runc as the job's user only), runc
    rootless with its state in the task's bundle folder, one bundle folder per task."""
    wrap = f"{OCI_WRAPPER} --user %u --root {OCI_STATE_ROOT}"
    return {
        "ContainerPath": OCI_CONTAINER_PATH,
        "RunTimeQuery": f"{wrap} state {OCI_ID}",
        "RunTimeKill": f"{wrap} kill -a {OCI_ID}",
        "RunTimeDelete": f"{wrap} delete --force {OCI_ID}",
        "RunTimeRun": f"{wrap} run --bundle %b {OCI_ID}",
    }


def _shared_roots(storage: Mapping[str, object]) -> list[str]:
    """The mount points of the shared file system plan["storage"] names (its ``type`` section)."""
    kind = storage.get(str(storage.get("type")))
    if not isinstance(kind, dict):
        return []
    exports = kind.get("exports") or []
    roots = [kind.get("mount_point")] + [e.get("mount_point") for e in exports if isinstance(e, dict)]
    return sorted({posixpath.normpath(r) for r in roots if isinstance(r, str)})


def _staging(storage: Mapping[str, object]) -> tuple[str | None, int]:
    """The checkpoint drain's staging folder (None: no drain) and the bytes it takes on the local scratch."""
    drain = storage.get("checkpoint_drain") or {}
    if not isinstance(drain, dict):
        return None, 0
    staging = drain.get("staging_path") if drain.get("enabled") else None
    return (str(staging) if staging else None), int(drain.get("staging_bytes") or 0)


def _enroot(cache: ContainerCache, pyxis_source: PyxisSource | None) -> EnrootPlan:
    roots = sorted(enroot_user_roots(cache["path"]).values())
    return {
        "conf": enroot_conf(cache["path"]),
        "nvidia_hook": ENROOT_NVIDIA_HOOK,
        "plugin": PYXIS_PLUGIN,
        # root's folders (mode 0755; /run/enroot: tmpfiles.d) holding each user's user-<uid> folder
        "user_roots": roots,
        "runtime_root": ENROOT_RUNTIME_ROOT,
        "folders": [{"path": p, "mode": ENROOT_ROOT_MODE} for p in roots],
        "pyxis_source": pyxis_source,
    }


def _oci(lab: bool) -> OciPlan:
    return {
        "conf": oci_conf(),
        "wrapper": OCI_WRAPPER,
        "run_dir": OCI_RUN_DIR,
        "run_dir_mode": OCI_RUN_DIR_MODE,
        "state_root": OCI_STATE_ROOT,
        "container_path": OCI_CONTAINER_PATH,
        "nvidia_hook": OCI_NVIDIA_HOOK,
        # the lab's nodes are containers without CAP_SYS_ADMIN: runc runs rootless there, without a
        # PID namespace and with the node's /proc (docs/containers.md, "In the lab")
        "nested": lab,
    }


def containers_plan(
    raw: object,
    *,
    scheduler: str,
    storage: Mapping[str, object],
    nccl_conf: dict[str, str],
    gpus_per_node: int,
    fabric_type: str,
    lab: bool,
) -> ContainersSection:
    """plan["containers"]: the runtime, its files' settings, and the mounts, environment and devices of
    every job container. ``storage``: plan["storage"] (paths, local scratch, the checkpoint drain)."""
    raw = {} if raw is None else raw
    require(isinstance(raw, dict), FIELD, raw, "a mapping {runtime, registries, cache, mounts, pyxis_source}")
    if not isinstance(raw, dict):  # narrowed by the require above
        raise AssertionError(raw)
    known = {"runtime", "registries", "cache", "mounts", "pyxis_source"}
    unknown = sorted(set(raw) - known)
    require(not unknown, f"{FIELD}.{unknown[0] if unknown else ''}", unknown, "keys " + ", ".join(sorted(known)))
    requested = check_choice(raw.get("runtime", "none"), f"{FIELD}.runtime", RUNTIMES)
    # the Kubernetes path installs no runtime: the GPU Operator brings the NVIDIA Container Toolkit, and the
    # Ray templates use the same mounts and environment (kubernetes/manifests.py)
    runtime = "none" if scheduler == "kubernetes" else requested
    shared_roots = _shared_roots(storage)
    raw_paths = storage.get("paths") or {}
    paths = {str(k): str(v) for k, v in raw_paths.items() if isinstance(v, str)} if isinstance(raw_paths, dict) else {}
    staging, staging_bytes = _staging(storage)
    scratch = storage.get("local_scratch")
    local_scratch = scratch if isinstance(scratch, str) else None
    mounts = _mounts(raw.get("mounts", []), paths, staging, shared_roots, local_scratch)
    registries = _registries(raw.get("registries", []))
    pyxis_source = _pyxis_source(raw.get("pyxis_source"))
    out: ContainersSection = {
        "runtime": runtime,
        "enabled": runtime != "none",
        "reason": (
            f"{FIELD}.runtime {requested} applies to Slurm: on Kubernetes the GPU Operator carries the toolkit"
            if runtime != requested
            else f"{FIELD}.runtime {requested}"
        ),
        "mounts": [{"source": m.source, "target": m.target, "options": m.options, "why": m.why} for m in mounts],
        "env": dict(sorted(nccl_conf.items())),
        "devices": devices(gpus_per_node, fabric_type),
        "registries": registries,
        "config_file": CONFIG_FILE,
        "cache": None,
        "enroot": None,
        "oci": None,
    }
    if runtime == "none":
        return out
    cache = _cache(raw.get("cache", {}), local_scratch, shared_roots, staging_bytes)
    out["cache"] = cache
    if runtime == "pyxis":
        out["enroot"] = _enroot(cache, pyxis_source)
    else:
        oci = _oci(lab)
        out["oci"] = oci
        oci["config"] = config_json(out)  # /etc/gpucluster/containers.json, read by the wrapper
    return out


def config_json(plan_containers: ContainersSection) -> ContainersConfig:
    """/etc/gpucluster/containers.json: what the OCI wrapper adds to every bundle (plain data)."""
    oci = plan_containers.get("oci")
    return {
        "run_dir": oci["run_dir"] if oci else None,
        "mounts": [
            {"source": m["source"], "target": m["target"], "options": m["options"]} for m in plan_containers["mounts"]
        ],
        "env": plan_containers["env"],
        "devices": plan_containers["devices"],
        "nvidia_hook": oci["nvidia_hook"] if oci else None,
        "nested": bool(oci["nested"]) if oci else False,
    }


__all__ = [
    "CACHE_SIZE_GB",
    "FIELD",
    "RUNTIMES",
    "Mount",
    "PlanError",
    "config_json",
    "containers_plan",
    "devices",
    "enroot_conf",
    "oci_conf",
]
