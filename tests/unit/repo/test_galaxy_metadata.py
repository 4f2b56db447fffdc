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


def test_galaxy_version_is_released_in_the_changelog() -> None:
    """changelogs/changelog.yaml holds a release for galaxy.yml's version (make release), CHANGELOG.rst is
    generated from it, and its fragments were consumed: fragments in changelogs/fragments/ are the next
    release's."""
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    changes = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())
    release = changes["releases"][version]
    assert release["release_date"] and release["changes"]["release_summary"]
    assert release["changes"]["breaking_changes"]
    released = set(release.get("fragments", []))
    pending = {p.name for p in (ROOT / "changelogs" / "fragments").glob("*.yml")}
    assert released and not released & pending, sorted(released & pending)
    rst = (ROOT / "CHANGELOG.rst").read_text()
    assert f"\nv{version}\n" in rst and "Breaking Changes / Porting Guide" in rst


def test_the_execution_environment_names_a_public_base_image() -> None:
    ee = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    name = ee["images"]["base_image"]["name"]
    registry, _, rest = name.partition("/")
    assert "." in registry and not registry.startswith("localhost"), name  # a fully qualified public name
    assert ":" in rest and not rest.endswith(":latest"), name  # a pinned tag, not latest
    assert (ROOT / "docs" / "ee.md").is_file()
