"""The tables `sustain probe` prints: readable figures, a stages table only for several
stages, and the reason a sweep stopped."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console, RenderableType

from sustain.probes.load.live import LiveStats
from sustain.probes.measure.prompt_tokens import PromptCalibration, PromptFit
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.measure.summary import summarise
from sustain.probes.report import json_report
from sustain.probes.report_tables import LOW_COUNT_CAPTION, progress_table, results
from sustain.probes.run_result import RunResult, StageResult
from tests.unit.probes.samples import sample


def text(renderable: RenderableType) -> str:
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(renderable)
    return out.getvalue()


def run(stages: int = 1, stopped: str | None = None) -> RunResult:
    samples = [sample(i, t_sched=i * 100.0, t_send=i * 100.0) for i in range(9)]
    samples.append(sample(9, error=ErrorClass.HTTP_5XX, ttft=None, tokens=0))
    summary = summarise(samples, 2.0, SloThresholds(ttft_ms=100.0))
    return RunResult(samples, summary, [
        StageResult(index=i, label=f"{i + 1} user{'s' if i else ''}", summary=summary)
        for i in range(stages)
    ], stopped)


def test_results_show_requests_availability_errors_and_goodput() -> None:
    shown = text(results(run()))
    for expected in ("results", "10 (9 ok)", "90.00%", "http_5xx 1", "4.50", "kept schedule",
                     "latency (ms)", "TTFT", "E2E corrected", "50.0", "360.0"):
        assert expected in shown
    assert "stages" not in shown


def test_low_count_percentiles_are_starred_and_explained() -> None:
    shown = text(results(run()))
    assert "*" in shown
    assert LOW_COUNT_CAPTION in shown


def test_several_stages_get_a_table_with_the_reason_a_sweep_stopped() -> None:
    shown = text(results(run(stages=2, stopped="availability 90.0% < 95.0%")))
    assert "stages" in shown
    assert "1 user" in shown
    assert "2 users" in shown
    assert "sweep stopped: availability 90.0% < 95.0%" in shown


def test_progress_shows_counters_and_running_ttft() -> None:
    live = LiveStats(stage="rate 5/s")
    for ttft in (40.0, 60.0):
        live.on_send()
        live.on_done(Measurement(ttft_ms=ttft, itl_ms=(), e2e_ms=ttft, output_tokens=1,
                                 tokens_server_counted=True, input_tokens=1, http_status=200,
                                 error_class=None))
    live.on_send()
    shown = text(progress_table(live, 1.25))
    for expected in ("sustain probe", "1.2s", "rate 5/s", "3", "1", "50.0"):
        assert expected in shown


def test_progress_before_any_answer_shows_dashes() -> None:
    assert "-" in text(progress_table(LiveStats(), 0.0))


def test_results_show_prompt_tokens_requested_against_served_and_how_they_were_sized() -> None:
    samples = [sample(i) for i in range(4)]
    samples = [replace(s, measurement=replace(s.measurement, prompt_tokens_requested=330,
                                              input_tokens=served))
               for s, served in zip(samples, (320, 330, 335, 339), strict=True)]
    result = RunResult(samples, summarise(samples, 1.0)).with_prompt_calibration(
        PromptCalibration.of(PromptFit(1.78, 26.0)))
    shown = text(results(result))
    assert "prompt tokens requested / served" in shown
    assert "330.00 / 331.00 (x1.003)" in shown
    assert "fitted to the server: 1.78 tokens per word, plus 26.00 per request" in shown
    report = json_report(result)
    assert (report["prompt_tokens_requested"], report["prompt_tokens_served"]) == (330, 331)
    assert report["prompt_tokens_ratio"] == 331 / 330
    assert report["prompt_calibration"]["method"] == "server"


def test_a_run_without_usage_or_calibration_says_so() -> None:
    s = sample()
    samples = [replace(s, measurement=replace(s.measurement, prompt_tokens_requested=50,
                                              input_tokens=None))]
    result = RunResult(samples, summarise(samples, 1.0)).with_prompt_calibration(
        PromptCalibration(method="words", note="the server reported no prompt token count"))
    shown = text(results(result))
    assert "50.00 / - (no usage reported)" in shown
    assert "whitespace words (uncalibrated); the server reported no prompt token count" in shown


def test_prompts_of_given_text_show_no_prompt_rows() -> None:
    shown = text(results(run()))
    assert "prompt tokens" not in shown
    assert "prompt sizing" not in shown


def test_the_table_shows_cache_sessions_canaries_and_efficiency_when_the_run_has_them() -> None:
    from sustain.probes.measure.deployment import Efficiency
    from sustain.probes.measure.quality import QualityCounts
    from sustain.probes.measure.sessions import SessionCounts

    result = run()
    summary = result.summary.model_copy(update={
        "cached_tokens": 1200, "cache_hit_ratio": 0.75,
        "sessions": SessionCounts(conversations=4, completed=3, turns=12, failed_turns=1),
        "quality": QualityCounts(checked=10, passed=9),
        "efficiency": Efficiency(output_tps_per_accelerator=500.0, output_tps_per_kw=700.0,
                                 cost_per_million_output_tokens=1.1,
                                 cost_per_million_good_tokens=None, currency="EUR",
                                 joules_per_output_token=1.4)})
    shown = text(results(replace(result, summary=summary)))
    for expected in ("prompt cache hits", "75.00% (1,200 tokens)", "conversations completed",
                     "3/4 (12 turns, 1 failed)", "canaries passed", "9/10",
                     "cost per million output tokens", "1.1 EUR", "joules per output token"):
        assert expected in shown
    assert "cost per million good tokens" not in shown, "a figure the run lacks is left out"
    plain = text(results(run()))
    assert "prompt cache hits" not in plain
    assert "canaries" not in plain


def test_server_telemetry_gets_its_own_table_when_scraped() -> None:
    from sustain.probes.measure.server_metrics import ServerMetric

    result = run()
    summary = result.summary.model_copy(update={"server_metrics": {
        "waiting": ServerMetric(min=0, mean=2.5, max=7, last=1, points=10),
        "preemptions": ServerMetric(min=3, mean=4, max=5, last=5, points=10, increase=2)}})
    shown = text(results(replace(result, summary=summary)))
    assert "server telemetry" in shown
    assert "waiting" in shown
    assert "preemptions" in shown
    assert "server telemetry" not in text(results(run()))
