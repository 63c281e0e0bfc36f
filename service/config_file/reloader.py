"""When the config file is synced: at start (where a bad file stops the service), on SIGHUP and
every SUSTAIN_CONFIG_RELOAD_S (where a bad file is logged and counted, and the database
keeps matching the last good one)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from pathlib import Path

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SATimeoutError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sustain.service.config_file.load import read
from sustain.service.config_file.sync import SyncResult, sync
from sustain.service.config_file.yaml_lines import ConfigError
from sustain.service.metrics import Metrics
from sustain.service.policy.expansion import ExpansionPolicy
from sustain.service.policy.limits import LoadLimits
from sustain.service.policy.reach import Reach
from sustain.service.scheduling.scheduler import ProbeScheduler

logger = logging.getLogger(__name__)

RETRY_S = 5.0


class ConfigReloader:
    def __init__(self, path: Path, sessions: async_sessionmaker[AsyncSession],
                 scheduler: ProbeScheduler, metrics: Metrics, interval_s: float,
                 sample_retention_days: int = 14, limits: LoadLimits | None = None,
                 reach: Reach | None = None,
                 expandable: ExpansionPolicy | None = None) -> None:
        self.path = path
        self.source = str(path.resolve())
        """How managed_by names this file: the same on every replica that mounts it alike."""
        self.sessions = sessions
        self.scheduler = scheduler
        self.metrics = metrics
        self.interval_s = interval_s
        self.sample_retention_days = sample_retention_days
        self.limits = limits
        """Probe profiles of the file must stay within these (as over REST)."""
        self.reach = reach or Reach()
        """What the file's endpoints, notifiers and workloads may read and reach."""
        self.expandable = expandable or ExpansionPolicy()
        """The variables the file's `${NAME}` may expand (default: none)."""
        self._lock = asyncio.Lock()
        self.pending = False
        """The last sync could not reach the database: retried every RETRY_S."""
        self._tasks: set[asyncio.Task[object]] = set()

    async def reload(self, *, strict: bool = False) -> SyncResult | None:
        """Read, validate and sync the file. With `strict`, a bad file or a conflict raises
        ConfigError; otherwise it is logged and counted and None returned. A database that
        cannot be reached is never fatal: the sync is retried every RETRY_S."""
        async with self._lock:
            try:
                config, located = await asyncio.to_thread(read, self.path, None, self.limits,
                                                          self.reach, self.expandable)
                async with self.sessions.begin() as session:
                    result = await sync(session, config, located, self.source,
                                        self.sample_retention_days, self.limits)
            except ConfigError as exc:
                self.metrics.config_reloads.labels("invalid").inc()
                if strict:
                    raise
                for line in exc.lines():
                    logger.error("config not applied: %s", line)
                return None
            except (OSError, DBAPIError, TimeoutError, SATimeoutError) as exc:
                self.metrics.config_reloads.labels("error").inc()
                logger.warning("config sync failed (%s); retrying", type(exc).__name__)
                self.pending = True
                return None
        self.metrics.config_reloads.labels("ok").inc()
        self.pending = False
        for probe_id in result.changed_probes:
            await self.scheduler.refresh(probe_id)
        if result.changed:
            logger.info("config %s synced: created %s; updated %s; deleted %s", self.path,
                        result.created or "nothing", result.updated or "nothing",
                        result.deleted or "nothing")
        return result

    def start(self) -> None:
        """Reload on SIGHUP, and periodically when an interval is set."""
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGHUP, self._spawn)
        except (NotImplementedError, RuntimeError):
            logger.info("SIGHUP cannot be handled here; reload runs on its interval only")
        self._keep(asyncio.create_task(self._every(), name="config-reload"))

    def _spawn(self) -> None:
        logger.info("SIGHUP: reloading %s", self.path)
        self._keep(asyncio.create_task(self._reload_logged()))

    async def _reload_logged(self) -> None:
        try:
            await self.reload()
        except Exception:
            logger.exception("config reload failed unexpectedly")

    def _keep(self, task: asyncio.Task[object]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every(self) -> None:
        """Reload every interval (and every RETRY_S while a sync waits for the database);
        nothing that goes wrong in one reload stops the next."""
        last = time.monotonic()
        while True:
            await asyncio.sleep(RETRY_S)
            due = self.interval_s > 0 and time.monotonic() - last >= self.interval_s
            if not (due or self.pending):
                continue
            last = time.monotonic()
            try:
                await self.reload()
            except Exception:
                logger.exception("config reload failed unexpectedly")

    async def close(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
