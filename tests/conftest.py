"""Shared fixtures: one PostgreSQL server per test session, one fresh database per test.

The server is the one named by SUSTAIN_TEST_DATABASE_URL, or else an embedded PostgreSQL that
this session starts and stops. Each test that asks for `database_url` gets its own database,
cloned from a template migrated once to head, and dropped afterwards (both on a thread of the
test process, beside the tests: see FreshDatabases).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
from sqlalchemy import make_url

from sustain.service.db.embedded import EmbeddedPostgres
from sustain.service.db.migrate import upgrade_to_head
from tests.processes import SustainProcess, free_port

T = TypeVar("T")

WORKERS_PER_CPU = 2
"""Most tests wait on a server, a subprocess or a timer rather than compute, so two workers
a CPU keep the CPUs busy; no test depends on how busy they are."""
MIN_WORKERS, MAX_WORKERS = 4, 8


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:  # noqa: ARG001 - hook
    """`-n auto`: two workers a CPU, at least 4 and at most 8 (each may start a service,
    a simulator and a browser of its own)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(MIN_WORKERS, min(MAX_WORKERS, WORKERS_PER_CPU * (cpus or 1)))


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on a fresh loop in another thread (safe from sync fixtures
    while pytest-asyncio owns the main thread's loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _admin(server_url: str, *statements: str) -> None:
    connection = await asyncpg.connect(asyncpg_dsn(server_url))
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


@pytest.fixture(scope="session")
def pg_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A URL on the test PostgreSQL server with rights to create databases."""
    configured = os.environ.get("SUSTAIN_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    data_dir: Path = tmp_path_factory.mktemp("embedded-pg")
    with EmbeddedPostgres(data_dir) as server:
        assert server.url is not None
        yield server.url.render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def template_database(pg_server_url: str) -> Iterator[str]:
    """A database migrated to head, used as the template of each test's database."""
    name = f"sustain_tpl_{os.getpid()}"
    run_sync(_admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}"',
                    f'CREATE DATABASE "{name}"'))
    url = make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    with ThreadPoolExecutor(1) as pool:
        pool.submit(upgrade_to_head, url).result()
    yield name
    run_sync(_admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


class FreshDatabases:
    """The databases of this test process's tests, cloned from `template` on one thread and
    dropped on another: the next test's database is cloned while the current test runs, and a
    used one is dropped while the next runs, so neither adds to a test's time (on a busy
    machine a clone takes up to a second, and a drop as long again: it waits for a checkpoint
    and for every backend of the server to close the database's files). A test still gets a
    database nobody used before, at head."""

    def __init__(self, server_url: str, template: str) -> None:
        self.server_url = server_url
        self.template = template
        self._cloner = ThreadPoolExecutor(1, thread_name_prefix="test-database-clone")
        self._dropper = ThreadPoolExecutor(1, thread_name_prefix="test-database-drop")
        self._next: Future[str] | None = None
        self._drops: list[Future[None]] = []

    def _clone(self) -> str:
        name = f"sustain_t_{uuid.uuid4().hex[:12]}"
        asyncio.run(_admin(self.server_url,
                           f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"'))
        return name

    def _drop(self, name: str) -> None:
        asyncio.run(_admin(self.server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def take(self) -> str:
        """A fresh database's name (cloned ahead, or now); the next one is cloned meanwhile."""
        ahead = self._next or self._cloner.submit(self._clone)
        self._next = self._cloner.submit(self._clone)
        return ahead.result()

    def give_back(self, name: str) -> None:
        """The database `name` (of this server, whatever its origin) is no longer used: it is
        dropped beside the next tests. A drop that failed is raised here, in the teardown of
        a later test."""
        for done in [drop for drop in self._drops if drop.done()]:
            self._drops.remove(done)
            done.result()
        self._drops.append(self._dropper.submit(self._drop, name))

    def close(self) -> None:
        """Drop the database cloned ahead, and wait for every drop."""
        try:
            if self._next is not None:
                self._drops.append(self._dropper.submit(self._drop, self._next.result()))
                self._next = None
            for drop in self._drops:
                drop.result()
        finally:
            self._cloner.shutdown()
            self._dropper.shutdown()


@pytest.fixture(scope="session")
def fresh_databases(pg_server_url: str, template_database: str) -> Iterator[FreshDatabases]:
    databases = FreshDatabases(pg_server_url, template_database)
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture
def database_url(pg_server_url: str, fresh_databases: FreshDatabases) -> Iterator[str]:
    """A fresh database at head, private to this test."""
    name = fresh_databases.take()
    yield make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    fresh_databases.give_back(name)


@pytest.fixture
def empty_database_url(pg_server_url: str, fresh_databases: FreshDatabases) -> Iterator[str]:
    """A fresh database with no schema at all (migration tests)."""
    name = f"sustain_e_{uuid.uuid4().hex[:12]}"
    run_sync(_admin(pg_server_url, f'CREATE DATABASE "{name}"'))
    yield make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    fresh_databases.give_back(name)


@dataclass(frozen=True)
class SimulatorHandle:
    base_url: str
    """The OpenAI API root, e.g. http://127.0.0.1:PORT/v1."""


@pytest.fixture(scope="session")
def simulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatorHandle]:
    """`sustain simulate` (50 ms TTFT, 10 ms ITL, 32 tokens) as its own process on a free
    loopback port, so its work never competes with the code under test for the GIL."""
    port = free_port()
    log = tmp_path_factory.mktemp("simulator") / "simulator.log"
    with SustainProcess(["simulate", "--port", str(port), "--ttft-ms", "50", "--itl-ms", "10",
                         "--output-tokens", "32"], log) as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models")
        yield SimulatorHandle(f"http://127.0.0.1:{port}/v1")
