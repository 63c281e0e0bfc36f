"""Matcher regexes are RE2: anchored like Alertmanager's, linear in the input whatever the
pattern, and a pattern RE2 refuses is a PatternError that does not echo it."""

from __future__ import annotations

import threading

import pytest

from sustain.service.evaluation.patterns import (
    MAX_PATTERN_LENGTH,
    PatternError,
    anchored,
    full_match,
)

NOT_A_TIMING = 30.0
"""Seconds a match may take before the test calls it stuck: not a measurement (RE2 answers
in microseconds); Python's backtracking `re` needs days for the input below."""


def test_patterns_match_the_whole_label_like_alertmanager() -> None:
    assert full_match("chat-.*", "chat-availability")
    assert not full_match("chat", "chat-availability")
    assert not full_match("a|b", "ab")
    assert full_match("a|b", "b")
    assert full_match("", "")


def test_nested_quantifiers_against_a_long_label_finish_at_once() -> None:
    results: list[bool] = []
    label = "a" * 60 + "!"
    worker = threading.Thread(target=lambda: results.append(full_match("(a+)+$", label)),
                              daemon=True)
    worker.start()
    worker.join(NOT_A_TIMING)
    assert results == [False], "the match did not finish: backtracking regex engine"
    assert full_match("(a+)+$", "a" * 60)


@pytest.mark.parametrize("pattern", ["(?=secret)", "(secret)\\1", "(secret", "secret{1001}"])
def test_patterns_re2_refuses_are_errors_that_do_not_echo_them(pattern: str) -> None:
    with pytest.raises(PatternError, match="not a valid RE2 regular expression") as caught:
        anchored(pattern)
    assert pattern not in str(caught.value)


def test_overlong_patterns_are_refused() -> None:
    with pytest.raises(PatternError, match="longer than"):
        anchored("a" * (MAX_PATTERN_LENGTH + 1))
