"""The CPU cost benchmark's split of a request's CPU into its events and the rest."""

from __future__ import annotations

import pytest

from benchmarks.cpu_cost import median_run, paired_ratio, split_cost, split_text


def test_the_split_is_the_line_through_the_two_token_counts() -> None:
    per_token, per_request = split_cost({512: 4_000.0, 32: 1_000.0})
    assert per_token == pytest.approx(6.25)
    assert per_request == pytest.approx(800.0)


def test_a_cost_that_does_not_grow_with_tokens_is_all_per_request() -> None:
    assert split_cost({32: 500.0, 512: 500.0}) == (0.0, 500.0)


def test_the_split_is_reported_in_microseconds_per_event_and_milliseconds_per_request() -> None:
    """CPU per request in µs (what the table's "CPU-ms per 1,000 requests" column holds)."""
    assert split_text({32: 530.0, 512: 2003.0}) == \
        "3.07 µs per event (token), 0.432 ms per request besides"


def test_a_paired_ratio_compares_the_runs_of_each_turn() -> None:
    """The machine slows down tenfold over the run, and each turn's second client costs 1.1x
    its first: the turns' ratios read 1.1 whatever the drift."""
    first = [(1.0, 1000, 0), (5.0, 1000, 0), (10.0, 1000, 0)]
    second = [(1.1, 1000, 0), (5.5, 1000, 0), (11.0, 1000, 0)]
    assert paired_ratio(second, first) == pytest.approx(1.1)


def test_one_slow_minute_moves_the_paired_ratio_less_than_the_medians() -> None:
    """One of the second client's runs lands in a slow minute: the ratio of the medians reads
    4.5, the median of the turns' ratios still 1.1."""
    first = [(1.0, 1000, 0), (2.0, 1000, 0), (10.0, 1000, 0)]
    second = [(1.1, 1000, 0), (9.0, 1000, 0), (11.0, 1000, 0)]
    assert median_run(second)[0] / median_run(first)[0] == pytest.approx(4.5)
    assert paired_ratio(second, first) == pytest.approx(1.1)


def test_a_paired_ratio_is_per_request() -> None:
    assert paired_ratio([(2.0, 2000, 0)], [(1.0, 1000, 0)]) == pytest.approx(1.0)


def test_the_median_run_is_the_middle_one_by_cpu_time() -> None:
    assert median_run([(3.0, 10, 0), (1.0, 10, 0), (2.0, 10, 0)]) == (2.0, 10, 0)
