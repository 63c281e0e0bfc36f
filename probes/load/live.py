"""Live counters of a run in progress, for a progress display; updated by the drivers."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from sustain.probes.measure.percentiles import quantile
from sustain.probes.measure.sample import Measurement

RECENT = 2048


@dataclass(slots=True)
class LiveStats:
    stage: str = ""
    sent: int = 0
    in_flight: int = 0
    completed: int = 0
    errors: int = 0
    recent_ttft_ms: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))
    """TTFT of the newest successful requests (a window, for running percentiles)."""

    def on_send(self) -> None:
        self.sent += 1
        self.in_flight += 1

    def on_done(self, measurement: Measurement) -> None:
        self.in_flight -= 1
        self.completed += 1
        if measurement.error_class is not None:
            self.errors += 1
        elif measurement.ttft_ms is not None:
            self.recent_ttft_ms.append(measurement.ttft_ms)

    def ttft_percentile(self, q: float) -> float | None:
        values = sorted(self.recent_ttft_ms)
        return quantile(values, q) if values else None
