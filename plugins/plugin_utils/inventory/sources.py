"""Package sources: every apt repository the roles add signed by a pinned key and reached over https
(issue 37); the roles' variables of each host, read by the host-variable check (inventory/hosts.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require

#: The apt repositories the roles add, by their role variable: ``<name>`` the URIs, ``<name>_key`` the
#: signing key (an https:// URL, an ASCII-armored key or a keyring path on the host), ``<name>_key_fingerprint``
#: the key's pinned fingerprint(s), checked before apt trusts the key (module apt_signing_key),
#: ``<name>_http_mirror`` (default false) lets http:// URIs name the site's own mirror: apt still checks the
#: repository's Release signature against the pinned key (https://wiki.debian.org/SecureApt). The key
#: itself is only ever fetched over https.
PACKAGE_SOURCES = (
    "compute_gpu_repo",
    "compute_container_repo",
    "compute_doca_repo",
    "compute_beegfs_repo",
    "storage_beegfs_repo",
    "head_grafana_repo",
)
#: The names of the role variables :func:`check_package_sources` reads.
PACKAGE_SOURCE_VARIABLES = frozenset(
    f"{p}{s}" for p in PACKAGE_SOURCES for s in ("", "_key", "_key_fingerprint", "_http_mirror")
)
_FINGERPRINT = re.compile(r"[0-9A-F]{40}|[0-9A-F]{64}")
ARMORED_KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----"


def key_fingerprints(value: object) -> list[str] | None:
    """The pinned fingerprints of ``value`` (one, or a list; spaces and case ignored: 40 hex digits for a
    v4 key, 64 for v5/v6), or None when it is no such list."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        return None
    out = [re.sub(r"\s+", "", v).upper().removeprefix("0X") for v in items]
    return out if all(_FINGERPRINT.fullmatch(v) for v in out) else None


def check_package_sources(variables: Mapping[str, object], where: str = "group all") -> None:
    """Raise PlanError unless every package repository set in ``variables`` (one host's variables) is
    signed by a key with a pinned fingerprint and reached over https (http only for a declared mirror)."""
    for name in PACKAGE_SOURCES:
        uris = variables.get(name)
        if uris is None or uris == [] or uris == "":
            continue
        on = f" (set on {where})"
        uri_list = [uris] if isinstance(uris, str) else uris
        require(
            isinstance(uri_list, list) and all(isinstance(u, str) for u in uri_list),
            name,
            uris,
            "a list of apt repository URIs" + on,
        )
        uri_list = [u for u in uri_list if isinstance(u, str)] if isinstance(uri_list, list) else []
        mirror = variables.get(f"{name}_http_mirror", False)
        require(isinstance(mirror, bool), f"{name}_http_mirror", mirror, "true or false" + on)
        for i, uri in enumerate(uri_list):
            scheme = uri.partition("://")[0].lower() if "://" in uri else ""
            require(
                scheme == "https" or (scheme == "http" and mirror is True),
                f"{name}[{i}]",
                uri,
                "an https:// URI"
                + ("" if scheme != "http" else f" (http:// only for the site's own mirror: {name}_http_mirror: true)")
                + on,
            )
        key = variables.get(f"{name}_key", "")
        text = key.strip() if isinstance(key, str) else ""
        kind = (
            "url"
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text)
            else "armored"
            if text.startswith(ARMORED_KEY)
            else "path"
            if text.startswith("/")
            else ""
        )
        require(
            kind != "" and (kind != "url" or text.lower().startswith("https://")),
            f"{name}_key",
            key if len(text) <= 120 else text[:60] + "...",
            "the repository's signing key: an https:// URL, an ASCII-armored key (" + ARMORED_KEY + ") or a"
            " keyring path on the host; without it apt trusts any key of its keyring (or none), and a key fetched"
            " over http could be anyone's" + on,
        )
        pinned = variables.get(f"{name}_key_fingerprint")
        require(
            key_fingerprints(pinned) is not None,
            f"{name}_key_fingerprint",
            pinned,
            f"the full fingerprint of {name}_key (40 hex digits, spaces allowed; a list for several keys): the key"
            " is checked against it on the host before apt trusts it" + on,
        )
