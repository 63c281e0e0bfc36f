"""The per-stage sketches of a run: one mergeable sketch per metric (latencies, output length,
canary scores), from the same values the run summary uses, so windows over many runs merge
them (docs/metrics.md#sketches)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, get_args

from sustain.probes.measure.sample import Outcome, Sample
from sustain.probes.measure.sketch import MetricSketch

MetricName = Literal["ttft", "itl", "tpot", "e2e", "corrected_e2e", "lag", "output_tokens",
                     "quality", "items", "rtf", "retrieval", "rag_embed", "rag_retrieve",
                     "rag_rerank", "rag_gen_ttft", "rag_overhead", "ttfo", "answer_tpot",
                     "reasoning_share", "job_queue", "job_generation", "job_content", "dns",
                     "connect", "tls", "ttfb"]
METRICS: tuple[MetricName, ...] = get_args(MetricName)
"""Metrics that are sketched: latencies in ms; `output_tokens`, each successful request's
output length (its mean drifts when a model is swapped or quantised); `quality`, each checked
canary's score, 1 when it passed and 2 when it failed, so its mean is 1 + the failed share and
a rise is a regression, as for the latencies; `items`, the inputs embedded or documents ranked
by each successful request of an item kind (their sum over measured time is items/s);
`rtf`, each successful transcription's real-time factor; `retrieval`, each RAG question's
retrieval verdict, 1 when its expected passage was retrieved and 2 when not (its mean is 1 +
the miss share); `rag_*`, a successful RAG request's stage times in ms; `ttfo`, the time to
the first answer output, and `answer_tpot`, the answer's TPOT (ms); `reasoning_share`, each
successful generation's reasoning tokens over its output tokens, plus 1 (so from 1 to 2: a
sketch's relative accuracy needs values away from 0, and a rise is a model thinking longer);
`job_*`, an asynchronous job's phases in ms; `dns`, `connect`, `tls` and `ttfb`, the HTTP phases
in ms (docs/metrics.md#http-phases: the first three of requests that opened a connection
only)."""
REASONING_SHARE_OFFSET = 1.0
QUALITY_PASSED, QUALITY_FAILED = 1.0, 2.0
RETRIEVAL_HIT, RETRIEVAL_MISS = 1.0, 2.0
RAG_STAGE_METRICS: dict[str, MetricName] = {
    "embed": "rag_embed", "retrieve": "rag_retrieve", "rerank": "rag_rerank",
    "generate_ttft": "rag_gen_ttft", "overhead": "rag_overhead"}
"""The sketched RAG stages (a run's `generate` is its E2E's tail; its TTFT is sketched)."""
JOB_PHASE_METRICS: dict[str, MetricName] = {
    "queue": "job_queue", "generation": "job_generation", "content": "job_content"}
"""An asynchronous job's phases (sample.JOB_PHASES) and their sketches."""


def reasoning_share(sketch_mean: float | None) -> float | None:
    """The mean reasoning share (0 to 1) from the mean of `reasoning_share` sketches (which
    hold each share plus REASONING_SHARE_OFFSET); None without values."""
    return None if sketch_mean is None else \
        min(max(sketch_mean - REASONING_SHARE_OFFSET, 0.0), 1.0)


def metric_values(sample: Sample) -> Iterable[tuple[MetricName, float]]:
    """The (metric, value) pairs one sample contributes: latencies of successful requests
    only, lag and retrieval verdicts of every request (as in `summarise`)."""
    if (lag := sample.lag_ms) is not None:
        yield "lag", lag
    if (hit := sample.measurement.hit) is not None:  # judged even if generation then failed
        yield "retrieval", RETRIEVAL_HIT if hit else RETRIEVAL_MISS
    if sample.outcome is not Outcome.SUCCESS:
        return
    if (ttft := sample.ttft_ms) is not None:
        yield "ttft", ttft
    for gap in sample.measurement.itl_ms:
        yield "itl", gap
    if (tpot := sample.tpot_ms) is not None:
        yield "tpot", tpot
    if (ttfo := sample.measurement.ttfo_ms) is not None:
        yield "ttfo", ttfo
    if (answer_tpot := sample.answer_tpot_ms) is not None:
        yield "answer_tpot", answer_tpot
    if (share := sample.measurement.reasoning_share) is not None:
        yield "reasoning_share", share + REASONING_SHARE_OFFSET
    yield "e2e", sample.e2e_ms
    if (corrected := sample.corrected_e2e_ms) is not None:
        yield "corrected_e2e", corrected
    if sample.measurement.output_tokens > 0:
        yield "output_tokens", float(sample.measurement.output_tokens)
    if (quality := sample.quality) is not None:
        yield "quality", QUALITY_PASSED if quality else QUALITY_FAILED
    m = sample.measurement
    if m.items is not None:
        yield "items", float(m.items)
    if (rtf := m.rtf) is not None:
        yield "rtf", rtf
    for stage, ms in sample.rag_stages_ms:
        if (metric := RAG_STAGE_METRICS.get(stage)) is not None:
            yield metric, ms
    for phase, ms in m.phases_ms or ():
        if (metric := JOB_PHASE_METRICS.get(phase)) is not None:
            yield metric, ms
    if m.dns_ms is not None:
        yield "dns", m.dns_ms
    if m.connect_ms is not None:
        yield "connect", m.connect_ms
    if m.tls_ms is not None:
        yield "tls", m.tls_ms
    if m.ttfb_ms is not None:
        yield "ttfb", m.ttfb_ms


def stage_sketches(samples: Sequence[Sample]) -> dict[tuple[int, MetricName], MetricSketch]:
    """Sketches keyed by (stage, metric); metrics with no values are left out."""
    sketches: dict[tuple[int, MetricName], MetricSketch] = {}
    for sample in samples:
        for metric, value in metric_values(sample):
            key = (sample.stage, metric)
            sketch = sketches.get(key)
            if sketch is None:
                sketch = sketches[key] = MetricSketch()
            sketch.add(value)
    return sketches
