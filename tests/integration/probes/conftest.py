"""These tests time the load generator (lag, TTFT). The service freezes its heap after start-up
so that full collections skip long-lived objects (service/api/app.py, gc.freeze); the test
process has collected much more by now (earlier suites load chart schemas, browsers, apps),
and a full collection over all of it can stall the generator's loop for longer than the 5 ms
lag budget. Freezing what exists before these tests gives them the service's conditions."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", autouse=True)
def frozen_heap() -> Iterator[None]:
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()
