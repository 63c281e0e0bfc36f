"""`sustain probe`: one load profile against an endpoint now, reported (and saved if asked)."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer
import uvloop
from rich.console import Console
from rich.live import Live

from sustain.service import strict_json
from sustain.service.cli.common import (
    console,
    database,
    load_settings,
    one_connection_engine,
    say,
)
from sustain.service.cli.flags import takes_flags
from sustain.service.cli.probe_flags import FlagError, ProbeFlags
from sustain.service.db.engine import session_factory
from sustain.service.db.migrate import upgrade_to_head

if TYPE_CHECKING:  # imported where used, so that `sustain --help` stays fast
    from sustain.probes.run_result import RunResult
    from sustain.service.scheduling.one_shot import OneShot


@takes_flags(ProbeFlags)
def probe(**given: Any) -> None:
    """Run one load profile against BASE_URL now and report: live progress, then a table
    (or --json). Exit status: 0 when a request succeeded; 1 when none did (with the first
    failure and a hint); 2 when the flags or a file they name cannot be used."""
    from sustain.probes.client.secrets import SecretUnavailableError, resolve_secret
    from sustain.probes.workload.dataset import DatasetError
    from sustain.probes.workload.spec import WorkloadError
    from sustain.service.cli import oneshot

    limits = replace(load_settings().load_limits(), max_workers=None)  # --workers is yours
    try:
        flags = ProbeFlags.parse(given)
        shot = oneshot.build(flags, limits)
        if shot.endpoint.auth_secret_ref is not None:
            resolve_secret(shot.endpoint.auth_secret_ref, shot.secrets)
    except (FlagError, SecretUnavailableError) as exc:
        say(f"{exc}", "red")
        raise typer.Exit(2) from None
    try:
        if flags.json_output:
            result = uvloop.run(oneshot.run_with_display(shot, None, budget=limits.budget()))
        else:
            with Live(console=console, refresh_per_second=4, transient=True) as display:
                result = uvloop.run(oneshot.run_with_display(shot, display,
                                                             budget=limits.budget()))
    except (DatasetError, WorkloadError) as exc:  # a file or workload that cannot be used
        say(f"{exc}", "red")
        raise typer.Exit(2) from None
    _report(flags, shot, result)


def _report(flags: ProbeFlags, shot: OneShot, result: RunResult) -> None:
    """The result as a table or JSON (and an HTML file), saved as a run if asked."""
    from sustain.probes.report import json_report
    from sustain.probes.report_tables import results
    from sustain.service.cli.failure_hints import EXIT_NONE_SUCCEEDED, failure_lines

    if not flags.json_output:
        Console(width=None if sys.stdout.isatty() else 140).print(results(result))
    if flags.html is not None:
        _write_report(flags, result)
    run_id = None
    if flags.save:
        settings = load_settings(database_url=flags.database_url, data_dir=flags.data_dir)
        with database(settings) as url:
            upgrade_to_head(url)
            run_id = asyncio.run(_save(url, shot, result, settings.location))
    if flags.json_output:
        report = json_report(result)
        if run_id is not None:
            report["run_id"] = run_id
        print(strict_json.dumps(report))
    elif run_id is not None:
        say(f"saved as run {run_id}")
    lines = failure_lines(result.samples, flags.base_url, flags.model, _request(flags))
    for line in lines:  # the server's words (printable, secret-free) and the URL, as they are
        console.print(line, style="red", markup=False, highlight=False)
    if lines:
        raise typer.Exit(EXIT_NONE_SUCCEEDED)


def _request(flags: ProbeFlags) -> str | None:
    """Where the probe's requests went: `POST http://host:8000/v1/chat/completions`, or the
    method and URL of an `--api http` check."""
    from sustain.probes.protocols.registry import is_check
    from sustain.service.runs.hints import request_target

    return request_target(flags.base_url, flags.api,
                          flags.method if is_check(flags.api) else None)


def _write_report(flags: ProbeFlags, result: RunResult) -> None:
    from sustain.probes.measure.sample import Outcome
    from sustain.service.db.status import FirstFailure
    from sustain.service.web.report import failure_lines, render, run_page

    assert flags.html is not None
    ok = [s for s in result.samples if s.outcome is Outcome.SUCCESS]
    failed = [s.measurement for s in result.samples if s.outcome is not Outcome.SUCCESS]
    report = result.report().model_dump(mode="json")
    first = None if not failed else FirstFailure(
        str(failed[0].error_class or "unknown"), failed[0].http_status, len(failed))
    page = run_page(report, f"sustain probe: {flags.base_url}",
                    f"model {flags.model or '-'} · profile {flags.profile} · "
                    f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC",
                    [v for s in ok if (v := s.ttft_ms) is not None], [s.e2e_ms for s in ok],
                    failure_lines("completed", None, report, first, flags.base_url,
                                  flags.api, flags.model,
                                  detail=failed[0].error_detail if failed else None,
                                  request=_request(flags)))
    try:
        flags.html.write_text(render(page), encoding="utf-8")
    except OSError as exc:
        say(f"--html: cannot write {flags.html} ({exc.strerror})", "red")
        raise typer.Exit(2) from None


async def _save(url: str, shot: OneShot, result: RunResult, location: str) -> int:
    from sustain.service.cli.oneshot import save

    async with one_connection_engine(url) as engine, session_factory(engine).begin() as session:
        return await save(session, shot, result, location)
