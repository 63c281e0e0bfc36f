"""The CPU cost benchmark's split of a request's CPU into its events and the rest."""

from __future__ import annotations

import pytest

from benchmarks.cpu_cost import split_cost, split_text


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
