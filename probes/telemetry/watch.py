"""Reading a server's own metrics beside a run (the parent's side): ServerWatch starts the
scraper process (scraper.py) when the run starts, keeps its points, and stops it when the
run ends. A scrape that fails, or a scraper that cannot start or dies, never fails the run:
the run's telemetry then says how many scrapes failed. The run starts after a first scrape
(its baseline) and the scraper takes a last one when it ends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.secret_policy import scrubbed_environment
from sustain.probes.measure.server_metrics import Point
from sustain.probes.telemetry.scraper import ScrapeConfig

logger = logging.getLogger("sustain.telemetry")

MAX_SCRAPES = 20_000
"""Scrapes kept of one run (at the default 1 s, five and a half hours); later ones are
counted but not kept."""
MAX_LINE_BYTES = 1 << 20
STOP_TIMEOUT_S = 5.0
"""How long the scraper has for its last scrape and exit before it is killed."""
FIRST_SCRAPE_TIMEOUT_S = 5.0
"""A run waits at most this long for its baseline scrape (the scraper's start included)."""


@dataclass(slots=True)
class Telemetry:
    """What the scrapes of one run gathered: each series as (unix seconds, value) points."""

    series: dict[str, list[Point]] = field(default_factory=dict)
    scrapes: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    """Failed scrapes by kind (`timeout`, `http 404`, `unreachable`, ...)."""

    def add(self, line: dict[str, object]) -> None:
        self.scrapes += 1
        at = line.get("t")
        values = line.get("values")
        if not isinstance(at, int | float) or not isinstance(values, dict):
            kind = str(line.get("error", "bad line"))[:64]
            self.failures[kind] = self.failures.get(kind, 0) + 1
            return
        if self.scrapes > MAX_SCRAPES:
            return
        for name, value in values.items():  # a sum over label sets may overflow: left out
            if isinstance(value, int | float) and math.isfinite(value):
                self.series.setdefault(str(name), []).append((float(at), float(value)))


@contextlib.asynccontextmanager
async def watch_server(url: str | None, interval_s: float, names: tuple[str, ...],
                       egress: EgressPolicy, tls_verify: bool = True,
                       gpus: tuple[str, ...] = ()) -> AsyncIterator[Telemetry | None]:
    """Scrape `url` every `interval_s` while the block runs; yields the Telemetry it fills
    (None without a URL). `gpus` (indices or UUIDs) keeps only those GPUs' DCGM series.
    Ending the block stops the scraper (by its PID, should it not stop on its own)."""
    if url is None:
        yield None
        return
    telemetry = Telemetry()
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sustain.probes.telemetry.scraper",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=scrubbed_environment(os.environ), limit=MAX_LINE_BYTES)
    except OSError as exc:
        logger.warning("the scraper of server metrics could not start: %s", exc.strerror)
        telemetry.failures["scraper did not start"] = 1
        yield telemetry
        return
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(ScrapeConfig(url, interval_s, names, egress, tls_verify, gpus).encode())
    first, stopping = asyncio.Event(), asyncio.Event()
    reader = asyncio.create_task(_read(process.stdout, telemetry, first, stopping))
    try:
        # The first scrape is the run's baseline (a counter's increase is counted from it).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(first.wait(), FIRST_SCRAPE_TIMEOUT_S)
        yield telemetry
    finally:
        stopping.set()
        with contextlib.suppress(OSError):
            process.stdin.close()
        try:
            await asyncio.wait_for(asyncio.shield(reader), STOP_TIMEOUT_S)
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            logger.warning("the scraper (pid %s) did not stop; killing it", process.pid)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def _read(stdout: asyncio.StreamReader, telemetry: Telemetry,
                first: asyncio.Event, stopping: asyncio.Event) -> None:
    while True:
        try:
            line = await stdout.readline()
        except ValueError:  # a line over the limit: not one the scraper writes
            telemetry.failures["bad line"] = telemetry.failures.get("bad line", 0) + 1
            continue
        if not line:
            if not stopping.is_set():  # it died during the run
                telemetry.failures["scraper exited"] = 1
            return
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = {"error": "bad line"}
        telemetry.add(parsed if isinstance(parsed, dict) else {"error": "bad line"})
        first.set()
