"""The one task that drains the SampleBuffer into Postgres.

Each batch (up to BATCH_SAMPLES rows, plus the finals that follow them) is one transaction:
the rows of runs that still exist, then each final with its sketches and rollups. A failed
batch is retried, with backoff and without end, before anything after it; the buffer keeps it
meanwhile. Retries cannot duplicate: rows are keyed on (run_id, pos) and a final only applies
to a run that is not final yet.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import date

import asyncpg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from sustain.service.db import partitions, results, samples, slo_counts
from sustain.service.domain.finals import RunFinal
from sustain.service.domain.rows import RUN_ID, SampleTuple, sent_at
from sustain.service.ingest.buffer import SampleBuffer

logger = logging.getLogger(__name__)

BATCH_SAMPLES = 5000
LINGER_S = 0.05
"""How long a small batch waits for company: fewer, larger transactions."""
BATCH_TIMEOUT_S = 60.0
"""A batch that takes longer (a hung connection) is abandoned and retried."""


class SampleWriter:
    def __init__(self, engine: AsyncEngine, buffer: SampleBuffer, *,
                 batch_samples: int = BATCH_SAMPLES, linger_s: float = LINGER_S,
                 on_batch: Callable[[float], None] | None = None) -> None:
        self.engine = engine
        self.on_batch = on_batch
        """Called with the seconds each successful batch took (database write latency)."""
        self.buffer = buffer
        self.batch_samples = batch_samples
        self.linger_s = linger_s
        self.written_total = 0
        self.orphaned_total = 0
        """Rows of runs deleted before their samples were written (their probe was deleted)."""
        self.failures_total = 0
        self.last_error: str | None = None
        """Why the newest attempt failed; None once a batch succeeds again."""
        self._days: set[date] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="sample-writer")

    async def _run(self) -> None:
        while True:
            await self.buffer.wait()
            if self.buffer.samples < self.batch_samples:
                await asyncio.sleep(self.linger_s)
            items = self.buffer.peek(self.batch_samples)
            await self._write_until_done(items)
            self.buffer.pop(len(items))

    async def _write_until_done(self, items: list[SampleTuple | RunFinal]) -> None:
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(Exception),
            wait=wait_exponential(multiplier=0.2, max=5.0),
            before_sleep=self._failed,
        )
        async for attempt in retrying:
            with attempt:
                started = time.perf_counter()
                async with asyncio.timeout(BATCH_TIMEOUT_S):
                    await self._write(items)
        if self.on_batch is not None:
            self.on_batch(time.perf_counter() - started)
        self.last_error = None

    def _failed(self, state: RetryCallState) -> None:
        self.failures_total += 1
        self._days.clear()
        exc = state.outcome.exception() if state.outcome is not None else None
        self.last_error = type(exc).__name__
        logger.warning("writing %d buffered samples failed (%s, attempt %d); retrying",
                       self.buffer.samples, self.last_error, state.attempt_number,
                       exc_info=not _is_database_error(exc))

    async def _write(self, items: list[SampleTuple | RunFinal]) -> None:
        rows = [item for item in items if isinstance(item, tuple)]
        finals = [item for item in items if isinstance(item, RunFinal)]
        new_days = {partitions.utc_day(sent_at(row)) for row in rows} - self._days
        if new_days:
            async with self.engine.begin() as connection:
                await partitions.ensure(connection, new_days)
            self._days |= new_days
        async with self.engine.begin() as connection:
            kept = await store(connection, rows, finals)
        self.written_total += kept
        if kept < len(rows):
            self.orphaned_total += len(rows) - kept
            logger.info("discarded %d samples of deleted runs", len(rows) - kept)

    async def flush(self, timeout_s: float) -> bool:
        """Wait until everything buffered is durable; False if `timeout_s` passed first."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.buffer.drained()
        except TimeoutError:
            return False
        return True

    async def close(self, timeout_s: float) -> None:
        """Flush for up to `timeout_s`, then stop; what is still buffered is lost, and said."""
        if self._task is None:
            return
        if not await self.flush(timeout_s):
            logger.error("stopping with %d samples not written (database unavailable for %ss)",
                         self.buffer.samples, timeout_s)
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def store(connection: AsyncConnection, rows: list[SampleTuple],
                finals: list[RunFinal]) -> int:
    """Write rows, then finals (inside a transaction, partitions in place). Rows and finals of
    runs deleted meanwhile are skipped; returns how many rows were kept."""
    alive = await samples.live_runs(
        connection, {row[RUN_ID] for row in rows} | {f.run_id for f in finals})
    kept = [row for row in rows if row[RUN_ID] in alive]
    await samples.insert(connection, kept)
    applied = await results.apply_all(connection, [f for f in finals if f.run_id in alive])
    await slo_counts.count_runs(connection, sorted(applied))
    return len(kept)


def _is_database_error(exc: BaseException | None) -> bool:
    return isinstance(exc, OSError | DBAPIError | asyncpg.PostgresError | asyncpg.InterfaceError
                      | TimeoutError)
