"""Durations, step-aligned windows, and covering a window with days, hours and runs."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sustain.service.history.windows import (
    DAY_S,
    HOUR_S,
    aligned_windows,
    cover,
    epoch_seconds,
    parse_duration,
    point_count,
)


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("5m", 300), ("1h", 3600), ("30d", 30 * 86400), ("2w", 14 * 86400)])
def test_durations_parse_to_seconds(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1", "h", "1y", "-1h", "0h", "1.5h", "1h30m"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        parse_duration(text)


def test_hourly_windows_fall_on_whole_utc_hours() -> None:
    start = datetime(2026, 12, 1, 10, 20, tzinfo=UTC)
    end = datetime(2026, 12, 1, 13, 0, tzinfo=UTC)
    windows = aligned_windows(start, end, HOUR_S)
    assert [datetime.fromtimestamp(a, UTC).hour for a, _ in windows] == [10, 11, 12]
    assert point_count(start, end, HOUR_S) == len(windows) == 3


def test_a_thirty_day_window_is_mostly_whole_days() -> None:
    end = datetime(2026, 12, 2, 18, 50, 30, tzinfo=UTC)
    a, b = epoch_seconds(end) - 30 * DAY_S, epoch_seconds(end)
    c = cover(a, b)
    assert len(c.days) == 29
    assert len(c.hours) == 5 + 18  # 19:00..24:00 of the first day, 00:00..18:00 of the last
    assert c.runs == [(a, a - a % HOUR_S + HOUR_S), (b - b % HOUR_S, b)]


@given(st.integers(0, 2 * 10**9), st.integers(1, 90 * DAY_S))
def test_cover_pieces_tile_the_window_exactly(a: int, length: int) -> None:
    b = a + length
    c = cover(a, b)
    pieces = sorted([(d, d + DAY_S) for d in c.days] + [(h, h + HOUR_S) for h in c.hours]
                    + list(c.runs))
    assert pieces[0][0] == a
    assert pieces[-1][1] == b
    for (_, end), (start, _) in itertools.pairwise(pieces):
        assert end == start
    assert all(d % DAY_S == 0 for d in c.days)
    assert all(h % HOUR_S == 0 for h in c.hours)
