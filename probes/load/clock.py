"""The run's time line: one monotonic origin, mapped once to wall-clock time."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True, slots=True)
class RunClock:
    origin_ns: int
    """perf_counter_ns() at the start of the run."""
    origin_wall: datetime

    @classmethod
    def start(cls) -> RunClock:
        return cls(time.perf_counter_ns(), datetime.now(UTC))

    def ms(self, t_ns: int) -> float:
        """Milliseconds from the run origin to monotonic time t_ns."""
        return (t_ns - self.origin_ns) / 1e6

    def wall(self, t_ms: float) -> datetime:
        return self.origin_wall + timedelta(milliseconds=t_ms)
