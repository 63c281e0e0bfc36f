"""Storing the runs agents upload: each whole, in one transaction, once, and within bounds.

An agent uploads a finished run in parts (samples), the last with its final record. Each
part is decoded and checked in a worker thread (never on the event loop) before anything is
kept: its samples' timings, counts and ITL gaps within bounds, sent inside the run's window
(so one upload touches a day or two of `samples` partitions), its final record's summary
true to its schema and its label-bearing names from their closed sets
(runs.upload). An unclaimed upload's tick must be a tick of its probe's schedule, not
in the future and not older than SUSTAIN_AGENT_UPLOAD_MAX_AGE_S.

The parts wait in `agent_upload_parts`, bounded in bytes, counted in the database: one
upload's parts together at most SUSTAIN_AGENT_UPLOAD_MAX_BYTES (413 for the part that
crosses it: the upload can never complete, its parts go), and all the unfinished uploads of
one agent key as much (409 for a part beyond it: retry once the others finish or expire).

When the last part is in and none is missing, the run is assembled: the parts are decoded
again, one at a time in a worker thread, into `samples` rows (ITL gaps reduced to count,
mean and max at once), at most ASSEMBLIES uploads at a time per process, so the memory this
takes is that of one upload's rows, and all of it before the probe's advisory lock is taken.
Then, in one transaction under that lock, the run is stored as every finished run is
(ingest.store.store_run, as a replica's offline run): a run the agent claimed through the API
gets its samples and final record (also when the service marked it `abandoned` because the
agent's heartbeat went stale during an outage: it was measured, and nothing else was stored
for it); a tick the agent measured without a claim (the service was unreachable) is claimed
now (runs.claim_measured), taking over the agent's own empty claim of it when that claim
was committed but its answer was lost. When that location's tick already has a run, nothing
is stored (outcome `partition`, naming that run): at most one run per probe, tick and location,
however many upload ids come for it. The stored run is marked with the upload's id, so an
upload sent again finds it and stores nothing.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.config import Settings
from sustain.service.db import agents as agent_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Endpoint, Probe, Run
from sustain.service.errors import ConflictError, TooLargeError
from sustain.service.ingest.store import Stored, store_run
from sustain.service.policy.limits import BUDGET_GRACE_S
from sustain.service.runs.finals import RunFinal
from sustain.service.runs.label_sets import currency_of, server_series
from sustain.service.runs.rows import SampleTuple, sample_tuple
from sustain.service.runs.upload import (
    MAX_PARTS,
    UploadError,
    UploadLimits,
    currencies,
    decode_final,
    decode_samples,
    epoch_time,
    run_window,
    server_series_names,
)
from sustain.service.scheduling.scheduler import schedule_of

ASSEMBLIES = 1
"""Uploads one process assembles at once (the others wait their turn): what bounds the
memory of assembly to that of one upload's rows."""
TICK_EARLY_S = 5.0
"""How far in the future an unclaimed upload's tick may be (clocks differ a little)."""

_assembling: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = \
    weakref.WeakKeyDictionary()


DECODES = 2
"""Parts one process decodes at once (the others wait their turn): with MAX_CONTAINERS and
the body cap, what bounds the memory of decoding."""

_decoding: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = \
    weakref.WeakKeyDictionary()


def decoding() -> asyncio.Semaphore:
    """This event loop's turn at decoding a part (one semaphore per loop)."""
    loop = asyncio.get_running_loop()
    semaphore = _decoding.get(loop)
    if semaphore is None:
        semaphore = _decoding[loop] = asyncio.Semaphore(DECODES)
    return semaphore


def assembling() -> asyncio.Semaphore:
    """This event loop's turn at assembling uploads (one semaphore per loop)."""
    loop = asyncio.get_running_loop()
    semaphore = _assembling.get(loop)
    if semaphore is None:
        semaphore = _assembling[loop] = asyncio.Semaphore(ASSEMBLIES)
    return semaphore


@dataclass(frozen=True, slots=True)
class AgentUploadLimits:
    """The service's bounds on agent uploads (its settings)."""

    upload: UploadLimits
    max_bytes: int
    """SUSTAIN_AGENT_UPLOAD_MAX_BYTES: one upload's parts together, and all the unfinished
    uploads of one agent key."""
    max_age_s: float
    """SUSTAIN_AGENT_UPLOAD_MAX_AGE_S: how old an unclaimed upload's tick may be."""

    @classmethod
    def of(cls, settings: Settings) -> AgentUploadLimits:
        return cls(UploadLimits(max_itl_values=settings.agent_upload_max_itl_values,
                                run_s=settings.max_run_s + BUDGET_GRACE_S,
                                max_samples=settings.max_run_requests),
                   max_bytes=settings.agent_upload_max_bytes,
                   max_age_s=settings.agent_upload_max_age_s)


@dataclass(frozen=True, slots=True)
class Part:
    """One part as it arrived (checked): who sent it, which run it belongs to."""

    upload_id: uuid.UUID
    part: int
    parts: int
    probe_id: int
    tick: datetime
    run_id: int | None
    started_at: datetime
    dropped: int
    samples: int
    """How many samples it carries (they were checked, and are decoded again at assembly)."""
    final: RunFinal | None
    """The final record (the last part only), checked, its run id 0 until the run is known."""


def _int(data: dict[str, object], name: str, low: int, high: int) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UploadError(name, f"a whole number from {low} to {high}")
    return value


MAX_CONTAINERS = 150_000
"""Arrays and maps one part may hold. A true part holds at most 5,000 sample rows, each with
its ITL list and at most 16 RAG stages (~95,000), or a final record that fits the body; a
body of a million empty maps would otherwise decode to ~140 MB of objects before any check
could refuse it."""


class Containers:
    """Counts the arrays and maps msgpack builds, refusing the part past `limit` (msgpack
    calls the hooks as each is built, so decoding stops there)."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    def _one(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise UploadError("body", f"more than {MAX_CONTAINERS} arrays and maps in one part")

    def list(self, items: list[Any]) -> list[Any]:
        self._one()
        return items

    def map(self, mapping: dict[Any, Any]) -> dict[Any, Any]:
        self._one()
        return mapping


def decode_part(body: bytes, limits: UploadLimits, probe_id: int | None = None,
                rows: list[SampleTuple] | None = None) -> Part:
    """A part from its msgpack body, checked (CPU-bound: run it in a worker thread);
    UploadError naming the field that is wrong (with the upload's id once it is read).
    With `rows`, its samples are appended to it as `samples` rows of `probe_id` (run id 0,
    positions following those already there)."""
    containers = Containers(MAX_CONTAINERS)
    try:
        data = msgpack.unpackb(body, raw=False, strict_map_key=True,
                               list_hook=containers.list, object_hook=containers.map)
    except UploadError:
        raise
    except (ValueError, msgpack.UnpackException, TypeError):
        raise UploadError("body", "not a msgpack map") from None
    if not isinstance(data, dict):
        raise UploadError("body", "not a msgpack map")
    try:
        upload_id = uuid.UUID(str(data.get("upload_id")))
    except ValueError:
        raise UploadError("upload_id", "a UUID") from None
    try:
        return _decode(data, upload_id, limits, probe_id, rows)
    except UploadError as exc:
        exc.upload_id = upload_id
        raise


def _decode(data: dict[str, object], upload_id: uuid.UUID, limits: UploadLimits,
            probe_id: int | None, rows: list[SampleTuple] | None) -> Part:
    parts = _int(data, "parts", 1, MAX_PARTS)
    part = _int(data, "part", 0, parts - 1)
    run_id = data.get("run_id")
    if run_id is not None:
        run_id = _int(data, "run_id", 1, 2**63 - 1)
    raw_final = data.get("final")
    if (part == parts - 1) != (raw_final is not None):
        raise UploadError("final", "comes with the last part, and only with it")
    probe = _int(data, "probe_id", 1, 2**63 - 1)
    tick = epoch_time(data.get("tick"), "tick")
    started_at = epoch_time(data.get("started_at"), "started_at")
    dropped = _int(data, "dropped", 0, 2**31 - 1)
    window = run_window(tick, started_at, limits)
    samples = decode_samples(data.get("samples"), limits, window)
    if rows is not None:
        rows.extend(sample_tuple(0, len(rows) + index, probe_id or probe, sample)
                    for index, sample in enumerate(samples))
    final = None if raw_final is None else decode_final(raw_final, 0, probe, tick, dropped)
    return Part(upload_id=upload_id, part=part, parts=parts, probe_id=probe, tick=tick,
                run_id=run_id, started_at=started_at, dropped=dropped, samples=len(samples),
                final=final)


def assemble(bodies: dict[int, bytes], expected: Part, limits: UploadLimits
             ) -> tuple[Part, list[SampleTuple]]:
    """The whole run from its parts' bodies (CPU-bound: run it in a worker thread): its
    last part (with the final record) and every sample as a `samples` row (run id 0), in
    part order. Each body is let go of once decoded, so the rows and one part's samples are
    all it holds at once. UploadError when a part disagrees with `expected` (the last part,
    as checked on arrival) on the run it belongs to."""
    rows: list[SampleTuple] = []
    last = expected
    for number in range(expected.parts):
        last = decode_part(bodies.pop(number), limits, expected.probe_id, rows)
        if len(rows) > limits.max_samples:
            raise UploadError("samples", f"more than {limits.max_samples} samples in one "
                              "upload (SUSTAIN_MAX_RUN_REQUESTS: no run sends more)")
        for name in ("parts", "probe_id", "tick", "run_id", "started_at", "dropped"):
            if getattr(last, name) != getattr(expected, name):
                raise UploadError(name, f"part {number} says otherwise than the last part")
    if last.final is None:
        raise UploadError("final", "comes with the last part")
    return last, rows


@dataclass(frozen=True, slots=True)
class Outcome:
    outcome: str
    run_id: int | None = None
    missing: tuple[int, ...] = ()
    detail: str | None = None
    stored: Stored | None = None


async def receive(session: AsyncSession, body: bytes, agent_id: str, fleet: str,
                  location: str, limits: AgentUploadLimits) -> Outcome:
    """Take one part: keep it, and when it completes its upload, store the whole run. Commits
    as it goes (the part is kept before the run is assembled). UploadError for a part that
    is not one, TooLargeError for one beyond its upload's bytes (the upload's waiting parts
    go with either: it cannot complete); ConflictError when the agent key's unfinished
    uploads already hold SUSTAIN_AGENT_UPLOAD_MAX_BYTES."""
    try:
        async with decoding():
            part = await asyncio.to_thread(decode_part, body, limits.upload)
    except UploadError as exc:
        if exc.upload_id is not None:
            await _refused(session, exc.upload_id, fleet)
        raise
    try:
        return await _receive(session, part, body, agent_id, fleet, location, limits)
    except (UploadError, TooLargeError):
        await _refused(session, part.upload_id, fleet)
        raise


async def _refused(session: AsyncSession, upload_id: uuid.UUID, fleet: str) -> None:
    """Drop a refused upload's waiting parts (the agent sets the run aside; they would only
    hold the key's bytes until they expire)."""
    await session.rollback()
    await agent_queries.forget_parts(session, upload_id, fleet)
    await session.commit()


async def _receive(session: AsyncSession, part: Part, body: bytes, agent_id: str, fleet: str,
                   location: str, limits: AgentUploadLimits) -> Outcome:
    await agent_queries.lock_uploads(session, fleet)
    done = await agent_queries.run_of_upload(session, part.upload_id)
    if done is not None:
        return Outcome("duplicate", done)
    probe = await session.get(Probe, part.probe_id)
    if probe is not None and location in probe.locations:
        if part.run_id is None:
            check_tick(probe, part.tick, datetime.now(UTC), limits.max_age_s)
        if part.final is not None:
            check_final_names(part.final, await session.get(Endpoint, probe.endpoint_id))
    own, waiting = await agent_queries.waiting_bytes(session, part.upload_id, part.part, fleet)
    if own + len(body) > limits.max_bytes:
        raise TooLargeError(
            f"upload {part.upload_id}: its parts come to more than {limits.max_bytes} bytes "
            "(SUSTAIN_AGENT_UPLOAD_MAX_BYTES); it is refused whole")
    if part.parts > 1 and waiting + len(body) > limits.max_bytes:
        raise ConflictError(
            f"the unfinished uploads of this agent key already hold {waiting} bytes "
            f"(SUSTAIN_AGENT_UPLOAD_MAX_BYTES is {limits.max_bytes}); finish an upload "
            "(send its remaining parts) before starting another")
    await agent_queries.keep_part(session, part.upload_id, part.part, agent_id, fleet, body)
    if part.final is None:
        await session.commit()
        return Outcome("part")
    have = await agent_queries.part_numbers(session, part.upload_id, agent_id)
    await session.commit()
    missing = tuple(n for n in range(part.parts) if n not in have)
    if missing:
        return Outcome("part", missing=missing[:100])
    async with assembling():
        bodies = await agent_queries.parts(session, part.upload_id, agent_id)
        await session.commit()  # nothing is held in the database while it is decoded
        if len(bodies) < part.parts:  # taken over by another process meanwhile
            return Outcome("part", missing=tuple(n for n in range(part.parts)
                                                 if n not in bodies)[:100])
        last, rows = await asyncio.to_thread(assemble, bodies, part, limits.upload)
    await run_queries.lock_probe(session, part.probe_id)
    done = await agent_queries.run_of_upload(session, part.upload_id)
    if done is not None:
        return Outcome("duplicate", done)
    outcome = await _store(session, last, rows, agent_id, location)
    await agent_queries.forget_parts(session, part.upload_id)
    await session.commit()
    return outcome


def check_tick(probe: Probe, tick: datetime, now: datetime, max_age_s: float) -> None:
    """An unclaimed upload's tick is one of its probe's schedule, not in the future (give or
    take TICK_EARLY_S) and not older than `max_age_s`: an agent cannot claim its location's
    future, or ticks off the schedule, by uploading them."""
    if schedule_of(probe).next_after(tick - timedelta(microseconds=1)) != tick:
        raise UploadError("tick", "not a tick of the probe's schedule")
    if tick > now + timedelta(seconds=TICK_EARLY_S):
        raise UploadError("tick", "in the future")
    if tick < now - timedelta(seconds=max_age_s):
        raise UploadError("tick", f"older than {max_age_s:g} s "
                          "(SUSTAIN_AGENT_UPLOAD_MAX_AGE_S)")


def check_final_names(final: RunFinal, endpoint: Endpoint | None) -> None:
    """The server series a final record names are the built-in ones or its endpoint's
    `metrics_names`, and it prices in its endpoint's currency (one per probe)."""
    names = server_series(None if endpoint is None else endpoint.metrics_names)
    for name, where in server_series_names(final).items():
        if name not in names:
            raise UploadError(where, "not a server series sustain reads from this endpoint "
                              "(built-in, or one of its metrics_names)")
    expected = currency_of(None if endpoint is None else endpoint.deployment)
    for currency, where in currencies(final).items():
        if currency != expected:
            raise UploadError(where, f"the endpoint's deployment's currency, {expected}")


async def _store(session: AsyncSession, part: Part, rows: list[SampleTuple], agent_id: str,
                 location: str) -> Outcome:
    assert part.final is not None
    probe = await session.get(Probe, part.probe_id)
    if probe is None or location not in probe.locations:
        return Outcome("dropped", detail=f"probe {part.probe_id} is gone, or no longer runs "
                       f"from location {location}")
    if part.run_id is None:
        run_id = await run_queries.claim_measured(session, part.probe_id, part.tick, agent_id,
                                                  location, part.started_at)
        if run_id is None:
            taken = await session.scalar(select(Run.id).where(
                Run.probe_id == part.probe_id, Run.location == location,
                Run.scheduled_for == part.tick, Run.trigger == "schedule"))
            return Outcome("partition", taken, detail=(
                f"tick {part.tick.isoformat()} already has run {taken} in location "
                f"{location}; these {len(rows) + part.dropped} samples were not kept"))
    else:
        run = (await session.execute(select(Run).where(Run.id == part.run_id)
                                     .with_for_update())).scalar_one_or_none()
        if run is None or run.probe_id != part.probe_id or run.claimed_by != agent_id \
                or run.location != location:
            return Outcome("dropped", detail=f"run {part.run_id} is not this agent's")
        if abs((run.scheduled_for - part.tick).total_seconds()) > 0.001:
            raise UploadError("tick", f"not the tick of run {part.run_id}")
        if run.status == "abandoned":  # the agent's heartbeat went stale: it measured on
            run.status, run.finished_at, run.error = "running", None, None
            await session.flush()
        elif run.status != "running":
            return Outcome("dropped", part.run_id, detail=f"run {part.run_id} is already "
                           f"{run.status}")
        run_id = run.id
    stored = await store_run(await session.connection(), run_id, rows, part.final)
    await session.execute(update(Run).where(Run.id == run_id).values(upload_id=part.upload_id))
    return Outcome("stored", run_id, stored=stored)
