"""The embedded default: a real server in DATA_DIR, one owner at a time, data kept across
restarts, no process left behind."""

from __future__ import annotations

from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest
from sqlalchemy import text

from sustain.service.db.embedded import DataDirInUseError, EmbeddedPostgres, running_url
from sustain.service.db.engine import create_engine


def postgres_processes(pgdata: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if proc.info.get("name") == "postgres" and str(pgdata) in " ".join(cmdline):
            found.append(proc)
    return found


async def _query(url: str, *statements: str) -> object:
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            result = None
            for sql in statements:
                result = await connection.execute(text(sql))
            return None if result is None or not result.returns_rows else result.scalar()
    finally:
        await engine.dispose()


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    import asyncio

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def test_embedded_server_keeps_data_and_stops_cleanly(tmp_path: Path) -> None:
    server = EmbeddedPostgres(tmp_path)
    url = server.start().render_as_string(hide_password=False)
    try:
        run(_query(url, "CREATE TABLE kept (v int)", "INSERT INTO kept VALUES (42)"))
        with pytest.raises(DataDirInUseError, match="in use by another sustain process"):
            EmbeddedPostgres(tmp_path).start()
        assert running_url(tmp_path) == url, "others find the running server"
        assert run(_query(url, "SELECT v FROM kept")) == 42
    finally:
        server.stop()
    assert postgres_processes(tmp_path / "postgres") == []
    assert running_url(tmp_path) is None, "no address once it stopped"

    with EmbeddedPostgres(tmp_path) as again:
        assert again.url is not None
        assert run(_query(again.url.render_as_string(hide_password=False),
                          "SELECT v FROM kept")) == 42
    assert postgres_processes(tmp_path / "postgres") == []
