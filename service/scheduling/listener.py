"""Probe changes from every replica: a dedicated PostgreSQL connection LISTENs on the
`sustain_probes` channel, to which each write of a probe NOTIFYs its id (delivered on commit).
When the connection drops it is re-opened with backoff, followed by a full reconcile, since
notifications sent meanwhile are lost."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import asyncpg
from sqlalchemy import make_url

logger = logging.getLogger(__name__)

CHANNEL = "sustain_probes"
RETRY_MAX_S = 5.0


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class ProbeListener:
    def __init__(self, database_url: str, on_change: Callable[[int], Coroutine[Any, Any, None]],
                 on_reconnect: Callable[[], Awaitable[object]]) -> None:
        self.dsn = asyncpg_dsn(database_url)
        self.on_change = on_change
        self.on_reconnect = on_reconnect
        self.connected = False
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="probe-listener")

    @property
    def alive(self) -> bool:
        """Whether its loop runs (started, and neither ended nor cancelled)."""
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        delay = 0.2
        first = True
        while True:
            lost = asyncio.Event()
            try:
                connection = await asyncpg.connect(self.dsn, timeout=5)
            except Exception as exc:  # noqa: BLE001 - keep retrying whatever the cause
                if self.connected or first:
                    logger.warning("probe change listener cannot connect (%s); retrying",
                                   type(exc).__name__)
                self.connected = first = False
                await asyncio.sleep(delay)
                delay = min(RETRY_MAX_S, delay * 2)
                continue
            try:
                connection.add_termination_listener(lambda _, lost=lost: lost.set())
                await connection.add_listener(CHANNEL, self._notified)
                self.connected, delay = True, 0.2
                if not first:
                    await self.on_reconnect()
                first = False
                while not lost.is_set() and not connection.is_closed():
                    try:
                        await asyncio.wait_for(lost.wait(), timeout=RETRY_MAX_S)
                    except TimeoutError:
                        # notices a dead or half-open socket
                        await connection.execute("SELECT 1", timeout=RETRY_MAX_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the listener reconnects after any failure
                logger.debug("probe change listener failed (%s)", type(exc).__name__)
            finally:
                self.connected = False
                connection.terminate()
            logger.warning("probe change listener lost its connection; reconnecting")

    def _notified(self, connection: Any, pid: int, channel: str,  # noqa: ARG002 - asyncpg's
                  payload: str) -> None:  # listener signature; only the payload matters
        try:
            probe_id = int(payload)
        except ValueError:
            return
        task = asyncio.create_task(self._apply(probe_id))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _apply(self, probe_id: int) -> None:
        try:
            await self.on_change(probe_id)
        except Exception as exc:  # noqa: BLE001 - the periodic reconcile repairs it
            logger.warning("applying a change of probe %s failed (%s); the next reconcile "
                           "will", probe_id, type(exc).__name__)

    async def close(self) -> None:
        for task in [self._task, *self._pending]:
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in [self._task, *self._pending] if t is not None),
                             return_exceptions=True)
