#!/usr/bin/python
"""Install an apt repository's signing key only when its fingerprint is the pinned one."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apt_signing_key
short_description: An apt repository's signing key, installed only when its fingerprint is pinned
version_added: 0.1.0
description:
  - Reads a repository's OpenPGP signing key from an C(https://) URL, from its ASCII-armored text or
    from a file on the host, computes the fingerprint of each primary key in it (RFC 4880 section 12.2,
    RFC 9580 section 5.5.4; no gpg needed) and writes it as a binary keyring to O(dest) only when every
    primary key is one of O(fingerprints). apt trusts every key of a C(Signed-By) file, so a key that is
    not pinned (a replaced download, a second key appended) fails the task and nothing is written.
  - Also refuses repository URIs (O(uris)) other than C(https://), unless O(allow_http) (the site's own
    mirror; apt still checks the repository's Release signature with this key).
  - Give the resulting O(dest) to M(ansible.builtin.deb822_repository)'s C(signed_by).
  - See U(https://wiki.debian.org/DebianRepository/UseThirdParty) (a key per repository, in
    C(/etc/apt/keyrings), named by C(Signed-By)).
options:
  key:
    description: An C(https://) URL, an ASCII-armored public key, or an absolute path on the host.
    type: str
    required: true
  fingerprints:
    description: The pinned fingerprints (40 hex digits for a v4 key, 64 for v6; spaces and case ignored).
    type: list
    elements: str
    required: true
  dest:
    description: The keyring file written (binary OpenPGP, mode 0644, root).
    type: path
    required: true
  uris:
    description: The repository's URIs, checked to be C(https://) (or C(http://) with O(allow_http)).
    type: list
    elements: str
    default: []
  allow_http:
    description: Let O(uris) be C(http://) (the site's own mirror). The key is only ever fetched over https.
    type: bool
    default: false
  timeout:
    description: Seconds for the key's download.
    type: int
    default: 30
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
extends_documentation_fragment:
  - gpucluster.tiers.attributes
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: The CUDA repository's signing key, checked against its pinned fingerprint
  gpucluster.tiers.apt_signing_key:
    key: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
    fingerprints: [EB693B3035CD5710E231E123A4B469963BF863CC]
    dest: /etc/apt/keyrings/gpucluster-gpu.gpg
    uris: [https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/]
  register: key
"""

RETURN = r"""
path:
  description: The keyring file (O(dest)).
  returned: success
  type: str
fingerprints:
  description: The fingerprints of the key's primary keys.
  returned: success
  type: list
  elements: str
"""

import os  # noqa: E402
import tempfile  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.urls import fetch_url  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils.openpgp import (  # noqa: E402
    ARMOR_BEGIN,
    OpenPGPError,
    keyring,
    normal,
    unpinned,
)


def _read(module: AnsibleModule, key: str) -> bytes:
    text = key.strip()
    if text.startswith(ARMOR_BEGIN):
        return text.encode()
    if text.lower().startswith("https://"):
        resp, info = fetch_url(module, text, timeout=module.params["timeout"])  # validate_certs: default true
        if info.get("status") != 200 or resp is None:
            module.fail_json(msg=f"key {text}: download failed ({info.get('status')}: {info.get('msg')})")
        return resp.read()
    if "://" in text:
        module.fail_json(msg=f"key {text}: only an https:// URL (a key fetched otherwise could be anyone's)")
    if text.startswith("/"):
        try:
            with open(text, "rb") as f:
                return f.read()
        except OSError as exc:
            module.fail_json(msg=f"key {text}: {exc}")
    module.fail_json(msg="key: an https:// URL, an ASCII-armored public key or an absolute path on the host")
    raise AssertionError  # unreachable


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "key": {"type": "str", "required": True, "no_log": False},
            "fingerprints": {"type": "list", "elements": "str", "required": True},
            "dest": {"type": "path", "required": True},
            "uris": {"type": "list", "elements": "str", "default": []},
            "allow_http": {"type": "bool", "default": False},
            "timeout": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )
    p = module.params
    for uri in p["uris"]:
        scheme = uri.partition("://")[0].lower() if "://" in uri else ""
        if not (scheme == "https" or (scheme == "http" and p["allow_http"])):
            module.fail_json(msg=f"repository URI {uri}: https:// only (http:// only for a declared site mirror)")
    pinned = [normal(f) for f in p["fingerprints"] if f.strip()]
    if not pinned:
        module.fail_json(msg="fingerprints: at least one pinned fingerprint")
    try:
        data, found = keyring(_read(module, p["key"]))
    except OpenPGPError as exc:
        module.fail_json(msg=f"key: {exc}")
    stray = unpinned(found, pinned)
    if stray:
        module.fail_json(
            msg=f"key: primary key(s) {', '.join(stray)} not pinned (pinned: {', '.join(pinned)}): not installed; "
            "apt would trust every key of the file",
            fingerprints=found,
        )
    dest = p["dest"]
    try:
        with open(dest, "rb") as f:
            current = f.read()
    except OSError:
        current = None
    changed = current != data
    if changed and not module.check_mode:
        folder = os.path.dirname(dest) or "."
        os.makedirs(folder, mode=0o755, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".apt_signing_key.")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        except OSError as exc:
            if os.path.exists(tmp):
                os.unlink(tmp)
            module.fail_json(msg=f"{dest}: {exc}")
    elif not module.check_mode and (os.stat(dest).st_mode & 0o7777) != 0o644:
        os.chmod(dest, 0o644)
        changed = True
    module.exit_json(changed=changed, path=dest, fingerprints=found)


if __name__ == "__main__":
    main()
