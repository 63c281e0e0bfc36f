"""How many client connections the HTTP server keeps open, and which it closes first.

A client that opens connections and then sends nothing, or a request head one byte at a time,
costs the server a file descriptor each; enough of them and the process cannot accept the
kubelet's /healthz, open a database connection or reach a notifier (EMFILE). So the server
keeps at most a cap of connections, and when a new one would exceed it, closes the connection
that has been idle (between requests) or slow (still sending its request) the longest; a
connection whose request is being answered is never chosen. The newcomer itself is chosen only
when every other connection is busy.

The cap is also kept below the process's file descriptor limit (RLIMIT_NOFILE), less what the
rest of the replica may hold open at once (both database pools, notifier client, worker
pipes), so that the cap, not the kernel, is what turns clients away.

Pure: no sockets here (sustain.service.http_protocol closes what this chooses).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from sustain.service.config import Settings

C = TypeVar("C", bound=Hashable)

MIN_OPEN_CONNECTIONS = 16
"""The cap never goes below this, however low the file limit (a warning says so)."""
BASE_FD_RESERVE = 64
"""File descriptors kept for everything but client and database connections: stdio, the
event loop's own, the listening socket, log and config files, datasets, DNS, the embedded
PostgreSQL's pipes."""
WORKER_FDS = 4
"""File descriptors one measurement worker process costs the service (its pipes)."""
NOTIFIER_CONNECTIONS = 100
"""Connections the notification client may open at once (httpx's default pool limit)."""


class ConnectionRegistry(Generic[C]):
    """Every open client connection, each either *sheddable* (idle between requests, or
    still sending its request) or *busy* (its request is being answered). Sheddable ones are
    kept in the order they became so, so the longest idle or slow comes first."""

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError("cap must be at least 1")
        self.cap = cap
        self._sheddable: OrderedDict[C, None] = OrderedDict()
        self._busy: set[C] = set()

    def __len__(self) -> int:
        return len(self._sheddable) + len(self._busy)

    def __contains__(self, connection: object) -> bool:
        return connection in self._sheddable or connection in self._busy

    def opened(self, connection: C) -> list[C]:
        """Count a new connection (sheddable: it has sent nothing yet); the connections to
        close now to stay within the cap, longest idle or slow first. They are forgotten
        here already; the newcomer is among them only when every other one is busy."""
        self._sheddable[connection] = None
        victims: list[C] = []
        while len(self) > self.cap and self._sheddable:
            victim, _ = self._sheddable.popitem(last=False)
            victims.append(victim)
        return victims

    def sheddable(self, connection: C) -> None:
        """The connection became idle, or started sending a request: it goes last in line.
        A connection already forgotten (closed, shed) stays forgotten."""
        if connection not in self:
            return
        self._busy.discard(connection)
        self._sheddable[connection] = None
        self._sheddable.move_to_end(connection)

    def busy(self, connection: C) -> None:
        """The connection's request is complete and being answered: never shed meanwhile."""
        if connection in self._sheddable:
            del self._sheddable[connection]
            self._busy.add(connection)

    def closed(self, connection: C) -> None:
        """Forget the connection (closed by either side, or shed); idempotent."""
        self._sheddable.pop(connection, None)
        self._busy.discard(connection)


def fd_reserve(settings: Settings) -> int:
    """File descriptors the replica may need besides client connections: the measuring
    database pool (pool_size, and as many again under load) and its LISTEN connection, the
    API's own pool (database_api_pool_size, no overflow), the notification
    client, the measurement workers' pipes (or, measuring in-process, the probe client's
    whole connection pool), plus BASE_FD_RESERVE."""
    workers = settings.worker_processes()
    measuring = settings.http_max_connections if workers == 0 else WORKER_FDS * workers
    return (BASE_FD_RESERVE + 2 * settings.database_pool_size + 1
            + settings.database_api_pool_size + NOTIFIER_CONNECTIONS + measuring)


def open_connection_cap(wanted: int, fd_limit: int | None, reserve: int) -> int:
    """The open-connection cap to enforce: `wanted` (SUSTAIN_HTTP_MAX_OPEN_CONNECTIONS), but
    no more than the soft file limit less `reserve` (None: no limit), and never below
    MIN_OPEN_CONNECTIONS."""
    if fd_limit is None:
        return wanted
    return max(MIN_OPEN_CONNECTIONS, min(wanted, fd_limit - reserve))
