"""Storing sample rows and final records: the one place a run's samples and its final record
are written, whichever way the run came.

- `store_run`: a finished run, whole, in the caller's transaction once the caller has claimed
  or created it: a tick measured during a database outage (scheduling/offline.py), a run an
  agent uploaded (scheduling/agent_runs.py), a `sustain probe` run saved (cli/oneshot.py).
  Its rows go in STORE_CHUNK at a time, then its final record, all through `store_each`.
- `store` and `store_each`: the streaming writer's batches (ingest/writer.py). A live run's
  samples are stored while it runs, batch by batch with other runs' samples, and its final
  record rides in a later batch; so the writer cannot hand over a whole run, but its final
  step is the same as `store_run`'s: a final record goes in through `store` (directly, or
  through `store_each`), failed with the reason when samples of its run were refused.

What a final record writes (status, error, counts, summary, sketches, server series, the
hourly and daily rollups: `db.results.apply_all`; then the run's SLO counts:
`db.slo_counts.count_runs`) is `store`'s, for every path. A final applies only to a run that
is not final yet, and rows are keyed on (run_id, pos): a retry stores nothing twice.

`store` is the fast path: a batch's rows and finals in a handful of set-based statements. If
the database refuses anything in it, the whole statement fails and says nothing of which
record it was; `store_each` then stores the batch run by run under savepoints, halving a
run's rows until each refused row stands alone, so everything the database accepts is
stored, and returns what it refused. A run with a refused record is stored `failed`, with the
reason, and a refused final record is stored again without the parts that can be refused
(its summary; then everything but the status and the reason).

All run inside the caller's transaction; anything but a refusal (see
`runs.refusals.refusal_reason`) propagates, so the caller retries (the batch, or the run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy.ext.asyncio import AsyncConnection

from sustain.service.db import dead_letters, partitions, results, samples, slo_counts
from sustain.service.runs.finals import RunFinal
from sustain.service.runs.refusals import (
    Refused,
    describe,
    refusal_reason,
    refused_final,
    refused_sample,
    run_error,
    sample_refusal,
)
from sustain.service.runs.rows import PROBE_ID, RUN_ID, SampleTuple, row_problem, sent_at


async def store(connection: AsyncConnection, rows: Sequence[SampleTuple],
                finals: Sequence[RunFinal]) -> int:
    """Write rows, then finals (inside a transaction, partitions in place). Rows and finals of
    runs deleted meanwhile are skipped; returns how many rows were kept."""
    alive = await samples.live_runs(
        connection, {row[RUN_ID] for row in rows} | {f.run_id for f in finals})
    kept = [row for row in rows if row[RUN_ID] in alive]
    await samples.insert(connection, kept)
    applied = await results.apply_all(connection, [f for f in finals if f.run_id in alive])
    await slo_counts.count_runs(connection, sorted(applied))
    return len(kept)


@dataclass(frozen=True, slots=True)
class RunRefusals:
    """What the database refused of one run so far: how many samples, and the first."""

    samples: int
    first: Refused


@dataclass(slots=True)
class Stored:
    """What `store_each` did."""

    kept: int = 0
    """Sample rows stored."""
    refused: list[Refused] = field(default_factory=list)
    """Records refused, in the order met; kept in dead_letters by then."""
    pending: dict[int, RunRefusals] = field(default_factory=dict)
    """Runs with refused samples whose final record was not in this batch: it must be stored
    failed when it comes."""
    failed: dict[int, str] = field(default_factory=dict)
    """Runs stored failed because of a refusal, with the error recorded on each."""
    unrecorded: list[int] = field(default_factory=list)
    """Runs whose final record was refused even with its status and reason only: they stay
    `running` until they are found abandoned."""
    unkept: str | None = None
    """Why the refused records could not be kept in dead_letters (the database refused them
    too); None when they were."""


def failed(final: RunFinal, error: str) -> RunFinal:
    """`final` with a refusal's `error` added: a run that would have succeeded is `failed`;
    one already failed, cancelled or abandoned keeps its status, and its own error comes
    first."""
    return replace(final, status="failed" if final.status == "succeeded" else final.status,
                   error=f"{final.error}; {error}" if final.error else error)


def failed_final(final: RunFinal, refusals: RunRefusals | None) -> RunFinal:
    """`final`, failed with the reason when some of its run's samples were refused."""
    if refusals is None:
        return final
    return failed(final, run_error(refusals.samples, refusals.first, None))


async def store_each(connection: AsyncConnection, rows: Sequence[SampleTuple],
                     finals: Sequence[RunFinal],
                     earlier: Mapping[int, RunRefusals] | None = None) -> Stored:
    """Store what the database accepts of `rows` and `finals`, run by run, and keep what it
    refuses in dead_letters. `earlier`: refusals of these runs' samples in earlier batches
    (their finals are stored failed: pass `finals` as the runs made them)."""
    earlier = earlier or {}
    groups: dict[int, tuple[list[SampleTuple], list[RunFinal]]] = {}
    for row in rows:
        groups.setdefault(row[RUN_ID], ([], []))[0].append(row)
    for final in finals:
        groups.setdefault(final.run_id, ([], []))[1].append(final)
    alive = await samples.live_runs(connection, set(groups))
    stored = Stored()
    for run_id, (run_rows, run_finals) in groups.items():
        if run_id not in alive:  # deleted meanwhile, as `store` skips them
            continue
        kept, refused = await _rows(connection, run_rows)
        stored.kept += kept
        stored.refused += refused
        before = earlier.get(run_id)
        so_far = before
        if refused:
            so_far = RunRefusals((before.samples if before else 0) + len(refused),
                                 before.first if before else refused[0])
        if not run_finals:
            if so_far is not None and refused:
                stored.pending[run_id] = so_far
            continue
        error = await _final(connection, run_finals[-1], so_far, stored)
        if error is not None:
            stored.failed[run_id] = error
    if stored.refused:
        try:
            async with connection.begin_nested():
                await dead_letters.keep(connection, stored.refused)
        except Exception as exc:
            if refusal_reason(exc) is None:
                raise
            stored.unkept = describe(exc)
    return stored


STORE_CHUNK = 5_000
"""Rows `store_run` writes in one statement: a large run goes in as the writer's batches do,
never as one statement (and one copy of every row by column) the size of the run."""


async def store_run(connection: AsyncConnection, run_id: int, rows: Sequence[SampleTuple],
                    final: RunFinal) -> Stored:
    """Store a finished run whole: its sample rows, then its final record, in the caller's
    transaction, after the caller has claimed or created run `run_id` (and holds whatever
    lock keeps a second copy out). The rows and the final may have been made before the run
    id was known: theirs is replaced by `run_id`. The day partitions the rows need are made
    first; the rows go in STORE_CHUNK at a time, so that what the database refuses, in
    whichever chunk, is kept in dead_letters and fails the run (with the reason), never the
    rest of it. Returns what was stored and refused (the caller counts and logs refusals)."""
    await partitions.ensure(connection, {partitions.utc_day(sent_at(row)) for row in rows})
    total = Stored()
    earlier: dict[int, RunRefusals] = {}
    for start in range(0, len(rows), STORE_CHUNK):
        chunk = [(run_id, *row[1:]) for row in rows[start:start + STORE_CHUNK]]
        done = await store_each(connection, chunk, [], earlier)
        total.kept += done.kept
        total.refused += done.refused
        total.unkept = total.unkept or done.unkept
        earlier.update(done.pending)
    done = await store_each(connection, [], [replace(final, run_id=run_id)], earlier)
    total.refused += done.refused
    total.failed.update(done.failed)
    total.unrecorded += done.unrecorded
    total.unkept = total.unkept or done.unkept
    return total


async def _rows(connection: AsyncConnection, rows: list[SampleTuple]
                ) -> tuple[int, list[Refused]]:
    """Store one live run's `rows`: those Python can tell the database would refuse are set
    aside at once; the rest go in under a savepoint and, where refused, each half on its own,
    down to the single rows the database refuses. Returns (rows kept, rows refused)."""
    refused: list[Refused] = []
    good: list[SampleTuple] = []
    for row in rows:
        problem = row_problem(row)
        if problem is None:
            good.append(row)
        else:
            refused.append(sample_refusal(row, row[PROBE_ID], *problem))
    kept, rest = await _halving(connection, good)
    return kept, sorted([*refused, *rest], key=lambda r: r.pos or 0)


async def _halving(connection: AsyncConnection, rows: list[SampleTuple]
                   ) -> tuple[int, list[Refused]]:
    if not rows:
        return 0, []
    try:
        async with connection.begin_nested():
            await samples.insert(connection, rows)
        return len(rows), []
    except Exception as exc:
        if refusal_reason(exc) is None:
            raise
        if len(rows) == 1:
            return 0, [refused_sample(rows[0], rows[0][PROBE_ID], exc)]
    middle = len(rows) // 2
    kept_a, refused_a = await _halving(connection, rows[:middle])
    kept_b, refused_b = await _halving(connection, rows[middle:])
    return kept_a + kept_b, refused_a + refused_b


async def _final(connection: AsyncConnection, final: RunFinal,
                 so_far: RunRefusals | None, stored: Stored) -> str | None:
    """Store a run's final record (failed when `so_far` says samples of it were refused); if
    refused, again without its summary, then with its status and reason only. Returns the
    error stored on the run when it was failed for a refusal, else None."""
    marked = failed_final(final, so_far)
    try:
        async with connection.begin_nested():
            await store(connection, [], [marked])
        return marked.error if so_far is not None else None
    except Exception as exc:
        if refusal_reason(exc) is None:
            raise
        refusal = refused_final(marked, exc)
    stored.refused.append(refusal)
    error = run_error(so_far.samples if so_far else 0, so_far.first if so_far else None,
                      refusal)
    without_summary = replace(failed(final, error), summary=None)
    bare = RunFinal(run_id=final.run_id, probe_id=final.probe_id,
                    scheduled_for=final.scheduled_for, status=without_summary.status,
                    error=without_summary.error, samples_dropped=final.samples_dropped)
    for candidate in (without_summary, bare):
        try:
            async with connection.begin_nested():
                await store(connection, [], [candidate])
            return candidate.error
        except Exception as exc:
            if refusal_reason(exc) is None:
                raise
    stored.unrecorded.append(final.run_id)
    return None
