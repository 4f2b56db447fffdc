#!/usr/bin/env python3
"""The Pod Security Standards' ``baseline`` and ``restricted`` levels as a check of a pod spec, offline.

kubeconform and the schema checks cannot run admission; this module does what Pod Security Admission
does with a pod in a namespace labelled ``pod-security.kubernetes.io/enforce: <level>``: it lists the
level's rules the pod breaks, one line each, by the table of
https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the controls of Kubernetes 1.35;
admission itself: https://kubernetes.io/docs/concepts/security/pod-security-admission/).

- :func:`violations` (level, pod spec[, pod metadata]) -> the broken rules ([] = admitted);
- :func:`pod_templates` finds every pod spec in an object (a Pod, a workload's ``template``, the
  Ray templates' head and worker groups);
- :func:`check_manifests` checks a set of rendered objects: every Namespace carries an ``enforce``
  level of at least ``baseline``, and every pod template in a namespace satisfies that namespace's level
  (validate_manifests.py runs it).

A namespace without the label admits everything (``privileged``, Pod Security Admission's default).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

PSA = "pod-security.kubernetes.io"
LEVELS = ("privileged", "baseline", "restricted")

#: baseline "Capabilities": what a container may add
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
#: baseline "Sysctls": the safe set (the namespaced sysctls that cannot affect other pods or the node)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
#: baseline "SELinux": the types a pod may ask for
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
#: restricted "Volume Types": the only volume sources allowed
RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)
#: the fields of a volume that are not its source
_VOLUME_META = frozenset({"name"})
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _containers(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for key in _CONTAINER_LISTS:
        for i, c in enumerate(spec.get(key) or []):
            yield f"{key}[{i}]", c


def _baseline(spec: dict[str, Any], metadata: dict[str, Any]) -> list[str]:
    out: list[str] = []
    psc = spec.get("securityContext") or {}
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        out.append("HostProcess: spec.securityContext.windowsOptions.hostProcess is true")
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(f"Host Namespaces: spec.{field} is true")
    for i, vol in enumerate(spec.get("volumes") or []):
        if "hostPath" in vol:
            out.append(f"HostPath Volumes: spec.volumes[{i}] ({vol.get('name')}) is a hostPath")
    for name, value in (metadata.get("annotations") or {}).items():
        if name.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            out.append(f"AppArmor: annotation {name} is {value!r}")
    out += _baseline_context(psc, "spec.securityContext")
    for i, sysctl in enumerate(psc.get("sysctls") or []):
        if sysctl.get("name") not in SAFE_SYSCTLS:
            out.append(f"Sysctls: spec.securityContext.sysctls[{i}] {sysctl.get('name')!r} is not in the safe set")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"HostProcess: spec.{where}.securityContext.windowsOptions.hostProcess is true")
        if sc.get("privileged"):
            out.append(f"Privileged Containers: spec.{where}.securityContext.privileged is true")
        added = [cap for cap in (sc.get("capabilities") or {}).get("add") or [] if cap not in BASELINE_CAPABILITIES]
        if added:
            out.append(f"Capabilities: spec.{where}.securityContext.capabilities.add has {', '.join(added)}")
        for j, port in enumerate(c.get("ports") or []):
            if port.get("hostPort"):
                out.append(f"Host Ports: spec.{where}.ports[{j}].hostPort is {port['hostPort']}")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"/proc Mount Type: spec.{where}.securityContext.procMount is {sc['procMount']!r}")
        out += _baseline_context(sc, f"spec.{where}.securityContext")
    return out


def _baseline_context(sc: dict[str, Any], where: str) -> list[str]:
    """The rules a pod's and a container's securityContext share: AppArmor, SELinux, seccomp."""
    out = []
    apparmor = (sc.get("appArmorProfile") or {}).get("type")
    if apparmor not in (None, "RuntimeDefault", "Localhost"):
        out.append(f"AppArmor: {where}.appArmorProfile.type is {apparmor!r}")
    selinux = sc.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in SELINUX_TYPES:
        out.append(f"SELinux: {where}.seLinuxOptions.type is {selinux['type']!r}")
    for field in ("user", "role"):
        if selinux.get(field):
            out.append(f"SELinux: {where}.seLinuxOptions.{field} is set")
    if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append(f"Seccomp: {where}.seccompProfile.type is Unconfined")
    return out


def _restricted(spec: dict[str, Any]) -> list[str]:
    out: list[str] = []
    psc = spec.get("securityContext") or {}
    for i, vol in enumerate(spec.get("volumes") or []):
        source = sorted(set(vol) - _VOLUME_META)
        if not set(source) <= RESTRICTED_VOLUMES:
            out.append(f"Volume Types: spec.volumes[{i}] ({vol.get('name')}) is {', '.join(source)}")
    if psc.get("runAsUser") == 0:
        out.append("Running as Non-root user: spec.securityContext.runAsUser is 0")
    pod_nonroot = psc.get("runAsNonRoot")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    containers = list(_containers(spec))
    if pod_nonroot is False:
        out.append("Running as Non-root: spec.securityContext.runAsNonRoot is false")
    for where, c in containers:
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"Privilege Escalation: spec.{where}.securityContext.allowPrivilegeEscalation is not false")
        nonroot = sc.get("runAsNonRoot", pod_nonroot)
        if nonroot is not True:
            out.append(f"Running as Non-root: spec.{where} does not set runAsNonRoot true (nor does the pod)")
        if sc.get("runAsUser") == 0:
            out.append(f"Running as Non-root user: spec.{where}.securityContext.runAsUser is 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"Seccomp: spec.{where} has no RuntimeDefault or Localhost seccompProfile (nor does the pod)")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"Capabilities: spec.{where}.securityContext.capabilities.drop does not have ALL")
        added = [cap for cap in caps.get("add") or [] if cap != "NET_BIND_SERVICE"]
        if added:
            out.append(f"Capabilities: spec.{where}.securityContext.capabilities.add has {', '.join(added)}")
    return out


def violations(level: str, spec: dict[str, Any], metadata: dict[str, Any] | None = None) -> list[str]:
    """The rules of ``level`` (privileged, baseline, restricted) that the pod ``spec`` (with its ``metadata``:
    AppArmor annotations) breaks, one line each; [] when the level admits it. ``restricted`` includes
    ``baseline``, as the standard defines it."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}: one of {', '.join(LEVELS)}")
    if level == "privileged":
        return []
    out = _baseline(spec, metadata or {})
    if level == "restricted":
        out += [v for v in _restricted(spec) if v not in out]
    return out


def pod_templates(obj: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(JSON path, metadata, spec) of every pod in ``obj``: a Pod itself, or any ``template`` (Deployment,
    Job, the Ray head and worker groups) whose spec has containers."""
    if not isinstance(obj, dict):
        if isinstance(obj, list):
            for i, item in enumerate(obj):
                yield from pod_templates(item, f"{path}[{i}]")
        return
    if obj.get("kind") == "Pod" and path == "$":
        yield path, obj.get("metadata") or {}, obj.get("spec") or {}
        return
    for key, value in obj.items():
        sub = f"{path}.{key}"
        if key == "template" and isinstance(value, dict) and "containers" in (value.get("spec") or {}):
            yield sub, value.get("metadata") or {}, value["spec"]
            continue
        yield from pod_templates(value, sub)


def namespace_level(namespace: dict[str, Any]) -> str:
    """The ``enforce`` level of a Namespace object (privileged when unlabelled: admission's default)."""
    return ((namespace.get("metadata") or {}).get("labels") or {}).get(f"{PSA}/enforce", "privileged")


def check_manifests(items: list[tuple[str, Any]], minimum: str = "baseline") -> list[str]:
    """Problems of a set of (source, object): a Namespace whose enforce level is below ``minimum``, and every
    pod template whose namespace (among the objects) enforces a level it breaks."""
    problems: list[str] = []
    levels: dict[str, str] = {}
    for source, obj in items:
        if isinstance(obj, dict) and obj.get("apiVersion") == "v1" and obj.get("kind") == "Namespace":
            name = str((obj.get("metadata") or {}).get("name"))
            levels[name] = level = namespace_level(obj)
            if level not in LEVELS or LEVELS.index(level) < LEVELS.index(minimum):
                problems.append(
                    f"{source}: Namespace {name!r} enforces {level!r}: label {PSA}/enforce {minimum} or "
                    "restricted (a team with edit there could run a privileged pod)"
                )
    for source, obj in items:
        if not isinstance(obj, dict):
            continue
        ns = (obj.get("metadata") or {}).get("namespace")
        found = levels.get(str(ns))
        if found is None or found not in LEVELS:
            continue
        level = found
        for path, metadata, spec in pod_templates(obj):
            for v in violations(level, spec, metadata):
                problems.append(f"{source}: {obj.get('kind')} {path} breaks Pod Security {level} of {ns!r}: {v}")
    return problems
