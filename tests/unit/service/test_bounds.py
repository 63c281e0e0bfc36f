"""Every bound is stated once (sustain.service.bounds), each a setting with a default, and the
docs' limits table is that list: a bound added without its row, or a row without its
setting, fails here."""

from __future__ import annotations

from pathlib import Path

from sustain.service.bounds import BOUNDS, markdown_table
from sustain.service.config import Settings

ROOT = Path(__file__).resolve().parents[3]
LIMITS_DOC = ROOT / "docs" / "limits.md"


def defaults() -> dict[str, object]:
    return {name: field.get_default(call_default_factory=True)
            for name, field in Settings.model_fields.items()}


def test_every_bound_is_a_setting() -> None:
    missing = [b.setting for b in BOUNDS if b.setting not in Settings.model_fields]
    assert missing == []


def test_every_bound_is_stated_once() -> None:
    settings = [b.setting for b in BOUNDS]
    assert len(settings) == len(set(settings))


def test_every_size_and_count_setting_is_a_listed_bound() -> None:
    listed = {b.setting for b in BOUNDS}
    limits = {name for name in Settings.model_fields
              if name.startswith("max_") or "_max_" in name}
    assert sorted(limits - listed) == []


def test_the_docs_limits_table_is_the_list_of_bounds() -> None:
    table = markdown_table(defaults())
    assert table in LIMITS_DOC.read_text(), (
        "docs/limits.md is out of date; its table should read:\n" + table)


def test_the_readme_links_the_limits_table() -> None:
    assert "docs/limits.md" in (ROOT / "README.md").read_text()
