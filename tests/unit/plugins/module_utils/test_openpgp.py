"""module_utils/openpgp.py and the module apt_signing_key: a repository key is installed for apt only when
every primary key in it is pinned (issue 37).

The fingerprints are compared with GnuPG's own (gpg --with-colons) for keys GnuPG makes here; without gpg
on the controller those tests skip and the hand-built packets below still check the RFC 4880 framing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpucluster.tiers.plugins.module_utils import openpgp
from ansible_collections.gpucluster.tiers.plugins.modules import apt_signing_key

GPG = shutil.which("gpg")
needs_gpg = pytest.mark.skipif(GPG is None, reason="gpg is not on the controller")


def _v4_body(seed: int) -> bytes:
    """A v4 public-key packet body (version, time, algorithm 22 EdDSA, an OID and a point): framing only."""
    return bytes([4]) + (1_700_000_000 + seed).to_bytes(4, "big") + bytes([22, 9]) + bytes(9) + bytes([1, 7, seed])


def _packet(tag: int, body: bytes, new: bool = True) -> bytes:
    if new:
        return bytes([0xC0 | tag, len(body)]) + body
    return bytes([0x80 | (tag << 2) | 0, len(body)]) + body  # old format, one-octet length


def _armor(data: bytes) -> str:
    text = base64.b64encode(data).decode()
    crc = base64.b64encode(openpgp._crc24(data).to_bytes(3, "big")).decode()
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    return "\n".join([openpgp.ARMOR_BEGIN, "Comment: test", "", *lines, "=" + crc, openpgp.ARMOR_END, ""])


def _fpr(body: bytes) -> str:
    return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()


def test_the_v4_fingerprint_is_rfc4880s_sha1_over_the_framed_key() -> None:
    body = _v4_body(1)
    for new in (True, False):
        data, found = openpgp.keyring(
            _packet(6, body, new) + _packet(13, b"user <u@example>") + _packet(14, _v4_body(2))
        )
        assert found == [_fpr(body)]  # the subkey (tag 14) is not a primary key
        assert data.startswith(bytes([0xC6 if new else 0x98]))


def test_armored_keys_are_dearmored_and_their_checksum_checked() -> None:
    raw = _packet(6, _v4_body(1)) + _packet(6, _v4_body(3))
    data, found = openpgp.keyring(_armor(raw))
    assert data == raw and found == [_fpr(_v4_body(1)), _fpr(_v4_body(3))]
    broken = _armor(raw).splitlines()
    broken[3] = ("B" if broken[3][0] != "B" else "C") + broken[3][1:]
    with pytest.raises(openpgp.OpenPGPError, match="checksum"):
        openpgp.keyring("\n".join(broken))


def test_secret_keys_and_non_keys_are_refused() -> None:
    with pytest.raises(openpgp.OpenPGPError, match="SECRET"):
        openpgp.keyring(_packet(5, _v4_body(1)))
    with pytest.raises(openpgp.OpenPGPError, match="no public key"):
        openpgp.keyring(_packet(13, b"just a user id"))
    with pytest.raises(openpgp.OpenPGPError):
        openpgp.keyring(b"<html>404</html>")


def test_unpinned_names_every_primary_key_not_pinned() -> None:
    a, b = _fpr(_v4_body(1)), _fpr(_v4_body(3))
    spaced = " ".join(a[i : i + 4] for i in range(0, 40, 4)).lower()
    assert openpgp.unpinned([a], [spaced]) == []
    assert openpgp.unpinned([a, b], [a]) == [b]  # a second key appended to the download


@pytest.fixture(scope="module")
def gpg_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """{name: (armored public key, GnuPG's fingerprint)} for two keys GnuPG makes."""
    if GPG is None:
        pytest.skip("gpg is not on the controller")
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    out = {}
    try:
        for name in ("repo", "other"):
            uid = f"{name} <{name}@example.invalid>"
            subprocess.run(
                [GPG, "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never"],
                env=env, check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            colons = subprocess.run(
                [GPG, "--batch", "--with-colons", "--list-keys", uid],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            fpr = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
            armored = subprocess.run(
                [GPG, "--batch", "--armor", "--export", uid], env=env, check=True, capture_output=True, text=True
            ).stdout
            out[name] = (armored, fpr)
    finally:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, capture_output=True, check=False)
    return out


@needs_gpg
def test_fingerprints_are_gnupgs(gpg_keys: dict[str, tuple[str, str]]) -> None:
    for armored, fpr in gpg_keys.values():
        assert openpgp.keyring(armored)[1] == [fpr]


def _run_module(args: dict[str, object], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    with patch_module_args(args), pytest.raises(SystemExit):
        apt_signing_key.main()
    return json.loads(capsys.readouterr().out)


@needs_gpg
def test_the_module_writes_a_pinned_key_once(
    gpg_keys: dict[str, tuple[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    armored, fpr = gpg_keys["repo"]
    dest = tmp_path / "keyrings" / "gpucluster-gpu.gpg"
    args = {"key": armored, "fingerprints": [fpr.lower()], "dest": str(dest), "uris": ["https://r.example/"]}
    out = _run_module(args, capsys)
    assert out["changed"] is True and out["fingerprints"] == [fpr] and out["path"] == str(dest)
    assert dest.read_bytes() == openpgp.dearmor(armored) and (dest.stat().st_mode & 0o777) == 0o644
    assert _run_module(args, capsys)["changed"] is False  # idempotent
    keyfile = tmp_path / "repo.asc"  # a key already on the host
    keyfile.write_text(armored)
    assert _run_module({**args, "key": str(keyfile)}, capsys)["changed"] is False


@needs_gpg
def test_the_module_refuses_an_unpinned_or_appended_key_and_writes_nothing(
    gpg_keys: dict[str, tuple[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo, fpr), (other, other_fpr) = gpg_keys["repo"], gpg_keys["other"]
    dest = tmp_path / "k.gpg"
    out = _run_module({"key": other, "fingerprints": [fpr], "dest": str(dest)}, capsys)
    assert out["failed"] is True and other_fpr in str(out["msg"]) and "not pinned" in str(out["msg"])
    both = repo + other  # the pinned key with a second one appended: apt would trust both
    out = _run_module({"key": both, "fingerprints": [fpr], "dest": str(dest)}, capsys)
    assert out["failed"] is True and other_fpr in str(out["msg"])
    assert not dest.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"uris": ["http://r.example/"]}, "https:// only"),
        ({"key": "http://r.example/key.asc"}, "only an https:// URL"),
        ({"key": "relative.asc"}, "an https:// URL, an ASCII-armored public key or an absolute path"),
        ({"fingerprints": [""]}, "at least one pinned fingerprint"),
    ],
)
def test_the_module_refuses_http_and_missing_pins(
    args: dict[str, object], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = {"key": _armor(_packet(6, _v4_body(1))), "fingerprints": [_fpr(_v4_body(1))], "dest": str(tmp_path / "k")}
    out = _run_module({**base, **args}, capsys)
    assert out["failed"] is True and message in str(out["msg"])
    assert not (tmp_path / "k").exists()
    ok = _run_module({**base, "uris": ["http://mirror.site/"], "allow_http": True}, capsys)
    assert ok["changed"] is True  # a declared site mirror
