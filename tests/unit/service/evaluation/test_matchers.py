"""Silences match alerts the way Alertmanager's matchers do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sustain.service.evaluation.matchers import Matcher, SilenceWindow, silence_state, silenced

LABELS = {"alertname": "SustainSloBurnRate", "slo": "chat-availability", "tier": "page_fast"}
T0 = datetime(2026, 12, 3, 12, tzinfo=UTC)


def test_equality_regex_and_negation() -> None:
    assert Matcher("slo", "chat-availability").matches(LABELS)
    assert not Matcher("slo", "chat").matches(LABELS)
    assert Matcher("slo", "chat-.*", is_regex=True).matches(LABELS)
    assert not Matcher("slo", "chat", is_regex=True).matches(LABELS), "regexes are anchored"
    assert Matcher("tier", "page_fast", is_equal=False).matches({"tier": "ticket_slow"})
    assert not Matcher("tier", "page.*", is_regex=True, is_equal=False).matches(LABELS)


def test_a_missing_label_reads_as_empty() -> None:
    assert Matcher("probe", "").matches(LABELS)
    assert not Matcher("probe", ".+", is_regex=True).matches(LABELS)


def test_silence_needs_every_matcher_and_its_time_range() -> None:
    window = SilenceWindow((Matcher("slo", "chat-availability"), Matcher("tier", "page_fast")),
                           T0, T0 + timedelta(hours=1))
    partial = SilenceWindow((Matcher("slo", "chat-availability"), Matcher("tier", "ticket")),
                            T0, T0 + timedelta(hours=1))
    assert silenced([window], LABELS, T0 + timedelta(minutes=5))
    assert not silenced([partial], LABELS, T0 + timedelta(minutes=5))
    assert not silenced([window], LABELS, T0 - timedelta(seconds=1)), "not started yet"
    assert not silenced([window], LABELS, T0 + timedelta(hours=1)), "ends exclusive"


def test_silence_states() -> None:
    end = T0 + timedelta(hours=1)
    assert silence_state(T0, end, T0 - timedelta(seconds=1)) == "pending"
    assert silence_state(T0, end, T0) == "active"
    assert silence_state(T0, end, end) == "expired"



def test_a_stored_pattern_re2_refuses_selects_nothing_so_pages_still_go_out() -> None:
    assert not Matcher("slo", "(?=chat).*", is_regex=True).matches(LABELS)
    assert not Matcher("slo", "(?=chat).*", is_regex=True, is_equal=False).matches(LABELS)
    window = SilenceWindow((Matcher("slo", "(?!x).*", is_regex=True, is_equal=False),),
                           T0, T0 + timedelta(hours=1))
    assert not silenced([window], LABELS, T0)
