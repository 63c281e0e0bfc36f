"""Shared by the benchmarks: the simulator in its own process on its own core, the machine's
description, and appending figures to RESULTS.md."""

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

import httpx

RESULTS = Path(__file__).with_name("RESULTS.md")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pin_to(cpu: int) -> None:
    """Pin this process to one core (the simulator gets the other)."""
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})


class Simulator:
    """`sustain simulate ARGS` on core `cpu` (taskset), stopped by PID."""

    def __init__(self, args: list[str], cpu: int = 1) -> None:
        self.port = free_port()
        command = [sys.executable, "-m", "service", "simulate", "--port", str(self.port), *args]
        if shutil.which("taskset") and cpu < (os.cpu_count() or 1):
            command = ["taskset", "-c", str(cpu), *command]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("simulator did not start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


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


def record(title: str, command: str, body: str) -> None:
    """Append one dated section to RESULTS.md and print it."""
    section = (f"\n## {title} — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n\n"
               f"Machine: {machine()}  \nCommand: `{command}`\n\n{body.rstrip()}\n")
    print(section)
    if not RESULTS.exists():
        RESULTS.write_text("# Benchmark results\n\nAppended by the scripts in this folder; "
                           "newest last.\n")
    with RESULTS.open("a", encoding="utf-8") as out:
        out.write(section)
