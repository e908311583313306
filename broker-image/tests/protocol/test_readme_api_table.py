"""The README's API table is what ApiVersions advertises: docs that cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from strom.protocol import apis

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_lists_exactly_the_advertised_versions() -> None:
    text = README.read_text()
    table = text.split("<!-- api-table:start -->")[1].split("<!-- api-table:end -->")[0]
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)\N{EN DASH}(\d+) \|$", table, re.MULTILINE)
    documented = {int(key): (int(low), int(high)) for _, key, low, high in rows}
    advertised = {int(key): versions for key, versions in apis.SUPPORTED_VERSIONS.items()}
    assert documented == advertised


def test_readme_lists_exactly_what_the_controller_listener_advertises() -> None:
    text = README.read_text()
    table = text.split("<!-- controller-api-table:start -->")[1].split(
        "<!-- controller-api-table:end -->"
    )[0]
    rows = re.findall(r"^\| (\w+)[^|]* \| (\d+) \| (\d+)\N{EN DASH}(\d+) \|$", table, re.MULTILINE)
    documented = {int(key): (int(low), int(high)) for _, key, low, high in rows}
    advertised = {int(key): versions for key, versions in apis.CONTROLLER_VERSIONS.items()}
    assert documented == advertised
