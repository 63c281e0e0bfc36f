"""Fixtures of the live deploy suite: a Docker engine (started here when none runs, after
installing Debian's docker.io, mmdebstrap and the pinned Compose plugin where missing), the
images built by deploy/build-image.sh and deploy/ci-images/build.sh, and the compose stack.

Locally the suite is skipped, with the reason printed, only when no engine can be had (no
docker and no root to install one). Under CI (CI set) that is a failure: nothing is skipped
there. A dockerd started here is stopped by its PID when the session ends; images stay in the
engine's store, so a second session builds nothing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live.docker import (
    DEPLOY,
    ROOT,
    DockerError,
    engine_answers,
    run_script,
    wait_for_engine,
)
from tests.live.stack import ComposeStack

ORDER = ["test_image.py", "test_compose_stack.py", "test_helm_pod.py", "test_compose_down.py"]
"""Module order: the Helm pod uses the stack's PostgreSQL, and `down -v` ends the stack."""

TIMINGS: dict[str, float] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        path = Path(str(item.fspath))
        return ORDER.index(path.name) if path.parent == here and path.name in ORDER else -1

    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.live)
    items.sort(key=rank)  # stable: only the live modules move, to the end, in ORDER


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        parts = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in TIMINGS.items())
        terminalreporter.write_line(f"live deploy suite: {parts}")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"live deploy suite cannot run under CI: {reason}")
    pytest.skip(f"live deploy suite: {reason}")


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A Docker engine answering on the default socket, with Compose and mmdebstrap."""
    started = time.monotonic()
    process: subprocess.Popen[bytes] | None = None
    if os.geteuid() != 0 and not (shutil.which("docker") and engine_answers()):
        _unavailable("no Docker engine answers and this user cannot start one (not root)")
    try:
        run_script(DEPLOY / "ci-images" / "engine.sh", timeout_s=600)
    except DockerError as error:
        _unavailable(f"installing the engine failed: {error}")
    if not engine_answers():
        log = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
        with log.open("wb") as out:
            process = subprocess.Popen(["dockerd"], stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        try:
            wait_for_engine(60)
        except BaseException:
            _stop(process)
            if os.environ.get("CI"):
                raise
            pytest.skip(f"live deploy suite: dockerd did not start: {log.read_text()[-2000:]}")
    TIMINGS["engine"] = time.monotonic() - started
    try:
        yield
    finally:
        if process is not None:
            _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the dockerd this session started, by its PID: SIGTERM (it stops its containers and
    its containerd, then exits); if it has not within 60 s, SIGKILL to its process group (its
    own session, so its containerd and shims go with it)."""
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def images(engine: None) -> None:
    """sustain:dev (also tagged sustain:local, the compose file's name) and the stand-ins."""
    del engine  # needed running, not used
    TIMINGS["image"] = run_script(DEPLOY / "build-image.sh", "--tag", "sustain:dev",
                                  "--tag", "sustain:local")
    TIMINGS["stand-ins"] = run_script(DEPLOY / "ci-images" / "build.sh")


@pytest.fixture(scope="session")
def stack(images: None) -> Iterator[ComposeStack]:
    """The compose stack of docker-compose.yml, up and healthy (Grafana left out: there is no
    Grafana image or stand-in here); `down -v` at the end whatever happened."""
    del images  # needed built, not used
    compose = ComposeStack(ROOT / "docker-compose.yml", project="sustain-live")
    started = time.monotonic()
    try:
        compose.up()
        TIMINGS["compose up"] = time.monotonic() - started
        yield compose
    finally:
        compose.down()

