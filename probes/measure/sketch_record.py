"""A run's sketches as one compact record (runs.sketches): every (stage, metric) sketch of
the run in its packed form (MetricSketch.pack), in one msgpack array. A single-request run's
record is its values, about 12 bytes per metric, where one row per sketch cost a kilobyte.

Layout: `[VERSION, [code, stage, *entry], ...]`, `code` the metric's place in CODES, `entry`
the PackedSketch's. CODES only ever grows at its end: a stored record names metrics by it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

import msgpack

from sustain.probes.measure.run_sketches import MetricName
from sustain.probes.measure.sketch import MetricSketch, PackedSketch

VERSION = 1
CODES: tuple[MetricName, ...] = (
    "ttft", "itl", "tpot", "e2e", "corrected_e2e", "lag", "output_tokens", "quality", "items",
    "rtf", "retrieval", "rag_embed", "rag_retrieve", "rag_rerank", "rag_gen_ttft",
    "rag_overhead", "ttfo", "answer_tpot", "reasoning_share", "job_queue", "job_generation",
    "job_content", "dns", "connect", "tls", "ttfb")
"""Each metric's code in a record, its index here: append only (records store codes)."""
_CODE_OF = {metric: code for code, metric in enumerate(CODES)}


def pack(sketches: Mapping[tuple[int, str], MetricSketch]) -> bytes:
    """The record of a run's `sketches` ((stage, metric) -> sketch), in stage and metric
    order. ValueError for a metric without a code or a sketch of another index mapping."""
    entries: list[list[Any]] = []
    for (stage, metric), sketch in sorted(sketches.items()):
        code = _CODE_OF.get(metric)  # type: ignore[call-overload]
        if code is None:
            raise ValueError(f"no record code for metric {metric!r}")
        entries.append([code, stage, *sketch.pack().entry])
    data: bytes = msgpack.packb([VERSION, *entries], use_bin_type=True)
    return data


def unpack(record: bytes, metrics: Collection[str] | None = None
           ) -> Iterator[tuple[int, MetricName, PackedSketch]]:
    """(stage, metric, sketch) of each sketch in `record` (of `metrics` only, if given), in
    the record's order. ValueError for a record this code cannot read, and, when no
    `metrics` are named, for a metric code it does not know (a newer release's, read after a
    rollback); asked for some metrics, such a sketch is passed over, as SQL passed over a
    metric it was not asked for."""
    decoded = msgpack.unpackb(record, use_list=False, strict_map_key=True)
    if not isinstance(decoded, tuple) or not decoded or decoded[0] != VERSION:
        raise ValueError("not a sketch record of this version")
    for item in decoded[1:]:
        code, stage, *entry = item
        if not 0 <= code < len(CODES):
            if metrics is None:
                raise ValueError(f"unknown metric code {code} in a sketch record")
            continue
        metric = CODES[code]
        if metrics is None or metric in metrics:
            yield stage, metric, PackedSketch(tuple(entry))
