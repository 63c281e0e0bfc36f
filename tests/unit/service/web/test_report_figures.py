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
    assert shown["power w"] == "620.00"
    assert "currency" not in shown
