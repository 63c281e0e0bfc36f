"""Prometheus's side of sustain's /metrics for tests: the text parsed as a scrape parses it,
`histogram_quantile` as Prometheus computes it, and promtool to run the real thing."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.tools import require_tool

Labels = tuple[tuple[str, str], ...]
"""A series' labels, sorted, without `le`."""


def promtool() -> str:
    return require_tool("promtool", "Debian package `prometheus`")


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float:
    """Prometheus's quantile of a classic histogram (promql/quantile.go, bucketQuantile):
    `buckets` maps each upper bound (+Inf included) to its cumulative count (or rate). The
    rank q x total falls in the first bucket whose count reaches it, and the result is
    interpolated linearly within that bucket, as if its values were spread evenly; in the
    +Inf bucket it is the highest finite bound, in the first one it starts from 0. NaN
    without observations or without +Inf."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(buckets.items())
    if not ordered or not math.isinf(ordered[-1][0]):
        return math.nan
    monotonic: list[tuple[float, float]] = []
    for bound, count in ordered:  # ensureMonotonic: a lower count is raised to the previous
        monotonic.append((bound, max(count, monotonic[-1][1]) if monotonic else count))
    if len(monotonic) < 2:
        return math.nan
    observations = monotonic[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next((i for i, (_, count) in enumerate(monotonic[:-1]) if count >= rank),
             len(monotonic) - 1)
    if b == len(monotonic) - 1:
        return monotonic[-2][0]
    if b == 0 and monotonic[0][0] <= 0:
        return monotonic[0][0]
    start, (end, count) = 0.0, monotonic[b]
    if b > 0:
        start = monotonic[b - 1][0]
        count -= monotonic[b - 1][1]
        rank -= monotonic[b - 1][1]
    return start + (end - start) * (rank / count)


def scraped_buckets(text: str) -> dict[str, dict[Labels, dict[float, float]]]:
    """Every histogram's `_bucket` series of one /metrics text, as Prometheus's scrape parses
    it: per family, per series (its labels but `le`), each upper bound's cumulative count."""
    families: dict[str, dict[Labels, dict[float, float]]] = {}
    for parsed in text_string_to_metric_families(text):
        if parsed.type != "histogram":
            continue
        series = families.setdefault(parsed.name, {})
        for sample in parsed.samples:
            if sample.name == f"{parsed.name}_bucket":
                labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
                series.setdefault(labels, {})[float(sample.labels["le"])] = sample.value
    return families


def selector(name: str, labels: Labels | Mapping[str, str]) -> str:
    pairs = labels.items() if isinstance(labels, Mapping) else labels
    inner = ",".join(f'{k}="{v}"' for k, v in pairs)
    return f"{name}{{{inner}}}"


def run_unit_tests(directory: Path, tests: Sequence[dict[str, Any]],
                   name: str = "scraped_test.yaml") -> subprocess.CompletedProcess[str]:
    """`promtool test rules` on these test groups (no rule files), written into `directory`."""
    path = directory / name
    path.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m",
                                    "tests": list(tests)}, sort_keys=False, width=10_000))
    return subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True,
                          text=True, timeout=300, check=False)
