"""What the CLI says when something is wrong: the flags the user typed (never internal field
names), every problem of a config file in one pass, one line instead of a traceback when the
database cannot be used, no INFO log unless --verbose, the user's text echoed literally, and
help texts whose sentences are whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sustain.service.cli import app
from sustain.service.cli.common import EXIT_DATABASE, database_problem, help_texts
from sustain.service.cli.probe_flags import in_flags

UNUSED_PORT_URL = "postgresql://postgres@127.0.0.1:1/nothing"
"""Port 1 on loopback: nothing listens there."""


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, " ".join(result.output.split())


def test_field_names_in_a_message_read_as_the_flags() -> None:
    assert in_flags("set at least one of ttft_ms, tpot_ms and e2e_ms") == (
        "set at least one of --slo-ttft-ms, --slo-tpot-ms and --slo-e2e-ms")
    assert in_flags("rate must be positive") == "rate must be positive", "plain words stay"


def test_a_capacity_search_without_an_slo_names_the_slo_flags() -> None:
    code, output = run("probe", "http://127.0.0.1:1/v1", "--model", "m", "--profile",
                       "capacity", "--max-concurrency", "8")
    assert code == 2
    assert "--slo-ttft-ms, --slo-tpot-ms, --slo-ttfo-ms and --slo-e2e-ms" in output
    assert "ttft_ms" not in output


def test_an_unknown_profile_lists_the_valid_ones() -> None:
    code, output = run("probe", "http://127.0.0.1:1/v1", "--model", "m", "--profile",
                       "constnat")
    assert code == 2
    assert "constant" in output
    assert "capacity" in output


def test_validate_reports_an_undeclared_endpoint_with_the_other_problems(
        tmp_path: Path) -> None:
    config = tmp_path / "sustain.yaml"
    config.write_text(
        "endpoints:\n"
        "  - name: a\n"
        "    base_url: http://127.0.0.1:9/v1\n"
        "    model: m\n"
        "    timeout_total_s: -1\n"
        "probes:\n"
        "  - name: p\n"
        "    endpoint: nope\n"
        "    interval_seconds: 60\n"
        "    profile: {kind: constant, rate: 1, duration_s: 5}\n", encoding="utf-8")
    code, output = run("validate", str(config))
    assert code == 1
    assert "timeout_total_s: Input should be greater than 0" in output
    assert "probes[0].endpoint: no endpoint named 'nope' in this file" in output


@pytest.mark.parametrize("command", [["keys", "list"], ["compare", "a", "b"], ["migrate"],
                                     ["rules"]])
def test_an_unreachable_database_is_one_line_not_a_traceback(command: list[str]) -> None:
    code, output = run(*command, env={"SUSTAIN_DATABASE_URL": UNUSED_PORT_URL})
    assert code == EXIT_DATABASE
    assert output.startswith("cannot use the database (SUSTAIN_DATABASE_URL or --database-url)")
    assert "Traceback" not in output
    assert "sqlalche.me" not in output
    assert len(output) < 300


def test_a_database_problem_reads_without_class_names() -> None:
    class Refused(OSError):
        pass
    assert database_problem(Refused("<class 'asyncpg.X'>: database \"x\" does not exist\n"
                                    "more")) == 'database "x" does not exist'


def test_help_keeps_sentences_whole_and_lists_commands_by_their_first_sentence() -> None:
    full, short = help_texts("""Run the service: API, scheduler, metrics. Embedded PostgreSQL
    unless a URL is set.

    SIGTERM drains.""")
    assert full == ("Run the service: API, scheduler, metrics. Embedded PostgreSQL unless a "
                    "URL is set.\n\nSIGTERM drains.")
    assert short == "Run the service: API, scheduler, metrics."
    assert help_texts("Probes side by side (e.g. two endpoints). More.")[1] == (
        "Probes side by side (e.g. two endpoints).")


def test_echoed_user_text_is_printed_literally() -> None:
    typed = "[bold]x[/bold] :thumbs_up:"
    code, output = run("export", "--probe", "p", "--from", typed)
    assert code == 2
    assert f"--from: not an ISO 8601 time: {typed!r}" in output, "no markup, no emoji"


def test_keys_create_blames_only_the_wrong_flag() -> None:
    code, output = run("keys", "create", "--name", "ci", "--role", "superuser")
    assert code == 2
    assert "--role" in output
    assert "--name" not in output
