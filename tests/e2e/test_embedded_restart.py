"""A sustain killed with SIGKILL leaves its embedded PostgreSQL behind; the next sustain on the
same data directory takes it over and stops it when it stops."""

from __future__ import annotations

import signal
from pathlib import Path

import psutil

from tests.processes import SustainProcess, free_port, postgres_of


def test_restart_after_sigkill_takes_over_and_stops_the_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    env = {"SUSTAIN_DATA_DIR": str(data), "SUSTAIN_PORT": str(port)}
    try:
        killed = SustainProcess(["serve"], tmp_path / "serve1.log", env=env)
        killed.env.pop("SUSTAIN_DATABASE_URL", None)
        with killed:
            killed.wait_http(f"http://127.0.0.1:{port}/readyz")
            killed.stop(signal.SIGKILL)
        orphans = postgres_of(data)
        assert orphans, "SIGKILL should leave the embedded server running"

        second = SustainProcess(["serve"], tmp_path / "serve2.log", env=env)
        second.env.pop("SUSTAIN_DATABASE_URL", None)
        with second:
            second.wait_http(f"http://127.0.0.1:{port}/readyz")
            assert second.stop(signal.SIGTERM) == 0
        assert postgres_of(data) == []
    finally:
        for pid in postgres_of(data):
            psutil.Process(pid).terminate()
