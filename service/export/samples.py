"""`sustain export`: one probe's raw samples sent in a time range, oldest first, read a page
per short transaction into CSV or Parquet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db import samples as sample_queries
from sustain.service.db.engine import session_factory
from sustain.service.db.models import Probe
from sustain.service.export.csv_rows import csv_text
from sustain.service.export.parquet_file import ParquetSink

Format = Literal["csv", "parquet"]


class UnknownProbeError(LookupError):
    """No probe has that name."""


@dataclass(frozen=True)
class ExportRequest:
    probe: str
    """Probe name."""
    start: datetime
    """Inclusive, on sent_at."""
    end: datetime
    """Exclusive, on sent_at."""


async def export_samples(engine: AsyncEngine, request: ExportRequest, file_format: Format,
                         text_out: IO[str] | None = None, path: Path | None = None) -> int:
    """Write the samples as CSV to `text_out` or as Parquet to `path`; the number of rows.

    Read a page at a time, each in its own short transaction, so a slow consumer of the
    output (a pipe nobody reads) never keeps a transaction open: a long one would hold back
    vacuum and the retention's partition drops."""
    sessions = session_factory(engine)
    async with sessions() as session:
        probe_id = (await session.execute(
            select(Probe.id).where(Probe.name == request.probe))).scalar_one_or_none()
    if probe_id is None:
        raise UnknownProbeError(request.probe)

    async def pages(size: int) -> AsyncIterator[list[dict[str, Any]]]:
        after: sample_queries.ProbeKey | None = None
        while True:
            async with sessions() as session:
                rows = await sample_queries.probe_page(session, probe_id, request.start,
                                                       request.end, after, size)
            if rows:
                yield rows
            if len(rows) < size:
                return
            after = sample_queries.probe_key(rows[-1])

    count = 0
    if file_format == "csv":
        assert text_out is not None
        text_out.write(csv_text([], header=True))
        async for chunk in pages(10_000):
            text_out.write(csv_text(chunk, header=False))
            count += len(chunk)
        text_out.flush()
        return count
    assert path is not None
    with ParquetSink(path) as sink:
        async for chunk in pages(50_000):
            sink.write(chunk)
            count += len(chunk)
    return count
