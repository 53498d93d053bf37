"""What a distribution ships beside the code: the licence it declares, and the typing marker."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_license_file_is_the_one_pyproject_declares() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_package_is_marked_typed() -> None:
    assert resources.files("plaudit").joinpath("py.typed").is_file()


def test_the_changelog_has_an_unreleased_section() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text and "Keep a Changelog" in text
