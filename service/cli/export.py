"""`sustain export`: one probe's raw samples as CSV or Parquet."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sustain.service.cli.common import (
    DataDirOpt,
    DbOpt,
    VerboseOpt,
    command_logging,
    counted,
    database,
    load_settings,
    one_connection_engine,
    say,
)

if TYPE_CHECKING:  # imported where used, so that `sustain --help` stays fast
    from sustain.service.export.samples import ExportRequest


def _moment(option: str, value: str) -> datetime:
    """ISO 8601; a time without an offset is UTC."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        say(f"{option}: not an ISO 8601 time: {value!r}", "red")
        raise typer.Exit(2) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def _export(url: str, request: ExportRequest, file_format: str, output: Path | None
                  ) -> int:
    from sustain.service.export.samples import export_samples

    async with one_connection_engine(url) as engine:
        if file_format == "parquet":
            return await export_samples(engine, request, "parquet", path=output)
        if output is None:
            return await export_samples(engine, request, "csv", text_out=sys.stdout)
        with output.open("w", encoding="utf-8", newline="") as out:
            return await export_samples(engine, request, "csv", text_out=out)


def export(
    probe_name: Annotated[str, typer.Option("--probe", help="Probe name.")],
    start: Annotated[str, typer.Option("--from", help="ISO 8601 time, inclusive (UTC if no "
                                                      "offset).")],
    end: Annotated[str | None, typer.Option("--to", help="ISO 8601 time, exclusive; "
                                                         "default now.")] = None,
    file_format: Annotated[str, typer.Option(
        "--format", help="csv | parquet (parquet needs the `parquet` extra).")] = "csv",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="File to write; CSV goes to stdout without it.")] = None,
    database_url: DbOpt = None, data_dir: DataDirOpt = None, verbose: VerboseOpt = False,
) -> None:
    """Raw samples of one probe sent in [--from, --to), oldest first, as CSV or Parquet."""
    from sustain.service.export.parquet_file import ParquetUnavailableError
    from sustain.service.export.samples import ExportRequest, UnknownProbeError

    if file_format not in ("csv", "parquet"):
        say(f"--format: must be csv or parquet, not {file_format!r}", "red")
        raise typer.Exit(2)
    if file_format == "parquet" and output is None:
        say("--output: required for parquet (a binary file)", "red")
        raise typer.Exit(2)
    request = ExportRequest(probe=probe_name, start=_moment("--from", start),
                            end=_moment("--to", end) if end else datetime.now(UTC))
    if request.start >= request.end:
        say("--from: must be before --to", "red")
        raise typer.Exit(2)
    settings = load_settings(database_url=database_url, data_dir=data_dir)
    command_logging(settings, verbose)
    with database(settings, share=True) as url:
        try:
            count = asyncio.run(_export(url, request, file_format, output))
        except UnknownProbeError:
            say(f"--probe: no probe named {probe_name!r}", "red")
            raise typer.Exit(2) from None
        except ParquetUnavailableError as exc:
            say(f"--format parquet: {exc}", "red")
            raise typer.Exit(2) from None
    say(f"exported {counted(count, 'sample')} of probe {probe_name!r}"
        + (f" to {output}" if output else ""))
