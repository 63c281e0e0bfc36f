"""Failed authentication as plain values: why a call was refused, how often a refusal reaches
the audit log, and how many failed sign-ins a source may make.

Every failure is counted (sustain_auth_failures_total{reason}); these keep what is *written*
or *tried* per source bounded, so that anonymous traffic can neither fill the audit log nor
guess keys at full speed. The memory is per replica and bounded by `max_sources`. The audit
sampler forgets its oldest sources first (an attacker with more addresses than that gains
nothing a new address would not give them anyway). The sign-in throttle forgets none before its
window ends: a source's failures are what stops it guessing, so neither a flood of other
addresses nor a sign-in with a key of its own may clear them. An IPv6 source is its /64 (one
host holds a whole /64), and once the table is full every new source shares one overflow
entry, throttled as a whole."""

from __future__ import annotations

import enum
import ipaddress
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


OVERFLOW_SOURCE = "overflow"
"""The throttle's one entry for the sources that found its table full (not an address)."""
IPV6_PREFIX = 64
"""An IPv6 source is throttled by its network of this many bits: one host or customer is
given a /64, so single addresses would give it 2**64 fresh sources."""


def throttled_source(source: str) -> str:
    """What the sign-in throttle counts failures by: an IPv4 address as it is, an IPv6 address
    as its /64 (an IPv4-mapped one as its IPv4 address), anything else (a name, `unknown`)
    as it is."""
    try:
        address = ipaddress.ip_address(source)
    except ValueError:
        return source
    if isinstance(address, ipaddress.IPv4Address):
        return str(address)
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, IPV6_PREFIX), strict=False))


class LoginThrottle:
    """Failed sign-ins per source (throttled_source: an IPv6 address by its /64):
    LOGIN_FAILURES_ALLOWED within a window of LOGIN_FAILURE_WINDOW_S from the source's first
    failure. A success clears nothing (the failures were guesses at other keys; an attacker
    signing in with a key of its own must not reset them). At most `max_sources` sources are
    tracked, none forgotten before its window ends; a new source that finds the table full
    counts in the one OVERFLOW_SOURCE entry, which is throttled as a whole, so a flood of
    addresses throttles the flood (and whoever arrives new during it), never frees a
    tracked source."""

    def __init__(self, allowed: int = LOGIN_FAILURES_ALLOWED,
                 window_s: float = LOGIN_FAILURE_WINDOW_S, max_sources: int = MAX_SOURCES,
                 timer: Timer = time.monotonic) -> None:
        # source -> (window start, failures in it), in order of window start: a new window
        # is re-inserted at the end, so expired entries are always at the front
        self._failures: dict[str, tuple[float, int]] = {}
        self._overflow: tuple[float, int] | None = None
        self._allowed = allowed
        self._window_s = window_s
        self._max_sources = max_sources
        self._timer = timer

    def __len__(self) -> int:
        """Sources tracked: never more than `max_sources` (the overflow entry aside)."""
        return len(self._failures)

    def _expire(self, now: float) -> None:
        """Drop the entries whose window has ended (all at the front)."""
        while self._failures:
            source, (start, _) = next(iter(self._failures.items()))
            if now - start < self._window_s:
                break
            del self._failures[source]
        if self._overflow is not None and now - self._overflow[0] >= self._window_s:
            self._overflow = None

    def _entry(self, key: str) -> tuple[float, int] | None:
        """The failures counted for `key` in its current window: its own, or the overflow's
        when it is not tracked and the table is full."""
        if key in self._failures:
            return self._failures[key]
        return self._overflow if len(self._failures) >= self._max_sources else None

    def retry_after(self, source: str) -> int | None:
        """Whole seconds until `source` may try again (at least 1), or None if it may now."""
        now = self._timer()
        self._expire(now)
        entry = self._entry(throttled_source(source))
        if entry is None or entry[1] < self._allowed:
            return None
        return max(1, math.ceil(entry[0] + self._window_s - now))

    def failed(self, source: str) -> None:
        now = self._timer()
        self._expire(now)
        key = throttled_source(source)
        if key in self._failures:
            start, count = self._failures[key]
            self._failures[key] = (start, count + 1)
        elif len(self._failures) < self._max_sources:
            self._failures[key] = (now, 1)
        else:
            start, count = self._overflow or (now, 0)
            self._overflow = (start, count + 1)
