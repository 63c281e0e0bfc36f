"""Sample exports over HTTP (a run's samples as a CSV stream, or as JSON pages): each holds
one of the replica's export slots (sustain.service.export.slots) from before its first
database read until its answer is written whole or its connection closes, and none holds a
database connection or transaction while it waits for the client.

Why: a reader that never reads used to keep a database session open across every write of a
CSV stream ("idle in transaction"); twenty of them took the whole pool, and with it the
connections samples are stored through. Now a stream reads one page per short transaction
(paged by the samples' `pos`, the cursor of the JSON pages) and writes it with no connection
held; the write deadline of the HTTP protocol closes a client that stops taking its answer;
and the slots bound how many answers are held in memory at once, per caller and in all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from sustain.service.api.auth import ANONYMOUS_VIEWER, PRINCIPAL_SCOPE_KEY, client_source
from sustain.service.db import samples as sample_queries
from sustain.service.db.models import Run
from sustain.service.errors import TooManyRequestsError
from sustain.service.export.csv_rows import csv_text
from sustain.service.runtime import Replica

EXPORT_RETRY_AFTER_S = 5
"""Retry-After (seconds) of a 429 for an export beyond the limits."""
CSV_PAGE_ROWS = 2000
"""Samples a CSV stream reads per transaction (and writes per chunk)."""
BODY_CHUNK_BYTES = 64 * 1024
"""A JSON page is written in pieces of this many bytes, each only once the client has taken
enough of the previous ones, so the page's slot is held until the client has read it."""


def caller_of(request: Request) -> str:
    """Whom an export counts against: the caller's key (by id, or by name for the bootstrap
    admin key), or, without a key, the client's address."""
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if principal is None or principal == ANONYMOUS_VIEWER:
        return f"address:{client_source(request.scope)}"
    if principal.key_id is not None:
        return f"key:{principal.key_id}"
    return f"key-name:{principal.name}"


class ExportSlot:
    """One export slot taken for a caller; `give_back` is idempotent."""

    def __init__(self, replica: Replica, caller: str) -> None:
        self._replica = replica
        self._caller = caller
        self._held = True

    def give_back(self) -> None:
        if self._held:
            self._held = False
            self._replica.exports.give_back(self._caller)


def take_export_slot(request: Request, replica: Replica) -> ExportSlot:
    """A slot for this request's caller; TooManyRequestsError (429, Retry-After) when the
    caller already holds SUSTAIN_EXPORT_MAX_CONCURRENT_PER_KEY or all callers together hold
    SUSTAIN_EXPORT_MAX_CONCURRENT."""
    caller = caller_of(request)
    slots = replica.exports
    if slots.take(caller):
        return ExportSlot(replica, caller)
    if slots.held_by(caller) >= slots.per_caller:
        why = (f"this caller already has {slots.per_caller} sample exports in flight "
               "(SUSTAIN_EXPORT_MAX_CONCURRENT_PER_KEY)")
    else:
        why = (f"{slots.total} sample exports are in flight "
               "(SUSTAIN_EXPORT_MAX_CONCURRENT)")
    raise TooManyRequestsError(f"{why}; retry later", EXPORT_RETRY_AFTER_S)


class ExportResponse(StreamingResponse):
    """A streamed answer that gives its export slot back once written whole, or once its
    connection is gone (however the stream ends)."""

    def __init__(self, content: AsyncIterator[bytes], slot: ExportSlot,
                 **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slot.give_back()


async def in_pieces(body: bytes, size: int = BODY_CHUNK_BYTES) -> AsyncIterator[bytes]:
    """`body` in pieces of `size` bytes."""
    for start in range(0, len(body), size):
        yield body[start:start + size]


async def csv_pages(sessions: async_sessionmaker[AsyncSession], run: Run, after: int | None,
                    rows_per_page: int = CSV_PAGE_ROWS,
                    render: Callable[..., str] = csv_text) -> AsyncIterator[bytes]:
    """A run's samples after `after` as CSV (header first), one short transaction per page of
    `rows_per_page`: the session is closed before each page is written, so no connection or
    transaction waits on the client. Ends at the first short page (a running run's later
    samples are read as they arrive until then)."""
    yield render([], header=True).encode()
    while True:
        async with sessions() as session:
            rows = await sample_queries.page(session, run, after, rows_per_page)
        if rows:
            yield (await asyncio.to_thread(render, rows, header=False)).encode()
        if len(rows) < rows_per_page:
            return
        after = rows[-1]["pos"]
