"""Secrets: never in the inventory's site variables, the plan or its files (issue 37).

A value shaped like a known credential anywhere in the site variables, or a credential's NAME that looks
like a key or token, is an error naming the field and never the value."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import field_path

#: Shapes of well-known credentials (the vendors' documented token formats): a value of one of these shapes
#: is a secret wherever it stands in the site variables. GitHub
#: (https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/), GitLab
#: (https://docs.gitlab.com/ee/security/tokens/#token-prefixes), AWS access key ids
#: (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids),
#: Slack (https://api.slack.com/authentication/token-types), NVIDIA NGC API keys (nvapi-), Hugging Face
#: (hf_), a JSON Web Token (RFC 7519: base64url header.payload.signature, the header starting '{"' = eyJ)
#: and a PEM private key.
SECRET_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (what, re.compile(pattern))
    for what, pattern in (
        ("a GitHub token", r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
        ("a GitLab token", r"\bgl(pat|dt|rt|ptt|cbt|imt|agent|oas|ft|soat)-[A-Za-z0-9_-]{16,}"),
        ("an AWS access key id", r"\b(AKIA|ASIA|AROA|AIDA)[0-9A-Z]{16}\b"),
        ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ("an NGC API key", r"\bnvapi-[A-Za-z0-9_-]{20,}"),
        ("a Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
        ("a JSON Web Token", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        ("a private key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"),
    )
)
#: In a NAME (a credential's name): a run of this many hex digits, or of this many base64 characters
#: mixing letters and digits with at least this much Shannon entropy per character, is a random string
#: (a key or token), not a name a person gives. Names are words joined by '_' or '-' (ngc, nvcr_pull,
#: registry_2024_ro): their runs are short.
SECRET_HEX_RUN = 32
SECRET_RANDOM_RUN = 20
SECRET_ENTROPY_BITS = 3.5
_HEX_RUN = re.compile(rf"[0-9A-Fa-f]{{{SECRET_HEX_RUN},}}")
_B64_RUN = re.compile(rf"[A-Za-z0-9+/=]{{{SECRET_RANDOM_RUN},}}")


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def secret_shape(value: object, *, name: bool = False) -> str | None:
    """What ``value`` looks like when it looks like a secret ('a GitHub token'), else None.

    ``name``: ``value`` should be a name (a credential's name): long random runs count too."""
    if not isinstance(value, str):
        return None
    for what, pattern in SECRET_SHAPES:
        if pattern.search(value):
            return what
    if name:
        if _HEX_RUN.search(value):
            return "a long hexadecimal string (a key or token)"
        for run in _B64_RUN.findall(value):
            mixed = re.search(r"[0-9]", run) and re.search(r"[A-Za-z]", run)
            if mixed and _entropy(run) >= SECRET_ENTROPY_BITS:
                return "a long random string (a key or token)"
    return None


#: Fields that hold the NAME of a secret (the secret itself comes from the site's secret store).
SECRET_NAME_FIELDS = ("gpucluster_containers.registries[].credential", "gpucluster_secrets[]")


def value_strings(data: object, path: list[object]) -> Iterator[tuple[list[object], str]]:
    """Every string in ``data`` (keys too), with its path below ``path``."""
    if isinstance(data, str):
        yield path, data
    elif isinstance(data, Mapping):
        for key, value in data.items():
            yield from value_strings(key, [*path, f"<key {len(path)}>"])
            yield from value_strings(value, [*path, key])
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            yield from value_strings(value, [*path, i])


def check_secrets(raw: Mapping[str, object]) -> None:
    """Refuse a secret in the site variables, before anything else reads (or echoes) them: a value shaped
    like a known credential anywhere, and a credential's NAME that looks like a key or token. The error
    names the field and what the value looks like, never the value (the plan and its report are 0644)."""
    for path, text in value_strings(dict(raw), []):
        field = field_path(path)
        pattern = re.sub(r"\[\d+\]", "[]", field)
        what = secret_shape(text, name=pattern in SECRET_NAME_FIELDS)
        require(
            what is None,
            field,
            "<hidden>",
            f"no secret in the inventory: the value looks like a secret ({what}) and is not shown; "
            + (
                "name the credential (letters, digits, '_'); the secret itself stays in the site's secret store"
                " (Ansible Vault), never in the inventory or on a node (docs/containers.md, Credentials)"
                if pattern in SECRET_NAME_FIELDS
                else "keep secrets in the site's secret store (Ansible Vault) in the roles' secret variables, which"
                " the plan never reads"
            ),
        )
