"""Keeping the cyclic garbage collector out of measurements.

A full collection walks every live object; with tens of thousands of samples in memory it
stopped the event loop for 20-150 ms in benchmarks/capacity.py, which showed up as generator
lag and as latency that the endpoint never had. Reference counting still frees almost all of a
run's garbage, so automatic collection is paused while any run is measuring and resumes when
the last one ends. No full collection is forced then: in a service that starts dozens of short
runs a second, one at each quiet moment stopped the event loop for tens of milliseconds each
time and delayed the next runs' first requests. Only when runs have overlapped without a gap
for MAX_PAUSE_S does a run's end force one, so cyclic garbage cannot pile up.
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
        elif overdue:
            gc.collect()
            _paused_since = time.monotonic()
