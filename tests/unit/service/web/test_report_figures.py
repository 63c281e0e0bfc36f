"""The HTML report's figures name what each kind measured: items per second for embeddings and
rerank, audio and the real-time factor for transcriptions, TTFT by image size for vision, and
the energy figures with where their power came from."""

from __future__ import annotations

from typing import Any

from sustain.service.web.report import run_page


def figures(report: dict[str, Any]) -> dict[str, str]:
    return dict(run_page(report, "t", "s", [], []).figures)


def test_an_item_kinds_report_gives_items_and_input_tokens_per_second() -> None:
    shown = figures({"attempts": 4, "item_throughput": 96.5, "input_token_throughput": 1234.0})
    assert shown["items/s (inputs or documents)"] == "96.50"
    assert shown["input tokens/s"] == "1,234.00"


def test_a_transcription_report_gives_audio_and_the_real_time_factor() -> None:
    shown = figures({"attempts": 2, "audio_seconds": 10.0,
                     "rtf": {"count": 2, "p50": 0.0412, "p99": 0.05}})
    assert shown["audio transcribed"] == "10.0 s"
    assert shown["real-time factor p50 / p99"] == "0.041 / 0.050"


def test_a_vision_report_gives_ttft_by_image_size() -> None:
    shown = figures({"ttft_by_image_size": {"512x512": {"count": 3, "p50": 81.25, "p99": 90.0}}})
    assert shown["TTFT p50 / p99 with 512x512 images"] == "81.2 ms / 90.0 ms"


def test_energy_figures_say_where_the_power_came_from() -> None:
    shown = figures({"efficiency": {"power_w": 620.0, "power_source": "measured",
                                    "joules_per_output_token": 0.25, "currency": "USD"}})
    assert shown["power source"] == "measured"
    assert shown["joules per output token"] == "0.25"
    assert shown["power (W)"] == "620.00"
    assert "currency" not in shown
    priced = figures({"efficiency": {"cost_per_million_output_tokens": 1.1,
                                     "output_tps_per_kw": 722.0, "currency": "EUR"}})
    assert priced["cost per million output tokens (EUR)"] == "1.10"
    assert priced["output tokens/s per kW"] == "722.00"


def test_the_report_shows_prompt_tokens_requested_against_served() -> None:
    shown = figures({"prompt_tokens_requested": 330.0, "prompt_tokens_served": 331.5})
    assert shown["prompt tokens requested / served"] == "330.0 / 331.5"
    unserved = figures({"prompt_tokens_requested": 330.0, "prompt_tokens_served": None})
    assert unserved["prompt tokens requested / served"] == "330.0 / - (no usage reported)"


def test_server_telemetry_has_a_row_per_series() -> None:
    page = run_page({"server_metrics": {
        "waiting": {"min": 0, "mean": 2.5, "max": 7, "last": 1, "points": 9},
        "preemptions": {"min": 3, "mean": 4, "max": 5, "last": 5, "increase": 2}}},
        "t", "s", [], [])
    assert page.server == [["preemptions", "3.00", "4.00", "5.00", "5.00", "2.00"],
                           ["waiting", "0.00", "2.50", "7.00", "1.00", "-"]]
    assert run_page({}, "t", "s", [], []).server == []


def test_a_failed_run_says_what_failed_where_and_why() -> None:
    from sustain.service.db.status import FirstFailure
    from sustain.service.web.report import failure_lines

    lines = failure_lines("failed", None, {"attempts": 20, "errors": {"http_4xx": 20}},
                          FirstFailure("http_4xx", 404, 20), "http://127.0.0.1:9/api",
                          "openai-chat", "m")
    assert lines[0] == ("20 of 20 requests failed (http_4xx 20); the first: http_4xx "
                        "(HTTP 404) from POST http://127.0.0.1:9/api/chat/completions.")
    assert "try http://127.0.0.1:9/api/v1 as the base URL" in lines[1]
    refused = failure_lines("failed", None, {"attempts": 3, "errors": {"connect": 3}},
                            FirstFailure("connect", None, 3), "http://127.0.0.1:9/v1",
                            "openai-chat")
    assert "connect (no HTTP answer)" in refused[0]
    assert "nothing answered at 127.0.0.1:9" in refused[1]
    crashed = failure_lines("failed", "worker exited with status -9", {}, None, None, None)
    assert crashed == ["The run failed: worker exited with status -9"]


def test_a_percentile_from_too_few_samples_is_marked_and_explained() -> None:
    from sustain.probes.report_tables import LOW_COUNT_CAPTION
    from sustain.service.web.report import LOW_COUNT_MARK, render

    page = run_page({"attempts": 40, "ttft_ms": {
        "count": 40, "p50": 50.0, "p90": 55.0, "p95": 57.0, "p99": 60.0, "p999": 61.0,
        "max": 61.0, "mean": 51.0, "low_count": ["p99", "p999"]}}, "t", "s", [], [])
    (label, cells), = page.latencies
    assert label == "TTFT"
    assert cells[:5] == ["50.0", "55.0", "57.0", "60.0" + LOW_COUNT_MARK,
                         "61.0" + LOW_COUNT_MARK]
    assert cells[5:] == ["61.0", "51.0", "40"], "max, mean and count are never marked"
    assert page.low_count
    assert LOW_COUNT_CAPTION in render(page)
    bounded = run_page({"attempts": 900, "ttft_ms": {"count": 900, "p99": 60.0,
                                                     "low_count": []}}, "t", "s", [], [])
    assert not bounded.low_count
    assert LOW_COUNT_CAPTION not in render(bounded)


def test_a_failed_run_says_what_the_server_said_and_the_request_it_was() -> None:
    from sustain.service.db.status import FirstFailure
    from sustain.service.web.report import failure_lines

    words = "HTTP 404: The model `gpt-4o` does not exist."
    lines = failure_lines("failed", None, {"attempts": 4, "errors": {"http_4xx": 4}},
                          FirstFailure("http_4xx", 404, 4, words), "http://127.0.0.1:8001/v1",
                          "openai-chat", "gpt-4o", detail=words)
    assert lines[0] == ("4 of 4 requests failed (http_4xx 4); the first: http_4xx (HTTP 404) "
                        "from POST http://127.0.0.1:8001/v1/chat/completions: The model "
                        "`gpt-4o` does not exist.")
    assert "does not serve model 'gpt-4o'" in lines[1]


def test_an_interrupted_run_says_why_it_ended_not_what_failed() -> None:
    from sustain.service.web.report import failure_lines, render

    lines = failure_lines("interrupted", "service stopped during the run", {}, None, None,
                          None)
    assert lines == ["The run was interrupted: service stopped during the run"]
    page = run_page({}, "t", "s", [], [], lines, status="interrupted")
    assert page.failure_title == "Why it ended early"
    assert not page.stored
    html = render(page)
    assert "What failed" not in html
    assert "No request failed" not in html, "it stored no error counts to say so"
    assert "<table" not in html, "no table of dashes for results it never stored"
    assert page.histograms[0].empty == "The run was interrupted before it stored results."
