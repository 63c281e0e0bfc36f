"""The Docker engine the live deploy tests drive: the real `docker` CLI and Compose plugin over
the engine's socket, no SDK in between, so the commands are the ones an operator types."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


class DockerError(AssertionError):
    """A docker command failed; the message carries its output (never a secret: tests pass
    secrets only through environment variables, which docker does not echo)."""


def docker(*args: str, timeout_s: float = 300, env: dict[str, str] | None = None,
           check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `docker ARGS...` and return it; DockerError with its output when it fails."""
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, **(env or {})}, check=False)
    if check and done.returncode != 0:
        raise DockerError(f"docker {' '.join(args[:3])} ... exited {done.returncode}:\n"
                          f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def inspect(container: str) -> dict[str, Any]:
    """`docker inspect` of one container."""
    found: list[dict[str, Any]] = json.loads(docker("inspect", container).stdout)
    return found[0]


def published_port(container: str, port: int) -> int:
    """The loopback host port a container's port was published on."""
    line = docker("port", container, f"{port}/tcp").stdout.splitlines()[0]
    return int(line.rsplit(":", 1)[1])


def engine_answers() -> bool:
    """Whether a Docker engine answers on the default socket."""
    if shutil.which("docker") is None:
        return False
    try:
        return docker("info", "--format", "{{.ServerVersion}}", timeout_s=30,
                      check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def wait_for_engine(timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if engine_answers():
            return
        time.sleep(0.5)
    raise DockerError(f"no Docker engine answered within {timeout_s:.0f} s")


def run_script(script: Path, *args: str, timeout_s: float = 900) -> float:
    """Run one of deploy/'s scripts; seconds it took. DockerError with its output on failure."""
    started = time.monotonic()
    try:
        done = subprocess.run([str(script), *args], capture_output=True, text=True,
                              timeout=timeout_s, check=False, cwd=ROOT)
    except subprocess.TimeoutExpired as error:
        raise DockerError(f"{script.relative_to(ROOT)} took over {timeout_s:.0f} s") from error
    if done.returncode != 0:
        raise DockerError(f"{script.relative_to(ROOT)} exited {done.returncode}:\n"
                          f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return time.monotonic() - started


def remove(containers: Sequence[str]) -> None:
    """Force-remove containers this test made (by the IDs or names it gave them)."""
    if containers:
        docker("rm", "--force", "--volumes", *containers, check=False)


def container_name(prefix: str) -> str:
    """A name no other session's container has."""
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
