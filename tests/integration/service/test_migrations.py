"""Alembic revisions: upgrade and downgrade on real PostgreSQL, and models that match them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, text

from service.db.engine import create_engine
from service.db.migrate import current_revision, downgrade_to, head_revision, upgrade_to_head
from service.db.models import Base
from service.db.partitions import PARTITION_NAME


def include_name(name, type_, parent_names):  # type: ignore[no-untyped-def]
    return not (type_ == "table" and name is not None and PARTITION_NAME.match(name))


def in_thread(fn, *args):  # type: ignore[no-untyped-def]
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


async def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(text(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
            return {r[0] for r in rows}
    finally:
        await engine.dispose()


async def test_upgrade_downgrade_upgrade_round_trip(empty_database_url: str) -> None:
    in_thread(upgrade_to_head, empty_database_url)
    assert {"endpoints", "probes", "runs", "samples", "alembic_version"} <= \
        await tables(empty_database_url)
    engine = create_engine(empty_database_url)
    async with engine.begin() as connection:
        await connection.execute(text(
            "INSERT INTO endpoints (name, base_url, api_kind, model, timeout_connect_s, "
            "timeout_first_token_s, timeout_total_s, tls_verify) "
            "VALUES ('e', 'http://x/v1', 'openai-chat', 'm', 1, 1, 1, true)"))
    await engine.dispose()
    in_thread(downgrade_to, empty_database_url, "base")
    assert await tables(empty_database_url) == {"alembic_version"}
    in_thread(upgrade_to_head, empty_database_url)
    engine = create_engine(empty_database_url)
    async with engine.connect() as connection:
        assert await current_revision(connection) == head_revision()
    await engine.dispose()


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "include_name": include_name})
    return list(compare_metadata(context, Base.metadata))


async def test_models_match_the_migrated_schema(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            assert await connection.run_sync(_diff) == []
    finally:
        await engine.dispose()
