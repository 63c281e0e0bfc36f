"""Real `sustain` processes for end-to-end tests: started by the tests, stopped by PID."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import psutil


def sustain_command() -> list[str]:
    """The installed console script next to this interpreter, else `python -m sustain`."""
    script = Path(sys.executable).parent / "sustain"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sustain"]


PORT_BAND_START = 20_000
PORT_BAND_WIDTH = 500
"""Each test process (an xdist worker, or the only one) takes the ports of its own band, below
the kernel's ephemeral range (32768 on): a port one worker found free is never handed to a
server of another worker, nor taken meanwhile by an outgoing connection."""
_next_port = itertools.count()


WORKER_BANDS, OTHER_BANDS = 16, 8
"""xdist worker gwN takes band N (of 16); any other test process (`-n 0`, the live suite
beside the main one) one of 8 more, by its PID."""


def _band_start() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "").removeprefix("gw")
    index = int(worker) % WORKER_BANDS if worker.isdigit() else \
        WORKER_BANDS + os.getpid() % OTHER_BANDS
    return PORT_BAND_START + index * PORT_BAND_WIDTH


def free_port() -> int:
    """A loopback port free now, from this process's band, not handed out before by it."""
    start = _band_start()
    for _ in range(PORT_BAND_WIDTH):
        port = start + next(_next_port) % PORT_BAND_WIDTH
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {start}-{start + PORT_BAND_WIDTH - 1}")


def wait_until(predicate: Any, timeout_s: float, step_s: float = 0.1) -> float:
    """Seconds until predicate() held; AssertionError after timeout_s."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if predicate():
            return time.monotonic() - started
        time.sleep(step_s)
    raise AssertionError(f"not within {timeout_s}s")


def postgres_of(data_dir: Path) -> list[int]:
    """PIDs of postgres processes serving a data directory under `data_dir`."""
    pids = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info.get("name") == "postgres" and \
                str(data_dir) in " ".join(proc.info.get("cmdline") or []):
            pids.append(proc.pid)
    return pids


class SustainProcess:
    """`sustain ARGS` with output in a log file; a context manager that always stops it."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None,
                 program: list[str] | None = None) -> None:
        """`program` replaces the sustain command (another binary the test drives)."""
        self.program = program
        self.args = args
        self.log_path = log
        self.env = {**os.environ, "SUSTAIN_ADMIN_KEY": TEST_ADMIN_KEY,
                    "SUSTAIN_DATABASE_POOL_SIZE": TEST_POOL_SIZE,
                    "SUSTAIN_DATABASE_API_POOL_SIZE": TEST_POOL_SIZE, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    def start(self) -> SustainProcess:
        self.started_at = time.monotonic()
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [*(self.program or sustain_command()), *self.args], stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=self.env)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_http(self, url: str, timeout_s: float = 90.0, status: int = 200) -> None:
        """Until `url` answers `status`. The default is only a hang guard: on two loaded
        cores a process importing sustain can take 15 s or more to listen."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"sustain exited early:\n{self.output()}")
            try:
                if httpx.get(url, timeout=1.0).status_code == status:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"{url} not answering {status} after {timeout_s}s:\n{self.output()}")

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        """Send `sig` to our PID and wait; kill it if it does not exit in time."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(f"did not exit within {timeout_s}s of {sig.name}") from None
        return int(self.proc.returncode)

    def __enter__(self) -> SustainProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


TEST_POOL_SIZE = "3"
"""Database connections each test service keeps (SUSTAIN_DATABASE_POOL_SIZE): the parallel
workers' services, three replicas at a time among them, share one server's max_connections
(100 by default)."""
TEST_ADMIN_KEY = "sk_sustain_test-admin-key-0123456789abcdefghijklmnop"
"""The bootstrap admin key (SUSTAIN_ADMIN_KEY) every test service starts with."""
ADMIN_HEADERS = {"Authorization": f"Bearer {TEST_ADMIN_KEY}"}


def admin_client(base_url: str, timeout: float = 10.0) -> httpx.Client:
    """A client of a test service that authenticates as its bootstrap admin."""
    return httpx.Client(base_url=base_url, timeout=timeout, headers=ADMIN_HEADERS)
