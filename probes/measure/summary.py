"""Run summary: availability, throughput, latency distributions and generator health."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, model_validator

from sustain.probes.measure.deployment import Efficiency
from sustain.probes.measure.finite import ratio
from sustain.probes.measure.percentiles import Distribution, distribution, quantile
from sustain.probes.measure.prompt_tokens import PromptCalibration, prompt_token_figures
from sustain.probes.measure.quality import QualityCounts
from sustain.probes.measure.sample import Outcome, Sample
from sustain.probes.measure.server_metrics import ScrapeCounts, ServerMetric
from sustain.probes.measure.sessions import (
    SessionCounts,
    TurnFigures,
    e2e_interactivity,
    session_counts,
    turns_by_index,
)
from sustain.probes.measure.slo import SloThresholds, meets
from sustain.probes.measure.steady import SteadyState
from sustain.probes.renamed import SUMMARY_RENAMED, accept_renamed, old_name

GENERATOR_LAG_FLOOR_MS = 5.0
GENERATOR_LAG_FRACTION = 0.01


class GeneratorHealth(BaseModel):
    """Whether the load generator kept to its schedule (docs/metrics.md#generator-lag)."""

    lag_p99_ms: float | None
    threshold_ms: float | None
    saturated: bool


class RunSummary(BaseModel):
    """What one run measured. Latencies in ms, throughputs per second of measured time."""

    attempts: int
    successes: int
    failures: int
    errors: dict[str, int]
    """Failed requests by error class."""
    availability: float | None
    """successes / attempts; None when nothing was attempted."""
    duration_s: float
    requests_per_second: float | None
    """Successful requests per second of measured time."""
    good: int | None = None
    """Requests that succeeded and met every SLO threshold; None without SLOs."""
    good_output_tokens: int | None = None
    """Output tokens of those requests; None without SLOs."""
    goodput: float | None
    """Requests per second that succeeded and met every SLO threshold; None without SLOs."""
    output_tokens_per_second: float | None
    """Output tokens of successful requests per second of measured time."""
    output_tokens: int
    output_tokens_estimated: bool
    """True when any successful request's token count was estimated, not server-reported."""
    ttft_ms: Distribution
    itl_ms: Distribution
    tpot_ms: Distribution
    e2e_ms: Distribution
    corrected_e2e_ms: Distribution
    lag_ms: Distribution
    generator: GeneratorHealth
    cached_tokens: int | None = None
    """Prompt tokens the server served from its prefix cache, over the successful requests
    whose usage said; None when none did."""
    cache_hit_ratio: float | None = None
    """cached_tokens / their prompt tokens: near 0 means every prefill was cold (the default
    workload's salt), near 1 that the cache served the prompts."""
    tool_call_ms: Distribution | None = None
    """Time to the first tool-call delta of the successful replies that called a tool (kept
    replies only: sessions and canaries); None when none did."""
    sessions: SessionCounts | None = None
    """A sessions run's conversations and turns; None otherwise."""
    turns_by_index: list[TurnFigures] | None = None
    e2e_interactivity: float | None = None
    """Sessions: output tokens per second of turn time, think and tool time left out."""
    quality: QualityCounts | None = None
    """Quality canaries: successful requests whose reply was checked against its line's
    `expect`, and how many passed; None when the run checked none."""
    server_metrics: dict[str, ServerMetric] | None = None
    """The server's own series over the run (its endpoint's metrics_url, scraped): queue,
    KV-cache use, prefix-cache hits, preemptions; None when it has no metrics_url."""
    server_scrapes: ScrapeCounts | None = None
    steady_state: SteadyState | None = None
    """A stage's steady state (MLPerf Endpoints' windows of TPOT p90); the figures of a
    capacity or Pareto point are over its steady part."""
    efficiency: Efficiency | None = None
    """Throughput per accelerator and kW, and cost per million output and good tokens, from
    the endpoint's deployment; None when it declares none."""
    input_tokens: int | None = None
    """Input (prompt) tokens of the successful requests whose server counted them; None when
    none did."""
    input_tokens_per_second: float | None = None
    """Those input tokens per second of measured time."""
    items: int | None = None
    """Inputs embedded (openai-embeddings) or documents ranked (rerank) by the successful
    requests; None for the generation kinds."""
    items_per_second: float | None = None
    """Those items per second of measured time: inputs/s or documents/s."""
    audio_s: float | None = None
    """Seconds of audio the successful transcription requests sent; None for other kinds."""
    rtf_ratio: Distribution | None = None
    """Real-time factor of the successful transcriptions: E2E over the audio's length (below 1
    is faster than real time); None for other kinds."""
    ttft_by_image_size: dict[str, Distribution] | None = None
    """TTFT of the successful requests that attached images, by the images' size
    (`WIDTHxHEIGHT`); None when none did."""
    rag_stages_ms: dict[str, Distribution] | None = None
    """A RAG probe's stages over its successful requests (embed, retrieve, rerank,
    generate_ttft, generate, and overhead: what the stages left out of E2E); None otherwise."""
    retrieval_checked: int | None = None
    """RAG requests whose question names its expected passage (and got past retrieval)."""
    retrieval_hit_ratio: float | None = None
    """The share of those whose expected passage reached the model."""
    prompt_tokens_requested: float | None = None
    """Mean prompt length, in tokens, that the successful requests asked for: synthetic
    prompts (`input_tokens`, `input_length`) and trace requests; None for prompts of given
    text (docs/metrics.md#prompt-tokens)."""
    prompt_tokens_served: float | None = None
    """Mean prompt tokens the server counted (`usage.prompt_tokens`) for those of them whose
    server reported it; None when none did."""
    prompt_tokens_ratio: float | None = None
    """Served over requested, over the requests with both: 1 when prompts were served at the
    length asked for."""
    prompt_calibration: PromptCalibration | None = None
    """How the run sized its synthetic prompts (the run's summary only, not a stage's); None
    for prompts of given text."""
    not_streamed: int = 0
    """Requests asked to stream that the server answered whole, as one JSON body (their TTFT
    is their E2E; docs/metrics.md#not-streamed)."""
    ttfo_ms: Distribution | None = None
    """Time to the first answer output of the successful streamed generations (after a
    reasoning model's thinking; docs/metrics.md#reasoning); None for other kinds."""
    answer_tpot_ms: Distribution | None = None
    """TPOT of the answer part: (E2E - TTFO) / (answer tokens - 1); None for other kinds."""
    reasoning_tokens: int | None = None
    """Output tokens the successful requests spent reasoning; None when none reasoned."""
    reasoning_tokens_estimated: bool = False
    """True when any of those counts was counted from the deltas, not the server's usage."""
    answer_tokens: int | None = None
    """Output tokens of the answers (output less reasoning), with reasoning_tokens."""
    reasoning_share: float | None = None
    """reasoning_tokens / output_tokens, from 0 to 1; None when no request could tell."""
    input_chars: int | None = None
    """Characters the successful speech requests asked to be spoken; None for other kinds."""
    job_phases_ms: dict[str, Distribution] | None = None
    """An asynchronous job kind's phases over its successful jobs (queue, generation,
    content); None for other kinds."""
    dns_ms: Distribution | None = None
    """HTTP phases of the successful requests (docs/metrics.md#http-phases): name resolution,
    TCP connect and TLS handshake of those that opened a connection (none on a reused one;
    no name resolution for an address literal), and TTFB (request sent to response head) of
    every one; each None when no request had it."""
    connect_ms: Distribution | None = None
    tls_ms: Distribution | None = None
    ttfb_ms: Distribution | None = None
    connection_reused_ratio: float | None = None
    """The share of requests (of those that had a connection) sent on a connection an earlier
    one opened, from 0 (`connection: new`) to near 1 (kept-alive connections); None when
    no request told."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """A summary stored or uploaded under the old names (sustain.probes.renamed)."""
        return accept_renamed(data, SUMMARY_RENAMED)

    # The old names, answered beside the new ones until the next release.
    request_throughput = old_name("requests_per_second", float | None)  # type: ignore[pydantic-field]
    output_token_throughput = old_name("output_tokens_per_second", float | None)  # type: ignore[pydantic-field]
    input_token_throughput = old_name("input_tokens_per_second", float | None)  # type: ignore[pydantic-field]
    item_throughput = old_name("items_per_second", float | None)  # type: ignore[pydantic-field]
    audio_seconds = old_name("audio_s", float | None)  # type: ignore[pydantic-field]
    rtf = old_name("rtf_ratio", Distribution | None)  # type: ignore[pydantic-field]
    retrieval_hit_rate = old_name("retrieval_hit_ratio", float | None)  # type: ignore[pydantic-field]


def combined_health(stages: Sequence[GeneratorHealth]) -> GeneratorHealth:
    """A run is saturated when any of its stages was; its lag is its worst stage's."""
    lags = [h.lag_p99_ms for h in stages if h.lag_p99_ms is not None]
    worst = max(stages, key=lambda h: h.lag_p99_ms or 0.0, default=None)
    return GeneratorHealth(lag_p99_ms=max(lags) if lags else None,
                           threshold_ms=None if worst is None else worst.threshold_ms,
                           saturated=any(h.saturated for h in stages))


def generator_health(samples: Sequence[Sample]) -> GeneratorHealth:
    """Saturated when p99 lag exceeds max(5 ms, 1 % of the mean inter-arrival time)."""
    scheduled = sorted(s.t_sched_ms for s in samples if s.t_sched_ms is not None)
    lags = sorted(lag for s in samples if (lag := s.lag_ms) is not None)
    if not lags:
        return GeneratorHealth(lag_p99_ms=None, threshold_ms=None, saturated=False)
    threshold = GENERATOR_LAG_FLOOR_MS
    if len(scheduled) >= 2:
        mean_gap = (scheduled[-1] - scheduled[0]) / (len(scheduled) - 1)
        threshold = max(threshold, GENERATOR_LAG_FRACTION * mean_gap)
    p99 = quantile(lags, 0.99)
    return GeneratorHealth(lag_p99_ms=p99, threshold_ms=threshold, saturated=p99 > threshold)


def _rate(count: int, duration_s: float) -> float | None:
    """count per second of `duration_s`; None over no time (or a quotient past the float
    range, over a denormal duration)."""
    return ratio(count, duration_s)


def summarise(samples: Sequence[Sample], duration_s: float, slo: SloThresholds | None = None,
              generator: GeneratorHealth | None = None) -> RunSummary:
    """Summarise a run or a stage. Latency statistics use successful requests only; lag uses
    all. `duration_s` is the measured time (end of warmup to the last response). `generator`
    overrides the health computed from these samples (a run's health is its stages')."""
    good = good_tokens = None
    if slo is not None and any(v is not None for v in slo.model_dump().values()):
        met = [s for s in samples if meets(s, slo)]
        good = len(met)
        good_tokens = sum(s.measurement.output_tokens for s in met)
    ok = [s for s in samples if s.outcome is Outcome.SUCCESS]
    errors = Counter(
        str(s.measurement.error_class) for s in samples if s.measurement.error_class is not None
    )
    tokens = sum(s.measurement.output_tokens for s in ok)
    cached, prompt = cache_counts(ok)
    inputs = [s.measurement.input_tokens for s in ok if s.measurement.input_tokens is not None]
    items = [s.measurement.items for s in ok if s.measurement.items is not None]
    audio = [s.measurement.audio_s for s in ok if s.measurement.audio_s is not None]
    hits = [s.measurement.hit for s in samples if s.measurement.hit is not None]
    prompts = prompt_token_figures(ok)
    reasoning = reasoning_figures(ok)
    chars = [s.measurement.input_chars for s in ok if s.measurement.input_chars is not None]
    return RunSummary(
        attempts=len(samples),
        successes=len(ok),
        failures=len(samples) - len(ok),
        errors=dict(sorted(errors.items())),
        availability=len(ok) / len(samples) if samples else None,
        duration_s=duration_s,
        requests_per_second=_rate(len(ok), duration_s) if samples else None,
        good=good,
        good_output_tokens=good_tokens,
        goodput=_rate(good, duration_s) if samples and good is not None else None,
        output_tokens_per_second=_rate(tokens, duration_s) if samples else None,
        output_tokens=tokens,
        output_tokens_estimated=any(not s.measurement.tokens_server_counted for s in ok),
        ttft_ms=distribution([v for s in ok if (v := s.ttft_ms) is not None]),
        itl_ms=distribution([gap for s in ok for gap in s.measurement.itl_ms]),
        tpot_ms=distribution([v for s in ok if (v := s.tpot_ms) is not None]),
        e2e_ms=distribution([s.e2e_ms for s in ok]),
        corrected_e2e_ms=distribution([v for s in ok if (v := s.corrected_e2e_ms) is not None]),
        lag_ms=distribution([v for s in samples if (v := s.lag_ms) is not None]),
        generator=generator or generator_health(samples),
        cached_tokens=cached,
        cache_hit_ratio=None if cached is None else ratio(cached, prompt),
        tool_call_ms=distribution(calls) if (calls := [
            v for s in ok if (v := s.measurement.tool_call_ms) is not None]) else None,
        quality=quality_counts(ok),
        sessions=session_counts(samples),
        turns_by_index=turns_by_index(samples),
        e2e_interactivity=e2e_interactivity(samples),
        input_tokens=sum(inputs) if inputs else None,
        input_tokens_per_second=_rate(sum(inputs), duration_s) if inputs else None,
        items=sum(items) if items else None,
        items_per_second=_rate(sum(items), duration_s) if items else None,
        audio_s=sum(audio) if audio else None,
        rtf_ratio=distribution([r for s in ok if (r := s.measurement.rtf) is not None])
        if audio else None,
        ttft_by_image_size=ttft_by_image_size(ok),
        rag_stages_ms=rag_stages(ok),
        retrieval_checked=len(hits) if hits else None,
        retrieval_hit_ratio=ratio(sum(hits), len(hits)) if hits else None,
        prompt_tokens_requested=prompts.requested,
        prompt_tokens_served=prompts.served,
        prompt_tokens_ratio=prompts.ratio,
        not_streamed=sum(1 for s in samples if s.measurement.streamed is False),
        ttfo_ms=distribution(ttfo) if (ttfo := [
            v for s in ok if (v := s.measurement.ttfo_ms) is not None]) else None,
        answer_tpot_ms=distribution(answer) if (answer := [
            v for s in ok if (v := s.answer_tpot_ms) is not None]) else None,
        **reasoning,
        input_chars=sum(chars) if chars else None,
        job_phases_ms=job_phases(ok),
        **http_phases(samples, ok),
    )


def reasoning_figures(samples: Sequence[Sample]) -> dict[str, Any]:
    """Reasoning and answer tokens over `samples` (successful ones), and the reasoning share
    over those that could tell it (Measurement.reasoning_share)."""
    told = [s.measurement for s in samples if s.measurement.reasoning_share is not None]
    if not told:
        return {}
    reasoning = sum(m.reasoning_tokens or 0 for m in told)
    output = sum(m.output_tokens for m in told)
    return {"reasoning_tokens": reasoning if any(m.reasoning_tokens is not None for m in told)
            else None,
            "reasoning_tokens_estimated": any(m.reasoning_tokens is not None
                                              and not m.reasoning_server_counted for m in told),
            "answer_tokens": sum(m.answer_tokens for m in told),
            "reasoning_share": ratio(reasoning, output)}


PHASE_FIELDS = ("dns_ms", "connect_ms", "tls_ms", "ttfb_ms")
"""The HTTP phases of a Measurement, in the order a request goes through them."""


def http_phases(samples: Sequence[Sample], ok: Sequence[Sample]) -> dict[str, Any]:
    """Each HTTP phase over the successful requests `ok` (those that had it), and the share
    of `samples` that went on a reused connection (of those that had a connection)."""
    values: dict[str, list[float]] = {name: [] for name in PHASE_FIELDS}
    for sample in ok:
        m = sample.measurement
        for name, value in (("dns_ms", m.dns_ms), ("connect_ms", m.connect_ms),
                            ("tls_ms", m.tls_ms), ("ttfb_ms", m.ttfb_ms)):
            if value is not None:
                values[name].append(value)
    figures: dict[str, Any] = {name: distribution(told) for name, told in values.items()
                               if told}
    told_reuse = [r for s in samples if (r := s.measurement.connection_reused) is not None]
    if told_reuse:
        figures["connection_reused_ratio"] = ratio(sum(told_reuse), len(told_reuse))
    return figures


def job_phases(samples: Sequence[Sample]) -> dict[str, Distribution] | None:
    """Each phase of an asynchronous job kind over `samples`; None when none had phases."""
    phases: dict[str, list[float]] = {}
    for sample in samples:
        for name, ms in sample.measurement.phases_ms or ():
            phases.setdefault(name, []).append(ms)
    return {name: distribution(values) for name, values in phases.items()} if phases else None


def rag_stages(samples: Sequence[Sample]) -> dict[str, Distribution] | None:
    """Each RAG stage's times over `samples`, and `overhead`: E2E less the stages the
    generation's E2E ends (embed, retrieve, rerank, generate)."""
    stages: dict[str, list[float]] = {}
    for sample in samples:
        for name, ms in sample.rag_stages_ms:
            stages.setdefault(name, []).append(ms)
    return {name: distribution(values) for name, values in stages.items()} if stages else None


def ttft_by_image_size(samples: Sequence[Sample]) -> dict[str, Distribution] | None:
    """TTFT by the size of the images each request attached; None when none did."""
    sizes: dict[str, list[float]] = {}
    for sample in samples:
        size = sample.measurement.image_size
        if size is not None:
            values = sizes.setdefault(size, [])
            if sample.ttft_ms is not None:
                values.append(sample.ttft_ms)
    return {size: distribution(values) for size, values in sorted(sizes.items())} \
        if sizes else None


def quality_counts(samples: Sequence[Sample]) -> QualityCounts | None:
    """Checked and passed quality canaries among `samples`; None when none was checked."""
    verdicts = [v for s in samples if (v := s.quality) is not None]
    return QualityCounts(checked=len(verdicts), passed=sum(verdicts)) if verdicts else None


def cache_counts(samples: Sequence[Sample]) -> tuple[int | None, int]:
    """Cached prompt tokens and the prompt tokens they belong to, over the samples whose
    server reported both; (None, 0) when none did."""
    cached = prompt = 0
    reported = False
    for sample in samples:
        m = sample.measurement
        if m.cached_tokens is not None and m.input_tokens is not None:
            reported = True
            cached += m.cached_tokens
            prompt += m.input_tokens
    return (cached if reported else None), prompt
