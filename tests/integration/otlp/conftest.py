"""OpenTelemetry export against test OTLP receivers on loopback (tests/otlp_receivers.py):
real runs against the simulator, real exporters over real gRPC and HTTP."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

TOKENS = 8
"""Output tokens of every simulated answer."""


def otel_env(monkeypatch: pytest.MonkeyPatch, **variables: str) -> None:
    """Exactly these OTEL_* variables (every other one unset) for the test."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=5.0, itl_ms=1.0,
                                             output_tokens=TOKENS)) as simulator:
        yield simulator


@pytest.fixture
async def clients() -> AsyncIterator[HttpClients]:
    async with HttpClients() as opened:
        yield opened
