"""The image alone, run the way the Helm chart runs it: read-only root filesystem, every
capability dropped, no new privileges, as uid 10001; on embedded PostgreSQL (the image's
default with no database URL), its HEALTHCHECK turns healthy, /readyz answers 200, and
SIGTERM drains and exits 0 well within the shutdown grace."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.live.docker import container_name, docker, inspect, published_port, remove
from tests.processes import wait_until

GRACE_S = 20


def _status(status: str) -> dict[str, str]:
    """Fields of /proc/1/status (the sustain process) inside the container."""
    return dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)


@pytest.mark.usefixtures("images")
def test_image_runs_locked_down_turns_healthy_and_drains_on_sigterm() -> None:
    name = container_name("sustain-image")
    docker("run", "--detach", "--name", name, "--read-only", "--cap-drop", "ALL",
           "--security-opt", "no-new-privileges",
           "--tmpfs", "/tmp", "--tmpfs", "/var/lib/sustain:uid=10001,gid=10001,mode=0700",
           "--env", f"SUSTAIN_SHUTDOWN_GRACE_S={GRACE_S}",
           "--publish", "127.0.0.1::8000", "sustain:dev")
    try:
        config = inspect(name)["Config"]
        assert config["User"] == "10001:10001"
        assert config["Healthcheck"]["Test"][0] == "CMD"
        port = published_port(name, 8000)

        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout_s=90, step_s=0.5)
        wait_until(lambda: inspect(name)["State"]["Health"]["Status"] == "healthy",
                   timeout_s=60, step_s=1)

        status = _status(docker("exec", name, "cat", "/proc/1/status").stdout)
        assert status["Uid"].split()[:2] == ["10001", "10001"]
        assert int(status["CapEff"], 16) == 0
        assert int(status["CapBnd"], 16) == 0
        assert status["NoNewPrivs"].strip() == "1"
        write = docker("exec", name, "touch", "/opt/sustain/written", check=False)
        assert write.returncode != 0
        assert "Read-only file system" in write.stderr

        started = time.monotonic()
        docker("kill", "--signal", "TERM", name)
        exit_code = int(docker("wait", name, timeout_s=GRACE_S + 30).stdout.strip())
        took = time.monotonic() - started
        state = inspect(name)["State"]
        assert (exit_code, state["OOMKilled"]) == (0, False)
        # Only guards against a hang: shutdown (the embedded PostgreSQL included) takes a few
        # seconds; the bound is the grace an orchestrator gives before SIGKILL.
        assert took < GRACE_S, f"shutdown took {took:.1f} s, more than the {GRACE_S} s grace"
        logs = docker("logs", name).stderr + docker("logs", name).stdout
        assert "embedded PostgreSQL stopped" in logs
    finally:
        remove([name])
