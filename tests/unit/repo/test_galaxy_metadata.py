"""galaxy.yml's links: real https URLs or none, never a placeholder (issue 27)."""

from __future__ import annotations

from urllib.parse import urlparse

import yaml
from conftest import ROOT

LINK_FIELDS = ("repository", "documentation", "issues", "homepage")
#: RFC 2606 / RFC 6761 names that resolve nowhere, and hosts a template leaves behind
PLACEHOLDER_HOSTS = ("example.invalid", "example.com", "example.org", "example.net", "localhost", "your-org")


def test_galaxy_links_are_real_urls_or_absent() -> None:
    meta = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    for field in LINK_FIELDS:
        url = meta.get(field)
        if url is None:
            continue
        parsed = urlparse(url)
        assert parsed.scheme == "https", (field, url)
        host = parsed.hostname or ""
        assert not any(host == p or host.endswith(("." + p, ".invalid", ".test")) for p in PLACEHOLDER_HOSTS), (
            field,
            url,
        )


def test_readme_says_where_the_collection_lives_when_galaxy_names_no_url() -> None:
    meta = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    if not any(meta.get(f) for f in LINK_FIELDS):
        readme = (ROOT / "README.md").read_text()
        assert "## Where it lives" in readme
        assert "make collection" in readme.split("## Where it lives")[1].split("\n## ")[0]
