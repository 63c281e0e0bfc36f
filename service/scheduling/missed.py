"""Recording ticks nobody started as `missed`, for every probe at once: one statement inserts
the missed ticks of every probe and location of a reconcile pass (chunked at CHUNK rows),
one moves every probe's watermark, whatever the number of probes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

CHUNK = 50_000
"""Most ticks one statement records (a first pass after a long outage may hold many)."""

RECORD_MISSED = text("""
    INSERT INTO runs (probe_id, location, trigger, scheduled_for, status, finished_at, error)
    SELECT m.probe_id, m.location, 'schedule', m.tick, 'missed', now(), m.reason
    FROM unnest(CAST(:probe_ids AS bigint[]), CAST(:locations AS text[]),
                CAST(:ticks AS timestamptz[]), CAST(:reasons AS text[]))
         AS m(probe_id, location, tick, reason)
    ON CONFLICT (probe_id, location, scheduled_for) WHERE trigger = 'schedule' DO NOTHING
    RETURNING probe_id, location
""")

ADVANCE_CHECKED = text("""
    UPDATE probes SET ticks_checked_until = GREATEST(probes.ticks_checked_until, a.until)
    FROM unnest(CAST(:ids AS bigint[]), CAST(:untils AS timestamptz[])) AS a(id, until)
    WHERE probes.id = a.id
""")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A tick of a probe in a location that may have been missed (recorded unless it has a
    run there)."""

    probe_id: int
    location: str
    tick: datetime
    reason: str


async def record(session: AsyncSession, candidates: Sequence[Candidate]
                 ) -> Counter[tuple[int, str]]:
    """Record the candidates that have no run in their location as `missed`; how many were
    recorded, by (probe id, location)."""
    recorded: Counter[tuple[int, str]] = Counter()
    for start in range(0, len(candidates), CHUNK):
        chunk = candidates[start:start + CHUNK]
        rows = await session.execute(RECORD_MISSED, {
            "probe_ids": [c.probe_id for c in chunk], "locations": [c.location for c in chunk],
            "ticks": [c.tick for c in chunk], "reasons": [c.reason for c in chunk]})
        recorded.update((int(r[0]), str(r[1])) for r in rows)
    return recorded


async def advance(session: AsyncSession, untils: dict[int, datetime]) -> None:
    """Move each probe's missed-tick watermark forward to its time (never back)."""
    if untils:
        ids = sorted(untils)
        await session.execute(ADVANCE_CHECKED, {"ids": ids,
                                                "untils": [untils[i] for i in ids]})
