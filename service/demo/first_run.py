"""The demo's first result without waiting for its schedule: once the service answers, the
demo's constant probe runs at once (a run-now, `POST /api/v1/probes/{id}/runs`, as a person
would ask for it), then keeps its schedule.

Why: the scheduler starts a new probe's current tick at once only while at least half of its
period remains (a catch-up run later than that would collide with the next tick), so a demo
that became ready in the second half of a 15 s period showed nothing until the next tick: 24 s
from `sustain demo` to a first result was measured, where the README says about 15. When that
catch-up run is already going as the service answers, it is the first result: the request
answers 409 and nothing more is done. A tick that comes while the first run still goes is
recorded as skipped, as after any run-now (runs of a probe never overlap in a location).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import socket
import threading
import time

import httpx

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0
"""How long the first run waits for the service to answer /readyz, in seconds (an embedded
PostgreSQL's first start, initdb included, takes a few seconds; a slow disk more)."""
POLL_S = 0.05
"""Seconds between two tries to connect, then between two asks of /readyz: the first run
starts at most about this long after the service is ready."""
POLL_TIMEOUT_S = 1.0
"""Seconds one connect, or one ask of /readyz, may take (a stop is noticed between two)."""
REQUEST_TIMEOUT_S = 10.0
"""Seconds each request to the service may take."""
STOP_TIMEOUT_S = 5.0
"""How long stopping the demo waits for this thread, in seconds (it is a daemon: a request
still in flight then dies with the process)."""


class Outcome(enum.StrEnum):
    started = "started"
    """A run-now was accepted: the first result comes from it."""
    already_running = "already running"
    """A run of the probe was going (the scheduler's catch-up of the current tick)."""
    disabled = "disabled"
    """The probe is disabled: a person turned it off, and it stays off."""
    missing = "missing"
    """The probe is gone (deleted since the demo created it)."""
    refused = "refused"
    """The service answered anything else (it is shutting down, or its write buffer is full)."""
    not_ready = "not ready"
    """The service did not become ready in time, or the demo is stopping."""


async def run_at_start(client: httpx.AsyncClient, probe_id: int) -> tuple[Outcome, int | None]:
    """Start one run of the probe now, unless it is disabled or gone, or a run of it is going;
    what happened, with the new run's id when one was started. `client` talks to the service
    with the admin key."""
    probe = await client.get(f"/api/v1/probes/{probe_id}")
    if probe.status_code == httpx.codes.NOT_FOUND:
        return Outcome.missing, None
    probe.raise_for_status()
    if not probe.json()["enabled"]:
        return Outcome.disabled, None
    started = await client.post(f"/api/v1/probes/{probe_id}/runs")
    if started.status_code == httpx.codes.ACCEPTED:
        return Outcome.started, int(started.json()["id"])
    if started.status_code == httpx.codes.CONFLICT:
        return Outcome.already_running, None
    if started.status_code == httpx.codes.NOT_FOUND:
        return Outcome.missing, None
    logger.warning("demo: the first run of probe %s was refused (HTTP %d: %s); its schedule "
                   "runs it", probe_id, started.status_code, started.text[:200])
    return Outcome.refused, None


async def wait_ready(client: httpx.AsyncClient, timeout_s: float, stop: threading.Event
                     ) -> bool:
    """Whether /readyz answered 200 within timeout_s (False as soon as `stop` is set)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not stop.is_set():
        try:
            if (await client.get("/readyz", timeout=POLL_TIMEOUT_S)).status_code == \
                    httpx.codes.OK:
                return True
        except httpx.HTTPError:
            pass  # not listening yet
        await asyncio.sleep(POLL_S)
    return False


def wait_listening(host: str, port: int, timeout_s: float, stop: threading.Event) -> bool:
    """Whether host:port accepted a TCP connection within timeout_s (False as soon as `stop`
    is set). A plain connect every POLL_S: while the service imports and starts up beside it,
    this thread costs it next to nothing (no event loop, no HTTP client yet)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not stop.is_set():
        try:
            socket.create_connection((host, port), timeout=POLL_TIMEOUT_S).close()
        except OSError:
            stop.wait(POLL_S)
        else:
            return True
    return False


class FirstRun:
    """On a thread of its own: wait for the service on host:port to listen and be ready, then
    run the probe once (run_at_start). `outcome` and `run_id` say what happened, once `done`
    is set."""

    def __init__(self, host: str, port: int, admin_key: str, probe_id: int, probe_name: str,
                 timeout_s: float = READY_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.admin_key = admin_key
        self.probe_id = probe_id
        self.probe_name = probe_name
        self.timeout_s = timeout_s
        self.outcome: Outcome | None = None
        self.run_id: int | None = None
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sustain-demo-first-run",
                                        daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://[{self.host}]:{self.port}" if ":" in self.host else \
            f"http://{self.host}:{self.port}"

    def start(self) -> FirstRun:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(STOP_TIMEOUT_S)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            if not wait_listening(self.host, self.port, self.timeout_s, self._stop):
                self.outcome = Outcome.not_ready
            else:
                left_s = max(0.0, self.timeout_s - (time.monotonic() - started))
                self.outcome, self.run_id = asyncio.run(self._first_run(left_s))
        except Exception as exc:  # noqa: BLE001 - the schedule runs the probe all the same
            logger.warning("demo: could not start the first run of probe '%s' (%s); its "
                           "schedule runs it", self.probe_name, type(exc).__name__)
        finally:
            self.done.set()
        if self.outcome is Outcome.started:
            logger.info("demo: probe '%s' runs now (run %s), then on its schedule",
                        self.probe_name, self.run_id)

    async def _first_run(self, timeout_s: float) -> tuple[Outcome, int | None]:
        async with httpx.AsyncClient(
                base_url=self.base_url, timeout=REQUEST_TIMEOUT_S, trust_env=False,
                headers={"Authorization": f"Bearer {self.admin_key}"}) as client:
            if not await wait_ready(client, timeout_s, self._stop):
                return Outcome.not_ready, None
            return await run_at_start(client, self.probe_id)
