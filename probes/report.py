"""The machine-readable report of a run (`sustain probe --json`): a stable, documented shape
that scripts can rely on."""

from __future__ import annotations

from typing import Any

from sustain.probes.measure.percentiles import Distribution
from sustain.probes.measure.summary import PHASE_FIELDS, RunSummary
from sustain.probes.renamed import SUMMARY_RENAMED
from sustain.probes.run_result import RunResult

LATENCY_KEYS = ("lag_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "corrected_e2e_ms")
STAT_KEYS = ("p50", "p90", "p95", "p99", "p999", "max", "mean", "count")


def latency_stats(dist: Distribution) -> dict[str, Any]:
    """p50 p90 p95 p99 p999 max mean count, plus the 99 % upper bounds and low-count flags."""
    stats: dict[str, Any] = {key: getattr(dist, key) for key in STAT_KEYS}
    stats["upper_bounds"] = dict(dist.upper_bounds)
    stats["low_count"] = list(dist.low_count)
    return stats


def summary_report(summary: RunSummary) -> dict[str, Any]:
    report: dict[str, Any] = {
        "requests": summary.attempts,
        "successes": summary.successes,
        "availability": summary.availability,
        "errors": dict(summary.errors),
        "requests_per_second": summary.requests_per_second,
        "output_tokens_per_second": summary.output_tokens_per_second,
        "goodput": summary.goodput,
        "generator_saturated": summary.generator.saturated,
        "duration_s": summary.duration_s,
        "output_tokens": summary.output_tokens,
        "output_tokens_estimated": summary.output_tokens_estimated,
        "cached_tokens": summary.cached_tokens,
        "cache_hit_ratio": summary.cache_hit_ratio,
        "input_tokens": summary.input_tokens,
        "input_tokens_per_second": summary.input_tokens_per_second,
        "not_streamed": summary.not_streamed,
    }
    report["prompt_tokens_requested"] = summary.prompt_tokens_requested
    report["prompt_tokens_served"] = summary.prompt_tokens_served
    report["prompt_tokens_ratio"] = summary.prompt_tokens_ratio
    if summary.prompt_calibration is not None:
        report["prompt_calibration"] = summary.prompt_calibration.model_dump(mode="json")
    if summary.items is not None:
        report["items"] = summary.items
        report["items_per_second"] = summary.items_per_second
    if summary.ttft_by_image_size is not None:
        report["ttft_ms_by_image_size"] = {size: latency_stats(dist) for size, dist
                                           in summary.ttft_by_image_size.items()}
    if summary.rag_stages_ms is not None:
        report["rag_stages_ms"] = {name: latency_stats(dist) for name, dist
                                   in summary.rag_stages_ms.items()}
        report["retrieval_checked"] = summary.retrieval_checked
        report["retrieval_hit_ratio"] = summary.retrieval_hit_ratio
    if summary.rtf_ratio is not None:
        report["audio_s"] = summary.audio_s
        report["rtf_ratio"] = latency_stats(summary.rtf_ratio)
    for old, new in SUMMARY_RENAMED.items():  # the old names too, until the next release
        if new in report:
            report[old] = report[new]
    for key in LATENCY_KEYS:
        report[key] = latency_stats(getattr(summary, key))
    if summary.tool_call_ms is not None:
        report["tool_call_ms"] = latency_stats(summary.tool_call_ms)
    for key in ("ttfo_ms", "answer_tpot_ms"):
        if (dist := getattr(summary, key)) is not None:
            report[key] = latency_stats(dist)
    if summary.reasoning_share is not None:
        report.update(reasoning_tokens=summary.reasoning_tokens,
                      reasoning_tokens_estimated=summary.reasoning_tokens_estimated,
                      answer_tokens=summary.answer_tokens,
                      reasoning_share=summary.reasoning_share)
    if summary.input_chars is not None:
        report["input_chars"] = summary.input_chars
    if summary.job_phases_ms is not None:
        report["job_phases_ms"] = {name: latency_stats(dist) for name, dist
                                   in summary.job_phases_ms.items()}
    for key in PHASE_FIELDS:
        if (dist := getattr(summary, key)) is not None:
            report[key] = latency_stats(dist)
    if summary.connection_reused_ratio is not None:
        report["connection_reused_ratio"] = summary.connection_reused_ratio
    if summary.efficiency is not None:
        report["efficiency"] = summary.efficiency.model_dump()
    if summary.quality is not None:
        report["quality"] = {"checked": summary.quality.checked,
                             "passed": summary.quality.passed, "ratio": summary.quality.ratio}
    if summary.server_metrics is not None:
        report["server_metrics"] = {name: metric.model_dump()
                                    for name, metric in summary.server_metrics.items()}
        report["server_scrapes"] = None if summary.server_scrapes is None \
            else summary.server_scrapes.model_dump()
    if summary.sessions is not None:
        report["sessions"] = summary.sessions.model_dump()
        report["e2e_interactivity"] = summary.e2e_interactivity
        report["turns_by_index"] = [
            {"turn": row.turn, "count": row.count, "input_tokens_mean": row.input_tokens_mean,
             "ttft_ms": latency_stats(row.ttft_ms), "e2e_ms": latency_stats(row.e2e_ms)}
            for row in summary.turns_by_index or []]
    return report


def json_report(result: RunResult) -> dict[str, Any]:
    report = summary_report(result.summary)
    report["stages"] = [{"index": stage.index, "label": stage.label,
                         **summary_report(stage.summary)} for stage in result.stages]
    report["stopped"] = result.stopped
    if result.capacity is not None:
        report["capacity"] = result.capacity.model_dump(mode="json")
    if result.pareto is not None:
        report["pareto"] = [point.model_dump(mode="json") for point in result.pareto]
    return report
