"""Shared by the benchmarks: the simulator in its own process on its own core, the machine's
description, and writing a run's figures into RESULTS.md (benchmarks/results.py)."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

import httpx

from benchmarks import results

RESULTS = Path(__file__).with_name("RESULTS.md")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pin_to(cpu: int) -> None:
    """Pin this process to one core (the simulator gets the other)."""
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})


class Child:
    """A process this benchmark started: waited for until it answers, stopped by PID."""

    process: subprocess.Popen[bytes]
    stop_timeout_s = 10.0

    def wait_ready(self, url: str, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{what} did not become ready")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Simulator(Child):
    """`sustain simulate ARGS` on core `cpu` (taskset), stopped by PID."""

    def __init__(self, args: list[str], cpu: int = 1) -> None:
        self.port = free_port()
        command = [sys.executable, "-m", "sustain", "simulate", "--port", str(self.port), *args]
        if shutil.which("taskset") and cpu < (os.cpu_count() or 1):
            command = ["taskset", "-c", str(cpu), *command]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.wait_ready(f"{self.base_url}/models", 30, "simulator")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def record(title: str, command: str, body: str, *, headline: str | None = None,
           ratio: str | None = None) -> None:
    """Replace this benchmark's section of RESULTS.md (keyed by the words of `title` before its
    first colon) with this run's, keep every other benchmark's, and print it. `headline` is
    the figure the summary table shows, `ratio` how it compares with the run's baseline (None
    where the benchmark has none)."""
    new = results.section(title, datetime.now(UTC), machine(), command, body, headline, ratio)
    print(new)
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else ""
    RESULTS.write_text(results.rewrite(old, new), encoding="utf-8")


SERVER_URL = os.environ.get("SUSTAIN_BENCH_DATABASE_URL",
                            "postgresql://postgres@127.0.0.1:5432/postgres")
"""A PostgreSQL server where the benchmarks may create and drop their own databases."""


def asyncpg_dsn(url: str) -> str:
    """A SQLAlchemy URL (postgresql+asyncpg://...) as asyncpg's own DSN."""
    from sqlalchemy import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _admin(server_url: str, *statements: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(asyncpg_dsn(server_url))
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


def database_url(server_url: str, name: str) -> str:
    from sqlalchemy import make_url

    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def fresh_database(server_url: str, name: str) -> str:
    """Drop and create database `name` on the server, migrate it to head; its URL."""
    from sustain.service.db.migrate import upgrade_to_head

    url = empty_database(server_url, name)
    upgrade_to_head(url)
    return url


def empty_database(server_url: str, name: str) -> str:
    """Drop and create database `name` on the server, unmigrated; its URL."""
    import asyncio

    asyncio.run(_admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
                       f'CREATE DATABASE "{name}"'))
    return database_url(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    import asyncio

    asyncio.run(_admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


class Service(Child):
    """`sustain serve` on a database URL, stopped by PID; `base_url` is the API root."""

    stop_timeout_s = 30.0

    def __init__(self, url: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sustain", "serve", "--port", str(self.port),
             "--log-level", "warning"],
            env={**os.environ, "SUSTAIN_DATABASE_URL": url, **(env or {})},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.wait_ready(f"{self.base_url}/readyz", 60, "sustain serve")
