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


def create_engine(url: str | URL, *, pool_size: int = 10) -> AsyncEngine:
    """JSON columns are written through the strict encoder: a NaN or infinity is refused
    here, naming where it was, rather than by PostgreSQL with no hint of the field."""
    return create_async_engine(
        async_url(url), pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True,
        json_serializer=dumps,
    )


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
