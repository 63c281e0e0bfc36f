"""The one task that drains the SampleBuffer into Postgres.

Each batch (up to BATCH_SAMPLES rows, plus the finals that follow them) is one transaction:
the rows of runs that still exist, then each final with its sketches and rollups.

A batch can fail two ways (see runs/refusals.py). When the database is *unavailable*, the
batch is retried, with backoff and without end, before anything after it; the buffer keeps it
meanwhile. When the database *refuses a record* (a value out of range, text or JSON it cannot
hold, a non-finite figure), retrying could never succeed: the batch is stored record by record
instead (ingest/store.py), the refused records are kept in `dead_letters`, their runs are
stored `failed` with the reason, and everything else is stored at once. Retries cannot
duplicate: rows are keyed on (run_id, pos) and a final only applies to a run that is not
final yet.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from datetime import UTC, date, datetime

import asyncpg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

from sustain.service.db import partitions
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.ingest.store import RunRefusals, Stored, failed_final, store, store_each
from sustain.service.runs.finals import RunFinal
from sustain.service.runs.refusals import refusal_reason
from sustain.service.runs.rows import SampleTuple, sent_at

logger = logging.getLogger(__name__)

BATCH_SAMPLES = 5000
LINGER_S = 0.05
"""How long a small batch waits for company: fewer, larger transactions."""
BATCH_TIMEOUT_S = 60.0
"""A batch that takes longer (a hung connection) is abandoned and retried."""
ISOLATING_TIMEOUT_S = 900.0
"""The same for a batch stored record by record: rows Python can tell are refused are set
aside without a round trip, but each row the database itself refuses costs a few."""
RETRY_UNEXPECTED_S = 5.0
"""Wait before trying again a batch whose write failed in a way nothing here foresaw."""
MAX_PENDING_RUNS = 10_000
"""Runs remembered as having refused samples until their final record comes (a run whose
final never comes, abandoned, is forgotten first)."""
LOGGED_PER_BATCH = 5
"""Refused records logged one by one per batch; the rest are counted in one line."""


class RefusalCounts:
    """Records the database refused, by reason, and the newest, for /metrics and /readyz."""

    def __init__(self) -> None:
        self.by_reason: Counter[str] = Counter()
        self.newest: str | None = None
        self.newest_at: datetime | None = None

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())

    def add(self, stored: Stored, context: str) -> None:
        """Count and log what `store_each` refused (after its transaction committed)."""
        for i, refused in enumerate(stored.refused):
            self.by_reason[refused.reason] += 1
            what = (f"sample {refused.pos} of run {refused.run_id}" if refused.kind == "sample"
                    else f"the final record of run {refused.run_id}")
            self.newest = f"{what} (probe {refused.probe_id}): {refused.reason}"
            self.newest_at = datetime.now(UTC)
            if i < LOGGED_PER_BATCH:
                logger.warning("the database refused %s (probe %s; %s: %s); kept in "
                               "dead_letters, the run is stored failed, the rest of the %s "
                               "is stored", what, refused.probe_id, refused.reason,
                               refused.error, context)
        if len(stored.refused) > LOGGED_PER_BATCH:
            logger.warning("the database refused %d more records of the %s; kept in "
                           "dead_letters", len(stored.refused) - LOGGED_PER_BATCH, context)
        if stored.unkept is not None:
            logger.error("the refused records could not be kept in dead_letters either (%s); "
                         "their runs are failed with the reason", stored.unkept)
        for run_id in stored.unrecorded:
            logger.error("the database refused even a bare failed record of run %s; it stays "
                         "running until found abandoned", run_id)


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
        """Failed attempts to write a batch while the database was unavailable."""
        self.last_error: str | None = None
        """Why the newest attempt failed (the database unavailable); None once a batch
        succeeds again."""
        self.refusals = RefusalCounts()
        """Records the database refused (each kept in dead_letters, its run failed)."""
        self._pending: OrderedDict[int, RunRefusals] = OrderedDict()
        """Runs with refused samples whose final record is still to come."""
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
            try:
                await self._write_until_done(items)
            except Exception:  # never end the writer: what is buffered would wait forever
                self.failures_total += 1
                self.last_error = "unexpected"
                logger.exception("writing %d buffered samples failed unexpectedly; trying "
                                 "again in %ss", self.buffer.samples, RETRY_UNEXPECTED_S)
                await asyncio.sleep(RETRY_UNEXPECTED_S)
                continue
            self.buffer.pop(len(items))

    async def _write_until_done(self, items: list[SampleTuple | RunFinal]) -> None:
        """Write the batch, retrying only while the database is unavailable (a refused
        record is not retried: `_write` stores around it)."""
        retrying = AsyncRetrying(
            retry=retry_if_exception(lambda exc: refusal_reason(exc) is None),
            wait=wait_exponential(multiplier=0.2, max=5.0),
            before_sleep=self._failed,
        )
        async for attempt in retrying:
            with attempt:
                started = time.perf_counter()
                await self._write(items)
        if self.on_batch is not None:
            self.on_batch(time.perf_counter() - started)
        self.last_error = None

    def _failed(self, state: RetryCallState) -> None:
        self.failures_total += 1
        self._days.clear()
        exc = state.outcome.exception() if state.outcome is not None else None
        self.last_error = type(exc).__name__
        logger.warning("writing %d buffered samples failed: the database is unavailable "
                       "(%s, attempt %d); retrying", self.buffer.samples, self.last_error,
                       state.attempt_number, exc_info=not _is_database_error(exc))

    async def _write(self, items: list[SampleTuple | RunFinal]) -> None:
        """One batch: at once, within BATCH_TIMEOUT_S (a hung connection is abandoned and
        the batch retried); when the database refuses a record of it, record by record,
        within ISOLATING_TIMEOUT_S (a batch of many refused rows takes longer, and must not
        be taken for an unavailable database)."""
        rows = [item for item in items if isinstance(item, tuple)]
        finals = [item for item in items if isinstance(item, RunFinal)]
        refused_rows = 0
        try:
            async with asyncio.timeout(BATCH_TIMEOUT_S):
                new_days = {partitions.utc_day(sent_at(row)) for row in rows} - self._days
                if new_days:
                    async with self.engine.begin() as connection:
                        await partitions.ensure(connection, new_days)
                    self._days |= new_days
                async with self.engine.begin() as connection:
                    kept = await store(connection, rows, [
                        failed_final(f, self._pending.get(f.run_id)) for f in finals])
        except Exception as exc:
            if refusal_reason(exc) is None:
                raise
            async with asyncio.timeout(ISOLATING_TIMEOUT_S), self.engine.begin() as connection:
                stored = await store_each(connection, rows, finals, self._pending)
            kept = stored.kept
            refused_rows = sum(1 for r in stored.refused if r.kind == "sample")
            self._refused(stored)
        for final in finals:
            self._pending.pop(final.run_id, None)
        self.written_total += kept
        orphaned = len(rows) - kept - refused_rows
        if orphaned:
            self.orphaned_total += orphaned
            logger.info("discarded %d samples of deleted runs", orphaned)

    def _refused(self, stored: Stored) -> None:
        self.refusals.add(stored, "batch")
        for run_id, refusals in stored.pending.items():
            self._pending[run_id] = refusals
            self._pending.move_to_end(run_id)
        while len(self._pending) > MAX_PENDING_RUNS:
            self._pending.popitem(last=False)

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
            why = (f"the database was unavailable ({self.last_error})"
                   if self.last_error is not None else "the writer did not finish in time")
            logger.error("stopping with %d samples not written: %s for %ss",
                         self.buffer.samples, why, timeout_s)
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def _is_database_error(exc: BaseException | None) -> bool:
    return isinstance(exc, OSError | DBAPIError | asyncpg.PostgresError | asyncpg.InterfaceError
                      | TimeoutError)
