"""Drift verdicts as a person reads them: what moved, else "no change" only where the runs
could show it, else why there is none: which window lacks runs, or "not enough runs yet"."""

from __future__ import annotations

from sustain.service.evaluation.drift_words import (
    NOT_ENOUGH,
    drift_words,
    span_words,
    why_no_verdict,
)
from sustain.service.schemas.compare import DriftVerdict


def verdict(name: str, metric: str = "ttft") -> DriftVerdict:
    return DriftVerdict(metric=metric, stat="p99", verdict=name, ratio=None)


def test_insufficient_data_reads_not_enough_runs_never_no_change() -> None:
    assert drift_words([verdict("insufficient_data")]) == NOT_ENOUGH == "not enough runs yet"
    assert drift_words([]) == NOT_ENOUGH, "no finding yet is not a no"


def test_no_change_is_said_only_where_a_metric_could_show_it() -> None:
    assert drift_words([verdict("insufficient_data"), verdict("no_change", "e2e")]) == \
        "no change"


def test_what_moved_is_named() -> None:
    assert drift_words([verdict("regressed"), verdict("no_change", "e2e"),
                        verdict("improved", "tpot")]) == "ttft:p99 regressed, tpot:p99 improved"


WEEK_S, DAY_S = 7 * 86_400, 86_400


def test_no_verdict_names_the_baseline_window_a_new_probe_lacks() -> None:
    assert why_no_verdict((0, 0), (35, 35), DAY_S, WEEK_S) == (
        "no runs in the 7-day baseline window yet (the 7 days before the last 24 hours)")
    assert why_no_verdict((3, 2), (35, 35), DAY_S, WEEK_S) == (
        "2 runs with a successful request in the 7-day baseline window (the 7 days before "
        "the last 24 hours); 5 needed")
    assert why_no_verdict((4, 0), (35, 35), DAY_S, WEEK_S) == (
        "no run in the 7-day baseline window had a successful request (the 7 days before "
        "the last 24 hours)")


def test_no_verdict_names_the_recent_window_once_the_baseline_has_runs() -> None:
    assert why_no_verdict((9, 9), (0, 0), DAY_S, WEEK_S) == "no runs in the last 24 hours yet"
    assert why_no_verdict((9, 9), (3, 1), 3600, WEEK_S) == (
        "1 run with a successful request in the last hour; 5 needed")
    assert "5 needed in each window" in why_no_verdict((9, 9), (9, 9), DAY_S, WEEK_S)


def test_window_lengths_read_in_whole_units() -> None:
    assert span_words(WEEK_S) == (7, "day")
    assert span_words(DAY_S) == (24, "hour"), "a day reads as 24 hours"
    assert span_words(4 * DAY_S) == (4, "day")
    assert span_words(300) == (5, "minute")
    assert span_words(90) == (90, "second")


def test_the_caller_may_say_why_there_is_no_verdict() -> None:
    assert drift_words([verdict("insufficient_data")], "because") == "because"
    assert drift_words([verdict("no_change")], "because") == "no change"
