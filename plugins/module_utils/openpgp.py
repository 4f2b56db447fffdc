"""OpenPGP public keys as apt reads them: dearmor and the primary keys' fingerprints (no gpg needed).

apt trusts every primary key of a ``Signed-By`` keyring file (sources.list(5), deb822 ``Signed-By``), so
the module apt_signing_key writes a repository's key only when each primary key in it is one the site
pinned. The fingerprint is computed as RFC 4880 section 12.2 (v4: SHA-1 over 0x99, the two-octet
length and the public-key packet body) and RFC 9580 section 5.5.4 (v6: SHA-256 over 0x9B, a four-octet
length and the body; v5, the LibrePGP draft, as v6 with 0x9A): https://www.rfc-editor.org/rfc/rfc4880#section-12.2,
https://www.rfc-editor.org/rfc/rfc9580#section-5.5.4. Packet framing: RFC 4880 section 4.2.
Runs on the target (Python 3.10, standard library only).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

ARMOR_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
ARMOR_END = "-----END PGP PUBLIC KEY BLOCK-----"
#: packet tags (RFC 4880 section 4.3)
TAG_PUBLIC_KEY = 6
TAG_SECRET_KEY = 5
TAG_SECRET_SUBKEY = 7


class OpenPGPError(ValueError):
    """Not an OpenPGP public key (or keyring) apt could use."""


def _crc24(data: bytes) -> int:
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _byte in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def dearmor(text: str) -> bytes:
    """The binary packets of one or more ASCII-armored public key blocks (RFC 4880 section 6.2), the
    checksum line checked when there is one."""
    out = b""
    blocks = re.findall(re.escape(ARMOR_BEGIN) + r"(.*?)" + re.escape(ARMOR_END), text, flags=re.S)
    if not blocks:
        raise OpenPGPError(f"no {ARMOR_BEGIN} block")
    for block in blocks:
        lines = [line.strip() for line in block.strip().splitlines()]
        # armor headers (Version: ..., Comment: ...) end at the first blank line
        if "" in lines and any(":" in line for line in lines[: lines.index("")]):
            lines = lines[lines.index("") + 1 :]
        lines = [line for line in lines if line]
        checksum = None
        if lines and lines[-1].startswith("=") and len(lines[-1]) == 5:
            checksum = lines.pop()[1:]
        try:
            data = base64.b64decode("".join(lines), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise OpenPGPError(f"the armored key is not base64: {exc}") from None
        if checksum is not None:
            want = int.from_bytes(base64.b64decode(checksum), "big")
            if _crc24(data) != want:
                raise OpenPGPError("the armored key's checksum (CRC-24) does not match: the key is damaged")
        out += data
    return out


def packets(data: bytes) -> list[tuple[int, bytes]]:
    """(tag, body) of each packet, old and new formats (RFC 4880 section 4.2); partial lengths refused
    (a key packet never uses them)."""
    out = []
    i = 0
    while i < len(data):
        head = data[i]
        if not head & 0x80:
            raise OpenPGPError(f"byte {i}: not an OpenPGP packet header")
        if head & 0x40:  # new format
            tag = head & 0x3F
            if i + 1 >= len(data):
                raise OpenPGPError("truncated packet header")
            first = data[i + 1]
            if first < 192:
                length, i = first, i + 2
            elif first < 224:
                if i + 2 >= len(data):
                    raise OpenPGPError("truncated packet header")
                length, i = ((first - 192) << 8) + data[i + 2] + 192, i + 3
            elif first == 255:
                length, i = int.from_bytes(data[i + 2 : i + 6], "big"), i + 6
            else:
                raise OpenPGPError(f"byte {i}: a partial body length, not a key packet")
        else:  # old format
            tag, kind = (head >> 2) & 0x0F, head & 0x03
            if kind == 3:
                raise OpenPGPError(f"byte {i}: an indeterminate length, not a key packet")
            size = (1, 2, 4)[kind]
            length, i = int.from_bytes(data[i + 1 : i + 1 + size], "big"), i + 1 + size
        if i + length > len(data):
            raise OpenPGPError("truncated packet")
        out.append((tag, data[i : i + length]))
        i += length
    return out


def fingerprint(body: bytes) -> str:
    """The fingerprint of a public-key packet's body (upper-case hex)."""
    if not body:
        raise OpenPGPError("an empty key packet")
    version = body[0]
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise OpenPGPError(f"a version {version} key (v3 and older keys are not trusted by apt)")


def keyring(data: bytes | str) -> tuple[bytes, list[str]]:
    """(the binary keyring, the fingerprints of its primary keys) of a key given armored or binary."""
    if isinstance(data, str) or data.lstrip().startswith(ARMOR_BEGIN.encode()):
        text = data if isinstance(data, str) else data.decode("ascii", errors="replace")
        data = dearmor(text)
    found = packets(data)
    if any(tag in (TAG_SECRET_KEY, TAG_SECRET_SUBKEY) for tag, _body in found):
        raise OpenPGPError("a SECRET key: a repository's signing key is given as its public key only")
    primaries = [fingerprint(body) for tag, body in found if tag == TAG_PUBLIC_KEY]
    if not primaries:
        raise OpenPGPError("no public key packet")
    return data, primaries


def normal(value: str) -> str:
    """A fingerprint as written by people (spaces, lower case, 0x) in the form :func:`fingerprint` gives."""
    return re.sub(r"\s+", "", value).upper().removeprefix("0X")


def unpinned(found: list[str], pinned: list[str]) -> list[str]:
    """The primary keys of ``found`` that no pinned fingerprint names."""
    allowed = {normal(p) for p in pinned}
    return [f for f in found if f not in allowed]
