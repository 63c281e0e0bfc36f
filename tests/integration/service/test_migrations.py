"""Alembic revisions: upgrade and downgrade on real PostgreSQL, and models that match them."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TypeVar

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, text

from sustain.service.db.engine import create_engine
from sustain.service.db.migrate import (
    current_revision,
    downgrade_to,
    head_revision,
    upgrade_to,
    upgrade_to_head,
)
from sustain.service.db.models import Base
from sustain.service.db.partitions import PARTITION_NAME


def include_name(name: str | None, type_: str,
                 parent_names: object) -> bool:  # noqa: ARG001 - Alembic's hook signature
    return not (type_ == "table" and name is not None and PARTITION_NAME.match(name))


T = TypeVar("T")


def in_thread(fn: Callable[..., T], *args: object) -> T:
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


SAMPLE_VALUES = (
    "t_sched_ms, t_send_ms, lag_ms, ttft_ms, itl_count, itl_mean_ms, itl_max_ms, tpot_ms, "
    "e2e_ms, corrected_e2e_ms, input_tokens, output_tokens, tokens_server_counted, outcome, "
    "error_class, http_status")


async def _seed_at_0002(url: str) -> list[tuple[object, ...]]:
    """Two finished runs on two days with 30 samples each, as revision 0002 stored them; the
    samples as (run_id, seq, sent_at, ttft_ms, outcome) in insertion order."""
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(
                "INSERT INTO endpoints (id, name, base_url, api_kind, model, timeout_connect_s, "
                "timeout_first_token_s, timeout_total_s, tls_verify) "
                "VALUES (1, 'e', 'http://x/v1', 'openai-chat', 'm', 1, 1, 1, true)"))
            await connection.execute(text(
                "INSERT INTO probes (id, name, endpoint_id, workload, profile, "
                "interval_seconds) VALUES (1, 'p', 1, '{}', '{\"kind\": \"single\"}', 60)"))
            for run_id, day in ((1, "2026-11-01"), (2, "2026-11-02")):
                await connection.execute(text(
                    "INSERT INTO runs (id, probe_id, trigger, scheduled_for, status, summary) "
                    "VALUES (:id, 1, 'schedule', :at, 'succeeded', :summary)"),
                    {"id": run_id, "at": datetime.fromisoformat(f"{day}T23:59:50+00:00"),
                     "summary": '{"attempts": 30, "successes": 29, "output_tokens": 290, '
                                '"duration_s": 15.0}'})
                for seq in range(30):
                    await connection.execute(text(
                        f"INSERT INTO samples (run_id, probe_id, seq, stage, sent_at, "
                        f"{SAMPLE_VALUES}) VALUES (:run, 1, :seq, 0, :at, NULL, :t, NULL, "
                        ":ttft, 10, 5, 9, 5, 100, NULL, 3, 10, true, :outcome, NULL, 200)"),
                        {"run": run_id, "seq": seq, "t": seq * 500.0,
                         "at": datetime.fromisoformat(f"{day}T23:59:50+00:00")
                         + timedelta(seconds=seq / 2),
                         "ttft": 40.0 + seq, "outcome": "error" if seq == 7 else "success"})
        return await _samples(url)
    finally:
        await engine.dispose()


async def _samples(url: str) -> list[tuple[object, ...]]:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            order = "run_id, pos" if await current_revision(connection) == head_revision() \
                else "run_id, id"
            rows = await connection.execute(text(
                f"SELECT run_id, seq, sent_at, ttft_ms, outcome FROM samples ORDER BY {order}"))
            return [tuple(r) for r in rows]
    finally:
        await engine.dispose()


async def test_upgrade_keeps_samples_and_run_counts_and_downgrade_gives_them_back(
        empty_database_url: str) -> None:
    url = empty_database_url
    in_thread(upgrade_to, url, "0002")
    before = await _seed_at_0002(url)
    assert len(before) == 60

    in_thread(upgrade_to_head, url)
    assert await _samples(url) == before
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            partitions = {r[0] for r in await connection.execute(text(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'samples' "
                "AND EXISTS (SELECT 1 FROM samples s WHERE s.tableoid = c.oid)"))}
            counts = list(await connection.execute(text(
                "SELECT id, attempts, successes, output_tokens, measured_s FROM runs "
                "ORDER BY id")))
            positions = list(await connection.execute(text(
                "SELECT run_id, min(pos), max(pos), count(DISTINCT pos) FROM samples "
                "GROUP BY run_id ORDER BY run_id")))
    finally:
        await engine.dispose()
    assert partitions == {"samples_p20261101", "samples_p20261102", "samples_p20261103"}
    assert [tuple(c) for c in counts] == [(1, 30, 29, 290, 15.0), (2, 30, 29, 290, 15.0)]
    assert [tuple(p) for p in positions] == [(1, 0, 29, 30), (2, 0, 29, 30)]

    in_thread(downgrade_to, url, "0002")
    assert await _samples(url) == before
