"""A RAG probe's retrieval from PostgreSQL with pgvector, where the operator points at one
(`rag.pgvector_dsn_ref`, a secret reference: the URL holds a password). The run's corpus
vectors go into a table of the run's own (`sustain_rag_<random>`, UNLOGGED, with an HNSW cosine
index), created when the corpus is embedded and dropped when the run ends; each question's
retrieval is one `ORDER BY embedding <=> $1 LIMIT k` query, and its time, the database's
round trip included, is the request's `retrieve` stage. The table's name is sustain's own,
never the caller's, so no identifier is ever taken from input.

The database is reached like any endpoint: its host must pass the egress policy (the address
it resolves to is checked, and connected to), and a connection or query that fails fails the
question's retrieval with a classified error, never a traceback. Queries are bounded by
QUERY_TIMEOUT_S and the pool by MAX_CONNECTIONS.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

import asyncpg
import numpy as np
import numpy.typing as npt

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.measure.sample import ErrorClass

MAX_CONNECTIONS = 16
"""Connections a run's retrievals share (questions beyond them wait for one, which the
retrieve stage then shows: a real retrieval service has a pool too)."""
CONNECT_TIMEOUT_S = 10.0
QUERY_TIMEOUT_S = 30.0
HNSW_MAX_DIMENSIONS = 2000
"""pgvector's HNSW index takes vectors of up to 2,000 dimensions; longer ones are searched
exactly (a sequential scan)."""
SCHEMES = ("postgresql", "postgres")
INSERT_ROWS = 500
"""Vectors sent per INSERT while storing the corpus."""


Vector = npt.NDArray[np.float32] | Sequence[float]
"""One vector: a row of the index's float32 matrix, or a sequence of floats."""


class PgVectorError(Exception):
    """The store could not be set up or queried: `error_class` classifies it, the message
    names what failed (never the URL, which holds a password)."""

    def __init__(self, error_class: ErrorClass, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


def literal(vector: Vector) -> str:
    """A vector as pgvector's text form: `[1.0,2.5,...]`."""
    return "[" + ",".join(repr(float(v)) for v in vector) + "]"


async def checked_address(dsn: str, egress: EgressPolicy) -> tuple[str, int]:
    """The (address, port) to connect to for `dsn`: its host resolved, every address checked
    against the egress policy; PgVectorError (egress_denied, dns) otherwise."""
    try:
        parts = urlsplit(dsn)
        host, port = parts.hostname, parts.port or 5432
    except ValueError:
        raise PgVectorError(ErrorClass.PROTOCOL, "the pgvector URL is malformed") from None
    if parts.scheme not in SCHEMES or not host:
        raise PgVectorError(ErrorClass.PROTOCOL,
                            "the pgvector URL must be postgresql://user:password@host:port/db")
    denied = egress.check_url(dsn)
    if denied is not None:
        raise PgVectorError(ErrorClass.EGRESS_DENIED, f"pgvector host {host}: {denied}")
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port,
                                                             type=socket.SOCK_STREAM)
    except OSError:
        raise PgVectorError(ErrorClass.DNS, f"pgvector host {host} did not resolve") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    denied = egress.check_connection(host, addresses)
    if denied is not None:
        raise PgVectorError(ErrorClass.EGRESS_DENIED, f"pgvector host {host}: {denied}")
    return str(addresses[0]), port


class PgVectorIndex:
    """The run's table in the operator's database: `top_k` like the in-memory index, and
    `close()` drops it."""

    def __init__(self, pool: asyncpg.Pool, table: str) -> None:
        self.pool = pool
        self.table = table
        self._query = (f"SELECT id FROM {table} ORDER BY embedding <=> $1::text::vector "
                       "LIMIT $2")

    @classmethod
    async def create(cls, dsn: str, egress: EgressPolicy,
                     vectors: npt.NDArray[np.float32] | Sequence[Sequence[float]],
                     top_k: int) -> PgVectorIndex:
        """A fresh table holding `vectors` (row i is passage i), indexed for queries of up to
        `top_k` rows; PgVectorError when the database cannot be reached, lacks pgvector, or
        refuses."""
        address, port = await checked_address(dsn, egress)
        table = f"sustain_rag_{secrets.token_hex(6)}"
        dimensions = len(vectors[0])
        try:
            pool = await asyncpg.create_pool(
                dsn, host=address, port=port, min_size=1, max_size=MAX_CONNECTIONS,
                timeout=CONNECT_TIMEOUT_S, command_timeout=QUERY_TIMEOUT_S,
                # an HNSW scan returns at most hnsw.ef_search rows (40 by default); set at
                # connection start, it survives the pool's RESET ALL between queries
                server_settings={"hnsw.ef_search": str(max(40, int(top_k)))})
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            raise PgVectorError(ErrorClass.CONNECT,
                                f"pgvector: cannot connect ({type(exc).__name__})") from None
        index = cls(pool, table)
        try:
            async with pool.acquire() as connection:
                await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
                await connection.execute(
                    f"CREATE UNLOGGED TABLE {table} "
                    f"(id integer PRIMARY KEY, embedding vector({dimensions}))")
                for start in range(0, len(vectors), INSERT_ROWS):
                    chunk = vectors[start:start + INSERT_ROWS]
                    await connection.execute(
                        f"INSERT INTO {table} (id, embedding) SELECT i, e::vector "
                        "FROM unnest($1::integer[], $2::text[]) AS u(i, e)",
                        list(range(start, start + len(chunk))), [literal(v) for v in chunk])
                if dimensions <= HNSW_MAX_DIMENSIONS:
                    await connection.execute(
                        f"CREATE INDEX ON {table} USING hnsw (embedding vector_cosine_ops)")
                await connection.execute(f"ANALYZE {table}")
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            await index.close()
            raise PgVectorError(ErrorClass.PROTOCOL,
                                f"pgvector: the corpus could not be stored ({_why(exc)})"
                                ) from None
        return index

    async def top_k(self, query: Vector, k: int) -> list[int]:
        """The indices of the `k` passages nearest `query` (cosine distance), best first;
        PgVectorError when the query fails."""
        try:
            rows = await self.pool.fetch(self._query, literal(query), k)
        except TimeoutError:
            raise PgVectorError(ErrorClass.TIMEOUT_TOTAL, "pgvector: the query timed out"
                                ) from None
        except (OSError, asyncpg.InterfaceError) as exc:
            raise PgVectorError(ErrorClass.CONNECT, f"pgvector: {type(exc).__name__}"
                                ) from None
        except asyncpg.PostgresError as exc:
            raise PgVectorError(ErrorClass.PROTOCOL, f"pgvector: {_why(exc)}") from None
        return [int(row[0]) for row in rows]

    async def close(self) -> None:
        """Drop the table and close the pool (best effort: a database gone meanwhile leaves
        the UNLOGGED table, named sustain_rag_*, for its operator)."""
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await self.pool.execute(f"DROP TABLE IF EXISTS {self.table}")
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            pass
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await self.pool.close()
        except (OSError, asyncpg.InterfaceError, TimeoutError):
            self.pool.terminate()


def _why(exc: BaseException) -> str:
    """A database error as its SQLSTATE and class name (its message may quote data)."""
    state = getattr(exc, "sqlstate", None)
    return f"{type(exc).__name__}{f' {state}' if state else ''}"
