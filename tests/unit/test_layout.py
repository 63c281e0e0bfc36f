"""The repository's layout: one import root, mapped at build time, without links."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("probes", "service", "simulator", "migrations")


def _declared() -> tuple[dict[str, str], list[str]]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return setuptools["package-dir"], setuptools["packages"]


def test_every_folder_with_an_init_is_a_declared_package() -> None:
    package_dir, packages = _declared()
    found = {"sustain"}
    for folder in FOLDERS:
        assert package_dir[f"sustain.{folder}"] == folder
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            found.add(".".join(("sustain", *parts)))
    assert package_dir["sustain"] == "src/sustain"
    assert sorted(packages) == sorted(found)


def test_no_symlink_is_tracked() -> None:
    listing = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert listing.returncode == 0, listing.stderr  # the tests run in a git checkout
    links = [line for line in listing.stdout.splitlines() if line.startswith("120000")]
    assert links == []


def python_at_the_root(code: str) -> subprocess.CompletedProcess[str]:
    """`python -c code` run from the repository root (which puts the root on sys.path)."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False)


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_folder_imported_by_its_bare_name_says_to_import_sustain(folder: str) -> None:
    result = python_at_the_root(f"import {folder}")
    assert result.returncode != 0
    assert "ImportError" in result.stderr
    assert f"import sustain.{folder}, not {folder}" in result.stderr


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_installed_package_imports_under_sustain(folder: str) -> None:
    result = python_at_the_root(f"import sustain.{folder} as m; print(m.__name__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"sustain.{folder}"
