"""Label matchers and silences, as Alertmanager defines them: a matcher compares one label by
equality or by a fully anchored regular expression (RE2, linear time: see patterns.py),
optionally negated; a silence matches an alert when every one of its matchers does, between
its start and end. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sustain.service.evaluation.patterns import PatternError, full_match


@dataclass(frozen=True, slots=True)
class Matcher:
    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True

    def matches(self, labels: Mapping[str, str]) -> bool:
        """A missing label reads as the empty string (as in Alertmanager)."""
        actual = labels.get(self.name, "")
        if self.is_regex:
            try:
                hit = full_match(self.value, actual)
            except PatternError:
                # Stored before patterns were checked as RE2: the matcher, negated or not,
                # selects nothing, so its silence cannot swallow pages (the API refuses such
                # patterns now).
                return False
        else:
            hit = actual == self.value
        return hit == self.is_equal


def matches_all(matchers: Sequence[Matcher], labels: Mapping[str, str]) -> bool:
    return all(m.matches(labels) for m in matchers)


@dataclass(frozen=True, slots=True)
class SilenceWindow:
    matchers: tuple[Matcher, ...]
    starts_at: datetime
    ends_at: datetime

    def active(self, now: datetime) -> bool:
        return self.starts_at <= now < self.ends_at

    def silences(self, labels: Mapping[str, str], now: datetime) -> bool:
        return self.active(now) and matches_all(self.matchers, labels)


def silenced(silences: Sequence[SilenceWindow], labels: Mapping[str, str],
             now: datetime) -> bool:
    """Whether any silence active at `now` matches the labels."""
    return any(s.silences(labels, now) for s in silences)


def silence_state(starts_at: datetime, ends_at: datetime, now: datetime) -> str:
    """`pending` before its start, `active`, then `expired` (Alertmanager's names)."""
    if now < starts_at:
        return "pending"
    return "active" if now < ends_at else "expired"
