"""The human-readable report of a run (`sustain probe` without --json): rich tables of the
progress while it runs, then of its results; `report.json_report` is the machine-readable
one."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table

from sustain.probes.load.live import LiveStats
from sustain.probes.measure.percentiles import Distribution
from sustain.probes.measure.prompt_tokens import PromptCalibration
from sustain.probes.measure.summary import RunSummary
from sustain.probes.run_result import RunResult

LOW_COUNT_CAPTION = "* too few samples for a 99 % confidence bound on this percentile"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _factor(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def progress_table(live: LiveStats, elapsed_s: float) -> Table:
    """One row: where a run in progress stands."""
    table = Table(title="sustain probe", show_header=True, expand=False)
    for column in ("elapsed", "stage", "sent", "in flight", "errors", "TTFT p50 ms",
                   "TTFT p99 ms"):
        table.add_column(column, justify="right")
    table.add_row(f"{elapsed_s:.1f}s", live.stage, str(live.sent), str(live.in_flight),
                  str(live.errors), _ms(live.ttft_percentile(0.5)),
                  _ms(live.ttft_percentile(0.99)))
    return table


def latency_table(summary: RunSummary) -> Table:
    """Percentiles of each latency with samples; * marks a percentile without a bound."""
    table = Table(title="latency (ms)")
    for column in ("metric", "count", "p50", "p90", "p95", "p99", "p99.9", "max", "mean"):
        table.add_column(column, justify="right" if column != "metric" else "left")
    rows: list[tuple[str, Distribution | None]] = [
        ("TTFT", summary.ttft_ms), ("TTFO (answer)", summary.ttfo_ms), ("ITL", summary.itl_ms),
        ("TPOT", summary.tpot_ms), ("TPOT (answer)", summary.answer_tpot_ms),
        ("E2E", summary.e2e_ms), ("E2E corrected", summary.corrected_e2e_ms),
        ("lag", summary.lag_ms)]
    for name, dist in rows:
        if dist is None or dist.count == 0 or (name.endswith("(answer)")
                                               and not summary.reasoning_tokens):
            continue
        cells = [_ms(getattr(dist, key)) + ("*" if key in dist.low_count else "")
                 for key in ("p50", "p90", "p95", "p99", "p999")]
        table.add_row(name, str(dist.count), *cells, _ms(dist.max), _ms(dist.mean))
    table.caption = LOW_COUNT_CAPTION
    return table


def summary_table(summary: RunSummary) -> Table:
    """Requests, availability, errors, throughput, goodput and whether the schedule held."""
    table = Table(title="results", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("requests", f"{summary.attempts} ({summary.successes} ok)")
    table.add_row("availability", _share(summary.availability))
    table.add_row("errors",
                  ", ".join(f"{k} {v}" for k, v in summary.errors.items()) or "none")
    if summary.not_streamed:
        table.add_row("answered whole, not streamed (TTFT = E2E)",
                      f"{summary.not_streamed} of {summary.attempts}")
    table.add_row("requests/s", _rate(summary.requests_per_second))
    if summary.items is not None:
        table.add_row("items/s (inputs, documents or images)",
                      _rate(summary.items_per_second))
        if summary.input_tokens is not None:
            table.add_row("input tokens/s", _rate(summary.input_tokens_per_second))
    elif summary.rtf_ratio is not None:
        table.add_row("audio (s)", f"{summary.audio_s or 0:.1f}")
        table.add_row("real-time factor p50 / p99",
                      f"{_factor(summary.rtf_ratio.p50)} / {_factor(summary.rtf_ratio.p99)}")
        if summary.input_chars is not None:
            table.add_row("characters spoken", f"{summary.input_chars:,}")
    elif summary.job_phases_ms is not None:
        for phase, dist in summary.job_phases_ms.items():
            table.add_row(f"job {phase} p50 / p99 (ms)", f"{_ms(dist.p50)} / {_ms(dist.p99)}")
    else:
        table.add_row("output tokens/s" + (" (estimated)" if summary.output_tokens_estimated
                                           else ""), _rate(summary.output_tokens_per_second))
    if summary.prompt_tokens_requested is not None:
        table.add_row("prompt tokens requested / served", prompt_tokens(summary))
    if summary.prompt_calibration is not None:
        table.add_row("prompt sizing", calibration(summary.prompt_calibration))
    table.add_row("goodput (req/s)", _rate(summary.goodput))
    if (phases := http_phases(summary)) is not None:
        table.add_row("HTTP phases p50 / p99 (ms)", phases)
    for what, value in measured_rows(summary):
        table.add_row(what, value)
    table.add_row("generator", "SATURATED: latency figures not trustworthy"
                  if summary.generator.saturated else "kept schedule")
    return table


def http_phases(summary: RunSummary) -> str | None:
    """The HTTP phases' p50 / p99 and the share of reused connections, on one line:
    `dns - / -, connect 0.1 / 0.2, tls -, TTFB 50.3 / 52.0; 90.00% reused` (phases no request
    had are left out); None when no request told any (docs/metrics.md#http-phases)."""
    parts = [f"{name} {_ms(dist.p50)} / {_ms(dist.p99)}"
             for name, dist in (("dns", summary.dns_ms), ("connect", summary.connect_ms),
                                ("TLS", summary.tls_ms), ("TTFB", summary.ttfb_ms))
             if dist is not None and dist.count]
    if summary.connection_reused_ratio is not None:
        parts.append(f"{_share(summary.connection_reused_ratio)} on reused connections")
    return ", ".join(parts) if parts else None


def measured_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """What a run measured beyond latency and throughput, where it measured it: the prefix
    cache, conversations, quality canaries and the deployment's efficiency."""
    rows = []
    if summary.reasoning_tokens:
        rows.append(("reasoning share of output",
                     f"{_share(summary.reasoning_share)} ({summary.reasoning_tokens:,} "
                     f"reasoning, {summary.answer_tokens or 0:,} answer tokens"
                     + (", reasoning estimated)" if summary.reasoning_tokens_estimated
                        else ")")))
    if summary.cache_hit_ratio is not None:
        rows.append(("prompt cache hits", f"{_share(summary.cache_hit_ratio)} "
                                          f"({summary.cached_tokens or 0:,} tokens)"))
    if summary.sessions is not None:
        sessions = summary.sessions
        rows.append(("conversations completed",
                     f"{sessions.completed}/{sessions.conversations} "
                     f"({sessions.turns} turns, {sessions.failed_turns} failed)"))
        if summary.e2e_interactivity is not None:
            rows.append(("interactivity (output tokens/s of turn time)",
                         _rate(summary.e2e_interactivity)))
    if summary.quality is not None:
        rows.append(("canaries passed", f"{summary.quality.passed}/{summary.quality.checked}"))
    found = summary.efficiency
    if found is not None:
        for label, value, unit in (
                ("output tokens/s per accelerator", found.output_tps_per_accelerator, ""),
                ("output tokens/s per kW", found.output_tps_per_kw, ""),
                ("cost per million output tokens", found.cost_per_million_output_tokens,
                 f" {found.currency}"),
                ("cost per million good tokens", found.cost_per_million_good_tokens,
                 f" {found.currency}"),
                ("joules per output token", found.joules_per_output_token, " J")):
            if value is not None:
                rows.append((label, f"{value:,.4g}{unit}"))
    return rows


def server_table(summary: RunSummary) -> Table | None:
    """The server's own series over the run (its metrics_url): min, mean, max, last and the
    increase of counters; None when it was not scraped."""
    if not summary.server_metrics:
        return None
    table = Table(title="server telemetry (its metrics_url, over the run)")
    table.add_column("series")
    for name in ("min", "mean", "max", "last", "increase"):
        table.add_column(name, justify="right")
    for name, metric in sorted(summary.server_metrics.items()):
        table.add_row(name, *(f"{v:,.4g}" for v in (metric.min, metric.mean, metric.max,
                                                    metric.last)),
                      "-" if metric.increase is None else f"{metric.increase:,.4g}")
    return table


def prompt_tokens(summary: RunSummary) -> str:
    """Mean prompt tokens asked for and served, and their ratio: `330.0 / 327.4 (x0.992)`."""
    served = summary.prompt_tokens_served
    if served is None:
        return f"{_rate(summary.prompt_tokens_requested)} / - (no usage reported)"
    return (f"{_rate(summary.prompt_tokens_requested)} / {_rate(served)} "
            f"(x{_factor(summary.prompt_tokens_ratio)})")


def calibration(sizing: PromptCalibration) -> str:
    """How the synthetic prompts were sized, and its note. A fit reads in words: the server
    counts `tokens_per_word` prompt tokens for each synthetic word (the slope), plus
    `overhead_tokens` that every request carries whatever its length (the intercept: the
    chat template, the cache-defeating salt)."""
    if sizing.method == "server":
        text = (f"fitted to the server: {_rate(sizing.tokens_per_word)} tokens per word, plus "
                f"{_rate(sizing.overhead_tokens)} per request"
                + (" (reused)" if sizing.reused else ""))
    elif sizing.method == "tokenizer":
        text = "counted with the tokenizer file"
    else:
        text = "whitespace words (uncalibrated" + (", as last run)" if sizing.reused else ")")
    return text if sizing.note is None else f"{text}; {sizing.note}"


def stages_table(result: RunResult) -> Table:
    """One row per stage, and why a sweep stopped early."""
    table = Table(title="stages")
    for column in ("stage", "requests", "availability", "req/s", "tok/s", "TTFT p50",
                   "TTFT p99", "E2E p50", "E2E p99"):
        table.add_column(column, justify="right")
    for stage in result.stages:
        t = stage.summary
        table.add_row(stage.label, str(t.attempts), _share(t.availability),
                      _rate(t.requests_per_second), _rate(t.output_tokens_per_second),
                      _ms(t.ttft_ms.p50), _ms(t.ttft_ms.p99), _ms(t.e2e_ms.p50),
                      _ms(t.e2e_ms.p99))
    if result.stopped:
        table.caption = f"sweep stopped: {result.stopped}"
    return table


def curve_table(result: RunResult) -> Table | None:
    """A capacity search's levels (pass or fail, and why) or a Pareto curve's points."""
    capacity, points = result.capacity, result.pareto
    if capacity is None and points is None:
        return None
    unit = capacity.unit if capacity is not None else "concurrency"
    title = "Pareto curve"
    if capacity is not None:
        best = "none" if capacity.max_passing is None else capacity.max_passing
        title = (f"capacity under SLO: {best} ({unit}; first failing: "
                 f"{capacity.first_failing or '-'})")
    table = Table(title=title)
    for column in (unit, "requests", "system tok/s", "tok/s per user", "TTFT p90", "TTFT p99",
                   "TPOT p90", "E2E p99"):
        table.add_column(column, justify="right")
    table.add_column("verdict" if capacity is not None else "on front")
    for point in capacity.points if capacity is not None else points or []:
        judged = ("" if point.passed is None else ("pass" if point.passed else "FAIL: ")
                  + ("" if point.passed else (point.reason or "")))
        table.add_row(str(point.level), str(point.count), _rate(point.system_tps),
                      _rate(point.tps_per_user), _ms(point.ttft_p90_ms), _ms(point.ttft_p99_ms),
                      _ms(point.tpot_p90_ms), _ms(point.e2e_p99_ms),
                      judged if capacity is not None else ("yes" if point.on_front else ""))
    return table


def results(result: RunResult) -> Group:
    """The tables of a finished run: summary, latency, the server's telemetry when it was
    scraped, stages when there are several, and a capacity search's or Pareto curve's
    points."""
    parts: list[Table] = [summary_table(result.summary), latency_table(result.summary)]
    server = server_table(result.summary)
    if server is not None:
        parts.append(server)
    curve = curve_table(result)
    if curve is not None:
        parts.append(curve)
    elif len(result.stages) > 1:
        parts.append(stages_table(result))
    return Group(*parts)
