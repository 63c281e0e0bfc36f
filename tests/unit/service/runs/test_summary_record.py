"""A run's summary record gives back the summary it was made from, kept in a fraction of its
JSON; only the figures SQL reads are kept beside it as JSON; a damaged record is refused."""

from __future__ import annotations

import hashlib
import json
import random
import zlib
from datetime import UTC, datetime
from typing import Any

import pytest

from sustain.probes.measure.summary import summarise
from sustain.service.runs import summary_record
from sustain.service.runs.summary_dictionary import DICTIONARY_V1
from sustain.service.strict_json import NonFiniteNumberError, dumps
from tests.integration.service.storage import synthetic_samples

START = datetime(2026, 12, 7, tzinfo=UTC)


def summary_of(count: int, seed: int = 1) -> dict[str, Any]:
    samples = synthetic_samples(count, START, random.Random(seed), fail_every=9)
    return summarise(samples, count * 0.05).model_dump(mode="json")


def staged(*stages: dict[str, Any]) -> dict[str, Any]:
    """A run's summary as the runner makes it: the whole run's figures (from the stages'
    samples together) and each stage's own."""
    whole = summary_of(sum(stage["attempts"] for stage in stages), seed=len(stages))
    return {**whole, "capacity": None, "stages": [
        {"index": i, "label": f"stage {i}", "summary": stage} for i, stage in enumerate(stages)]}


@pytest.mark.parametrize("count", [1, 2, 40, 500])
def test_a_summary_comes_back_as_it_was(count: int) -> None:
    summary = summary_of(count)
    assert summary_record.unpack(summary_record.pack(summary)) == summary


@pytest.mark.parametrize("counts", [(1,), (40,), (5, 40, 200)])
def test_a_summary_with_stages_comes_back_as_it_was_in_its_compact_form(
        counts: tuple[int, ...]) -> None:
    stages = [summary_of(count, seed=i) for i, count in enumerate(counts)]
    stages[0].pop("steady_state")  # a stage without a figure the run has
    stages[-1]["own_figure"] = {"count": 1}
    summary = staged(*stages)
    record = summary_record.pack(summary)
    assert record[0] == summary_record.COMPACT
    assert summary_record.unpack(record) == summary


def test_a_single_stage_is_kept_as_what_differs_from_the_run() -> None:
    one = summary_of(1)
    summary = {**one, "stages": [{"index": 0, "label": "single", "summary": {
        **{k: v for k, v in one.items() if k != "errors"}, "steady_state": {"x": 1}}}]}
    kept = summary_record.compact(summary)
    assert kept["stages"][0]["summary"] == {"steady_state": {"x": 1}, "_absent": ["errors"]}
    assert kept["ttft_ms"] == {"=": one["ttft_ms"]["max"]}
    assert summary_record.expand(kept) == summary


@pytest.mark.parametrize("odd", [{"=": 1.0}, {"_absent": ["x"]}, -0.0])
def test_a_summary_whose_compact_form_would_not_read_back_is_kept_plain(odd: Any) -> None:
    one = summary_of(1)
    if odd == -0.0:
        summary = {**one, "ttft_ms": {**one["ttft_ms"], "min": -0.0, "max": 0.0}}
    else:
        summary = {**one, "stages": [{"index": 0, "label": "s", "summary": {**one, **(
            odd if "_absent" in odd else {"ttft_ms": odd})}}]}
    record = summary_record.pack(summary)
    assert summary_record.unpack(record) == summary
    assert json.dumps(summary_record.unpack(record), sort_keys=True) == \
        json.dumps(summary, sort_keys=True)


def test_a_single_request_runs_summary_keeps_under_a_fifth_of_its_json() -> None:
    summary = summary_of(1)
    record = summary_record.pack(summary)
    assert len(record) * 5 < len(dumps(summary))
    assert len(record) < len(zlib.compress(dumps(summary).encode(), 9)) / 2


def test_the_dictionary_of_format_one_never_changes() -> None:
    assert hashlib.sha256(DICTIONARY_V1).hexdigest() == (
        "2ad9adaf49c90f6f32734019e787a2a222658523f3f7b8098bbb39adab2bcfd8")


def test_only_figures_sql_reads_and_that_have_a_value_are_kept_as_json() -> None:
    summary = {**summary_of(3), "capacity": None, "server_metrics": {"waiting": {"max": 2}}}
    kept = summary_record.sql_part(summary)
    assert kept == {key: summary[key] for key in summary_record.SQL_KEYS
                    if summary.get(key) is not None}
    assert "server_metrics" in kept
    assert "capacity" not in kept
    assert "ttft_ms" not in kept


def test_a_run_stored_before_the_record_reads_its_json_whole() -> None:
    summary = summary_of(2)
    assert summary_record.whole(summary, None) == summary
    assert summary_record.whole({"cache_hit_ratio": 0.0}, summary_record.pack(summary)) == \
        summary
    assert summary_record.whole(None, None) is None


def test_a_figure_json_has_no_number_for_is_refused_as_before() -> None:
    with pytest.raises(NonFiniteNumberError, match=r"steady_state\.cov"):
        summary_record.pack({"steady_state": {"cov": float("inf")}})


@pytest.mark.parametrize("damage", ["empty", "format", "cut", "after", "bomb", "array"])
def test_a_damaged_record_is_refused(damage: str) -> None:
    record = summary_record.pack(summary_of(2))
    bad = {"empty": b"", "format": b"\x09" + record[1:], "cut": record[:len(record) // 2],
           "after": record + b"x"}.get(damage)
    if damage in ("bomb", "array"):
        text = b"[1]" if damage == "array" else b" " * (summary_record.MAX_SUMMARY_BYTES + 1)
        compressor = zlib.compressobj(9, zdict=DICTIONARY_V1)
        bad = b"\x01" + compressor.compress(text) + compressor.flush()
    assert bad is not None
    with pytest.raises(ValueError, match="summary record"):
        summary_record.unpack(bad)
