"""Failed authentication as plain values: why a call was refused, how often a refusal reaches
the audit log, and how many failed sign-ins a source may make.

Every failure is counted (sustain_auth_failures_total{reason}); these keep what is *written*
or *tried* per source bounded, so that anonymous traffic can neither fill the audit log nor
guess keys at full speed. The memory is per replica and bounded: past `max_sources` entries
the oldest are forgotten first (an attacker with more addresses than that gains nothing a new
address would not give them anyway)."""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable

from cachetools import TTLCache

MAX_SOURCES = 10_000
"""Sources (client addresses) remembered at once by each sampler or throttle."""
AUDIT_SAMPLE_INTERVAL_S = 60.0
"""A refusal of one source for one reason reaches the audit log at most once per this many
seconds."""
AUDIT_SAMPLES_PER_INTERVAL = 600
"""And refusals of all sources together at most this many times per interval (an attacker
with a fresh address per request gets no more rows than this)."""
LOGIN_FAILURES_ALLOWED = 10
"""Failed sign-ins a source may make within LOGIN_FAILURE_WINDOW_S; past them, 429."""
LOGIN_FAILURE_WINDOW_S = 300.0
"""The window, in seconds, started by a source's first failed sign-in."""


class AuthFailure(enum.StrEnum):
    """Why a call was refused: a fixed set, so the metric's label never holds caller input."""

    missing_key = "missing_key"
    """A call that needs a key came without one."""
    unknown_key = "unknown_key"
    """A key that matches no stored key, or a malformed Authorization header."""
    revoked_key = "revoked_key"
    """A key that was revoked."""
    forbidden_role = "forbidden_role"
    """A valid key whose role may not do this (403)."""
    bad_session = "bad_session"
    """A status-page sign-in cookie that is unknown, expired, or whose key was revoked."""
    login_failed = "login_failed"
    """A key entered at /login that was not accepted."""
    login_throttled = "login_throttled"
    """A sign-in refused unchecked because its source failed too often (429)."""
    cross_site = "cross_site"
    """A sign-in form posted from another site (login CSRF, 403)."""


Timer = Callable[[], float]
"""Seconds on a monotonic clock (time.monotonic; tests pass their own)."""


class AuditSampler:
    """Decides which refusals are written to the audit log: the first of each (source,
    reason) per AUDIT_SAMPLE_INTERVAL_S, within a budget for all sources together."""

    def __init__(self, interval_s: float = AUDIT_SAMPLE_INTERVAL_S,
                 per_interval: int = AUDIT_SAMPLES_PER_INTERVAL,
                 max_sources: int = MAX_SOURCES, timer: Timer = time.monotonic) -> None:
        self._recent: TTLCache[tuple[str, str], bool] = TTLCache(
            maxsize=max_sources, ttl=interval_s, timer=timer)
        self._interval_s = interval_s
        self._per_interval = per_interval
        self._timer = timer
        self._window_start = -math.inf
        self._window_admitted = 0

    def __len__(self) -> int:
        """(source, reason) pairs remembered: never more than `max_sources`."""
        return len(self._recent)

    def admit(self, source: str, reason: str) -> bool:
        """Whether this refusal is written (True) or only counted (False)."""
        key = (source, reason)
        if key in self._recent:
            return False
        now = self._timer()
        if now - self._window_start >= self._interval_s:
            self._window_start, self._window_admitted = now, 0
        if self._window_admitted >= self._per_interval:
            return False
        self._window_admitted += 1
        self._recent[key] = True
        return True


class LoginThrottle:
    """Failed sign-ins per source: LOGIN_FAILURES_ALLOWED within a window of
    LOGIN_FAILURE_WINDOW_S from the source's first failure; a success forgets the source."""

    def __init__(self, allowed: int = LOGIN_FAILURES_ALLOWED,
                 window_s: float = LOGIN_FAILURE_WINDOW_S, max_sources: int = MAX_SOURCES,
                 timer: Timer = time.monotonic) -> None:
        # (window start, failures in it); the cache's own expiry (from the last write, so
        # never before the window ends) only frees memory
        self._failures: TTLCache[str, tuple[float, int]] = TTLCache(
            maxsize=max_sources, ttl=window_s, timer=timer)
        self._allowed = allowed
        self._window_s = window_s
        self._timer = timer

    def __len__(self) -> int:
        """Sources remembered: never more than `max_sources`."""
        return len(self._failures)

    def _current(self, source: str, now: float) -> tuple[float, int] | None:
        entry = self._failures.get(source)
        if entry is None or now - entry[0] >= self._window_s:
            return None
        return entry

    def retry_after(self, source: str) -> int | None:
        """Whole seconds until `source` may try again (at least 1), or None if it may now."""
        now = self._timer()
        entry = self._current(source, now)
        if entry is None or entry[1] < self._allowed:
            return None
        return max(1, math.ceil(entry[0] + self._window_s - now))

    def failed(self, source: str) -> None:
        now = self._timer()
        start, count = self._current(source, now) or (now, 0)
        self._failures[source] = (start, count + 1)

    def succeeded(self, source: str) -> None:
        self._failures.pop(source, None)
