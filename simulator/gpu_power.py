"""The simulator as a DCGM exporter stand-in: when given a power draw, its /metrics also
exposes what NVIDIA's dcgm-exporter does for each GPU, `DCGM_FI_DEV_POWER_USAGE` (W, a gauge)
and `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ since the exporter started, a counter), labelled
`gpu` and `UUID` as dcgm-exporter labels them. The power is constant, so the energy is the
power times the time since the simulator started, read from the monotonic clock at each scrape:
the arithmetic an efficiency figure must match. Each sample carries the time it was read (an
exposition's optional timestamp), which the scraper uses to time it."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

POWER = "DCGM_FI_DEV_POWER_USAGE"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


class GpuPowerCollector(Collector):
    """`gpus` GPUs, each drawing `watts` since this collector was made."""

    def __init__(self, watts: float, gpus: int) -> None:
        self.watts = watts
        self.gpus = gpus
        self.started = time.monotonic()

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(POWER, "Power draw (in W).", labels=["gpu", "UUID"])
        yield GaugeMetricFamily(ENERGY, "Total energy consumption since boot (in mJ).",
                                labels=["gpu", "UUID"])

    def collect(self) -> Iterator[Metric]:
        elapsed = time.monotonic() - self.started
        now = time.time()  # each sample says when it was read, as an exposition may
        power = GaugeMetricFamily(POWER, "Power draw (in W).", labels=["gpu", "UUID"])
        # dcgm-exporter types it a counter but names it without `_total`; client_python would
        # add the suffix to a counter family, so it is written as a gauge of the same name
        energy = GaugeMetricFamily(ENERGY, "Total energy consumption since boot (in mJ).",
                                   labels=["gpu", "UUID"])
        for gpu in range(self.gpus):
            labels = [str(gpu), f"GPU-sim-{gpu:04d}"]
            power.add_metric(labels, self.watts, timestamp=now)
            energy.add_metric(labels, self.watts * elapsed * 1000.0, timestamp=now)
        yield power
        yield energy
