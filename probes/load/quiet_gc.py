"""Keeping the cyclic garbage collector out of measurements.

A full collection walks every live object; with tens of thousands of samples in memory it
stopped the event loop for 20-150 ms in benchmarks/capacity.py, which showed up as generator
lag and as latency that the endpoint never had. Reference counting still frees almost all of a
run's garbage, so automatic collection is paused while any run is measuring and a collection
runs when the last one ends (or, if runs keep overlapping, at a run's end once a minute).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_PAUSE_S = 60.0

_active = 0
_paused_since: float | None = None


@contextmanager
def quiet_gc() -> Iterator[None]:
    global _active, _paused_since
    if _active == 0:
        _paused_since = time.monotonic()
        gc.disable()
    _active += 1
    try:
        yield
    finally:
        _active -= 1
        overdue = _paused_since is not None and time.monotonic() - _paused_since > MAX_PAUSE_S
        if _active == 0:
            gc.enable()
            _paused_since = None
            gc.collect()
        elif overdue:
            gc.collect()
            _paused_since = time.monotonic()
