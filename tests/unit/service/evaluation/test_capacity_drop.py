"""SustainCapacityDrop (service/evaluation/capacity_drop.py): the newest capacity against the
median of the runs before it."""

from __future__ import annotations

from sustain.service.evaluation.capacity_drop import (
    CapacityHistory,
    capacity_drop_candidates,
    dropped,
)


def test_a_drop_of_a_fifth_or_more_against_the_median_fires() -> None:
    assert dropped([6, 8, 8, 9, 8]) == (True, 8.0)
    assert dropped([7, 8, 8, 9, 8]) == (False, 8.0)
    assert dropped([None, 8, 8, 8])[0], "no level passing at all is a drop"


def test_too_few_runs_before_or_no_capacity_before_is_no_verdict() -> None:
    assert dropped([1, 8, 8]) == (False, None)
    assert dropped([0, None, None, None]) == (False, 0.0)


def test_one_candidate_per_capacity_probe_with_its_figures() -> None:
    (candidate,) = capacity_drop_candidates([CapacityHistory("chat", "concurrency",
                                                             (4, 8, 8, 8))])
    assert candidate.condition
    assert candidate.labels == {"alertname": "SustainCapacityDrop", "probe": "chat",
                                "severity": "ticket"}
    assert "4 (concurrency)" in candidate.annotations["description"]
    assert "a median of 8" in candidate.annotations["description"]
