"""The server `sustain serve` and `sustain demo` run: uvicorn, stopped the Kubernetes way. On
SIGTERM the replica first turns /readyz to 503, stops claiming ticks and lets its runs finish
(up to SUSTAIN_SHUTDOWN_GRACE_S) while it still answers HTTP; only then does uvicorn
stop, and the app's lifespan abandons what is left and flushes buffered samples. SIGINT
(Ctrl-C) skips the wait. What each client connection may hold (a request deadline, an
open-connection cap) is sustain.service.http_protocol's."""

from __future__ import annotations

import asyncio
import logging
import signal
from types import FrameType

import uvicorn
from fastapi import FastAPI

from sustain.service.runtime import Replica

logger = logging.getLogger(__name__)


class GracefulServer(uvicorn.Server):
    """uvicorn.Server whose SIGTERM drains the replica (`app.state.sustain`) before uvicorn's
    own exit; any other signal, or a second SIGTERM, exits as uvicorn does."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self.app = app
        self._draining: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        state: Replica | None = getattr(self.app.state, "sustain", None)
        if sig != signal.SIGTERM or state is None or self._draining is not None:
            super().handle_exit(sig, frame)
            return
        loop = asyncio.get_event_loop()
        loop.call_soon_threadsafe(self._start_drain, state, sig, frame)

    def _start_drain(self, state: Replica, sig: int, frame: FrameType | None) -> None:
        if self._draining is not None:
            return

        async def drain_then_exit() -> None:
            try:
                await state.drain()
            finally:
                super(GracefulServer, self).handle_exit(sig, frame)

        self._draining = asyncio.get_running_loop().create_task(drain_then_exit())
