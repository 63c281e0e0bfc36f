"""The capacity search (probes/load/search.py): double until a level fails, then bisect to
the integer; every level once."""

from __future__ import annotations

import pytest

from sustain.probes.load.search import bracket, next_level


def search(capacity: int | None, minimum: int, maximum: int) -> list[int]:
    """The levels measured against an endpoint that passes up to `capacity`."""
    verdicts: dict[int, bool] = {}
    while (level := next_level(verdicts, minimum, maximum)) is not None:
        assert level not in verdicts, "a level is never measured twice"
        verdicts[level] = capacity is not None and level <= capacity
    found = bracket(verdicts)
    assert found.highest_passing == (None if capacity is None else min(capacity, maximum))
    return list(verdicts)


@pytest.mark.parametrize(("capacity", "levels"), [
    (8, [1, 2, 4, 8, 16, 12, 10, 9]),
    (1, [1, 2]),
    (100, [1, 2, 4, 8, 16, 32, 64]),
    (23, [1, 2, 4, 8, 16, 32, 24, 20, 22, 23]),
    (None, [1]),
])
def test_levels_double_then_bisect_to_the_integer(capacity: int | None,
                                                 levels: list[int]) -> None:
    assert search(capacity, 1, 64) == levels


def test_the_search_starts_at_its_minimum_and_caps_at_its_maximum() -> None:
    assert search(30, 5, 24) == [5, 10, 20, 24]
    assert search(12, 5, 24) == [5, 10, 20, 15, 12, 13]


def test_a_pass_above_a_failure_is_noise_not_capacity() -> None:
    found = bracket({1: True, 2: True, 4: False, 8: True})
    assert (found.highest_passing, found.lowest_failing) == (2, 4)
