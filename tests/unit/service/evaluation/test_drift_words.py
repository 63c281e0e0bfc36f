"""Drift verdicts as a person reads them: what moved, else "no change" only where the runs
could show it, else "not enough runs yet"."""

from __future__ import annotations

from sustain.service.evaluation.drift_words import NOT_ENOUGH, drift_words
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
