"""Run ranges of a history query: joined when they touch, one span when there are many, so a
30-day summary reads the runs of its two ragged edges, not of the whole month."""

from __future__ import annotations

from sustain.service.db.history import MAX_RANGES, merge_ranges


def test_distant_ranges_stay_apart_and_touching_ones_join() -> None:
    assert merge_ranges([(100, 200), (0, 50), (50, 60), (5000, 5100)]) == \
        [(0, 60), (100, 200), (5000, 5100)]


def test_overlapping_ranges_join() -> None:
    assert merge_ranges([(0, 100), (50, 80), (90, 150)]) == [(0, 150)]


def test_many_separate_ranges_become_their_span() -> None:
    ranges = [(i * 10.0, i * 10.0 + 1) for i in range(MAX_RANGES + 1)]
    assert merge_ranges(ranges) == [(0.0, MAX_RANGES * 10.0 + 1)]
    assert len(merge_ranges(ranges[:MAX_RANGES])) == MAX_RANGES
