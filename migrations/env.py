"""Alembic environment: async engine, one advisory lock so concurrent replicas migrate once."""

from __future__ import annotations

import asyncio
import contextlib

from alembic import context
from sqlalchemy import pool, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from sustain.service.db.engine import async_url
from sustain.service.db.models import Base
from sustain.service.db.partitions import PARTITION_NAME

MIGRATION_LOCK_KEY = 0x5355_5354  # "SUST"

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL given to the migration environment")
    return str(url)


def include_name(name: str | None, type_: str,
                 parent_names: object) -> bool:  # noqa: ARG001 - Alembic's hook signature
    """Autogenerate ignores the daily sample partitions: the service manages them."""
    return not (type_ == "table" and name is not None and PARTITION_NAME.match(name))


def _run(connection: Connection) -> None:
    # A session lock, held until every migration has run: a revision that commits in batches
    # (an autocommit block) ends the migration transaction early, and a transaction lock
    # would let a second replica start the same revision beside it.
    connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    connection.commit()
    try:
        context.configure(connection=connection, target_metadata=target_metadata,
                          compare_type=True, include_name=include_name)
        with context.begin_transaction():
            context.run_migrations()
    finally:
        with contextlib.suppress(Exception):  # a lost connection has released it already
            connection.rollback()
            connection.execute(text("SELECT pg_advisory_unlock(:key)"),
                               {"key": MIGRATION_LOCK_KEY})
            connection.commit()


async def _run_online() -> None:
    engine = create_async_engine(async_url(_url()), poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_online())
