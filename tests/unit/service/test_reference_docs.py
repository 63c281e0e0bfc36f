"""The reference tables of docs/ are made from the code: docs/configuration.md holds the table
of every setting (sustain.service.config.Settings: variable, default, description) and
docs/cli.md the reference of every command and option of `sustain`, verbatim. A setting or a
flag added, renamed, re-described or given another default without its page fails here, and
the failure prints what the page should hold."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from sustain.service.cli import app
from sustain.service.config import Settings
from sustain.service.reference import cli_reference, settings_table

DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_the_configuration_page_holds_the_table_of_every_setting() -> None:
    table = settings_table(Settings.model_fields)
    assert table in (DOCS / "configuration.md").read_text(), (
        "docs/configuration.md is out of date; its settings table should read:\n" + table)


def test_the_settings_table_has_a_row_for_every_setting() -> None:
    rows = [line for line in settings_table(Settings.model_fields).splitlines()
            if line.startswith("| `SUSTAIN_")]
    assert [row.split("`")[1] for row in rows] == [
        f"SUSTAIN_{name.upper()}" for name in Settings.model_fields]


def test_a_default_that_depends_on_the_machine_is_written_in_words() -> None:
    table = settings_table(Settings.model_fields)
    assert str(Path.home()) not in table
    assert "| `SUSTAIN_DATA_DIR` | per-user data dir" in table


def test_the_settings_table_lists_a_literal_settings_choices() -> None:
    assert "One of `debug`, `info`, `warning`, `error`." in settings_table(Settings.model_fields)


def test_a_setting_without_a_description_cannot_be_rendered() -> None:
    fields = dict(Settings.model_fields)
    undescribed = fields["port"].__class__.merge_field_infos(fields["port"], description="")
    with pytest.raises(ValueError, match="port"):
        settings_table({**fields, "port": undescribed})


def test_the_cli_page_holds_the_reference_of_every_command() -> None:
    reference = cli_reference(typer.main.get_command(app))
    assert reference in (DOCS / "cli.md").read_text(), (
        "docs/cli.md is out of date; its command reference should read:\n" + reference)


def test_the_cli_reference_names_every_command_and_option() -> None:
    root = typer.main.get_command(app)
    reference = cli_reference(root)
    for name in ("serve", "demo", "probe", "keys create", "keys generate", "agent"):
        assert f"### `sustain {name}`" in reference
    for option in ("`--json`", "`--database-url`", "`--spool-max-mb`", "`--api`"):
        assert option in reference
