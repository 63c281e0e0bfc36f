"""Engine and session factory; created by the app lifespan, never at import time."""

from __future__ import annotations

from sqlalchemy import URL, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from sustain.service.strict_json import dumps


def async_url(url: str | URL) -> URL:
    """The same database, addressed through the asyncpg driver."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql+asyncpg")


def safe_url(url: str | URL) -> str:
    """For logs and messages: the URL with its password masked."""
    return make_url(url).render_as_string(hide_password=True)


API_POOL_TIMEOUT_S = 5.0
"""Seconds an API request waits for one of the API's database connections before it is
answered 503 (sqlalchemy.exc.TimeoutError, mapped in sustain.service.api.errors)."""


def create_engine(url: str | URL, *, pool_size: int = 10, max_overflow: int | None = None,
                  pool_timeout_s: float = 30.0) -> AsyncEngine:
    """An engine of `pool_size` connections, and `max_overflow` more under load (default: as
    many again); a caller waits up to `pool_timeout_s` seconds for one.

    JSON columns are written through the strict encoder: a NaN or infinity is refused
    here, naming where it was, rather than by PostgreSQL with no hint of the field."""
    return create_async_engine(
        async_url(url), pool_size=pool_size,
        max_overflow=pool_size if max_overflow is None else max_overflow,
        pool_timeout=pool_timeout_s, pool_pre_ping=True, json_serializer=dumps,
    )


def create_api_engine(url: str | URL, *, pool_size: int) -> AsyncEngine:
    """The REST API's and pages' own engine: `pool_size` connections and no more, each waited
    for at most API_POOL_TIMEOUT_S. Readers exhaust this pool, never the one that measuring
    and storing use."""
    return create_engine(url, pool_size=pool_size, max_overflow=0,
                         pool_timeout_s=API_POOL_TIMEOUT_S)


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
