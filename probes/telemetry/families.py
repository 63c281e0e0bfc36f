"""The server-side series worth reading beside a probe's own figures, by server family, under
one canonical name each: requests running and waiting (the queue), KV-cache use, prefix-cache
hits and lookups, preemptions, and the GPUs' power (W) and energy (mJ) as NVIDIA's
dcgm-exporter exposes them (summed over the GPUs the scraper keeps: scraper.py). Names as the
servers export them (vLLM, SGLang, TGI, llama.cpp's server); a family that renamed a series
over versions lists every spelling.
Plain data and pure functions over parsed samples.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Aggregate = Literal["sum", "max"]
"""How one name's series (one per label set: model, rank) become one value: counts add up,
ratios take the highest."""


@dataclass(frozen=True, slots=True)
class Canonical:
    name: str
    aggregate: Aggregate
    counter: bool
    spellings: tuple[str, ...]
    """Exposed sample names, in order of preference (the first present is read)."""


SERIES: tuple[Canonical, ...] = (
    Canonical("running", "sum", False, (
        "vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size",
        "llamacpp:requests_processing")),
    Canonical("waiting", "sum", False, (
        "vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size",
        "llamacpp:requests_deferred")),
    Canonical("kv_cache_usage", "max", False, (
        "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio")),
    Canonical("prefix_cache_hits", "sum", True, (
        "vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")),
    Canonical("prefix_cache_queries", "sum", True, (
        "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")),
    Canonical("prefix_cache_hit_rate", "max", False, ("sglang:cache_hit_rate",)),
    Canonical("preemptions", "sum", True, (
        "vllm:num_preemptions_total", "sglang:num_retracted_reqs")),
    Canonical("gpu_power_w", "sum", False, ("DCGM_FI_DEV_POWER_USAGE",)),
    Canonical("gpu_energy_mj", "sum", True, ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",)),
)
"""The built-in map: canonical name, how to aggregate, whether it only grows."""

MAX_EXTRA_NAMES = 32
NAME_PATTERN = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]{0,199}$")
"""A Prometheus sample name (what a user may add to the built-in series)."""

ParsedSample = tuple[str, float]
"""(sample name, value) of one series of the exposition."""


def pick(samples: Iterable[ParsedSample], extra: Iterable[str] = ()) -> dict[str, float]:
    """The canonical series found among `samples`, plus each `extra` sample name as it is
    named (summed over its label sets); NaN and infinite values are left out."""
    totals: dict[str, list[float]] = {}
    for name, value in samples:
        if math.isfinite(value):
            totals.setdefault(name, []).append(value)
    values: dict[str, float] = {}
    for series in SERIES:
        found = next((totals[s] for s in series.spellings if s in totals), None)
        if found is not None:
            values[series.name] = sum(found) if series.aggregate == "sum" else max(found)
    for name in extra:
        if name in totals:
            values[name] = sum(totals[name])
    return values


def is_counter(name: str) -> bool:
    """Whether a series only grows (its increase over the run is what tells)."""
    known = next((s for s in SERIES if s.name == name), None)
    return known.counter if known is not None else name.endswith("_total")
