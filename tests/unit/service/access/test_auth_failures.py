"""Failed authentication in bounded memory: the audit sampler writes the first refusal of a
source and reason per minute (and no more than its budget over all sources), the sign-in
throttle refuses a source past its failures until its window ends; neither remembers more
sources than its cap, however many an attacker uses. The throttle forgets no source before its
window ends: not for a flood of other addresses (they share one overflow count), not for a
sign-in with a key of the attacker's own; an IPv6 source is its /64."""

from __future__ import annotations

import pytest

from sustain.service.access.auth_failures import (
    MAX_SOURCES,
    AuditSampler,
    LoginThrottle,
    throttled_source,
)


class Clock:
    """A monotonic clock the test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_sampler_admits_one_refusal_per_source_and_reason_per_interval() -> None:
    clock = Clock()
    sampler = AuditSampler(interval_s=60, timer=clock)
    admitted = [sampler.admit(source, reason) for _ in range(50)
                for source in ("10.0.0.1", "10.0.0.2") for reason in ("missing_key", "unknown_key")]
    assert sum(admitted) == 4
    clock.now += 59.9
    assert not sampler.admit("10.0.0.1", "missing_key")
    clock.now += 0.2
    assert sampler.admit("10.0.0.1", "missing_key")


def test_the_sampler_admits_no_more_than_its_budget_from_fresh_sources() -> None:
    clock = Clock()
    sampler = AuditSampler(interval_s=60, per_interval=100, timer=clock)
    assert sum(sampler.admit(f"2001:db8::{n:x}", "missing_key") for n in range(5000)) == 100
    clock.now += 60
    assert sampler.admit("2001:db8::ffff:1", "missing_key")


def test_the_sampler_remembers_at_most_its_cap_of_sources() -> None:
    sampler = AuditSampler(per_interval=10**9, max_sources=500, timer=Clock())
    for n in range(20_000):
        sampler.admit(f"198.51.{n // 256}.{n % 256}", "unknown_key")
    assert len(sampler) == 500


def test_the_throttle_refuses_a_source_past_its_failures_until_the_window_ends() -> None:
    clock = Clock()
    throttle = LoginThrottle(allowed=10, window_s=300, timer=clock)
    for _ in range(9):
        throttle.failed("10.0.0.1")
        clock.now += 1
    assert throttle.retry_after("10.0.0.1") is None
    throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") == 291  # the window began at the first failure
    assert throttle.retry_after("10.0.0.2") is None
    clock.now += 290.5
    assert throttle.retry_after("10.0.0.1") == 1
    clock.now += 0.5
    assert throttle.retry_after("10.0.0.1") is None
    throttle.failed("10.0.0.1")  # a new window, with one failure in it
    assert throttle.retry_after("10.0.0.1") is None


def test_a_sign_in_clears_no_failures_of_its_source() -> None:
    """The attacker signs in with its own viewer key between guesses: the guesses still
    count (the route calls nothing on success; a sign-in is not a failure)."""
    throttle = LoginThrottle(allowed=2, window_s=300, timer=Clock())
    throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") is None  # the right key is checked, and succeeds
    throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") is not None
    assert not hasattr(throttle, "succeeded")


def test_the_throttle_remembers_at_most_its_cap_of_sources() -> None:
    clock = Clock()
    throttle = LoginThrottle(max_sources=300, timer=clock)
    for n in range(10_000):
        throttle.failed(f"2001:db8:{n:x}::1")
    assert len(throttle) == 300
    clock.now += 301
    throttle.failed("2001:db8:ffff::1")
    assert len(throttle) == 1  # expired windows are dropped on the way


def test_a_flood_of_sources_never_frees_a_throttled_one() -> None:
    clock = Clock()
    throttle = LoginThrottle(allowed=10, window_s=300, timer=clock)  # MAX_SOURCES: 10,000
    for _ in range(10):
        throttle.failed("203.0.113.7")
    for n in range(20_000):
        clock.now += 0.001
        throttle.failed(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
    assert len(throttle) == MAX_SOURCES
    assert throttle.retry_after("203.0.113.7") is not None
    assert throttle.retry_after("10.0.0.1") is None  # tracked, one failure


def test_new_sources_beyond_the_cap_share_one_throttled_count() -> None:
    clock = Clock()
    throttle = LoginThrottle(allowed=3, window_s=300, max_sources=5, timer=clock)
    for n in range(5):
        throttle.failed(f"10.0.0.{n}")
    assert throttle.retry_after("10.0.1.1") is None
    for n in range(3):
        throttle.failed(f"10.0.1.{n}")  # each a fresh address, all in the overflow
    assert len(throttle) == 5
    assert throttle.retry_after("10.0.1.200") == 300  # a new address waits with the flood
    assert throttle.retry_after("10.0.0.0") is None  # tracked sources keep their own count
    clock.now += 300
    assert throttle.retry_after("10.0.1.200") is None
    assert len(throttle) == 0


def test_an_ipv6_source_is_its_64() -> None:
    throttle = LoginThrottle(allowed=3, window_s=300, timer=Clock())
    for host in ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:DB8:1:2:a:b:c:d"):
        throttle.failed(host)
    assert throttle.retry_after("2001:db8:1:2::42") is not None
    assert throttle.retry_after("2001:db8:1:3::1") is None
    assert len(throttle) == 1


@pytest.mark.parametrize(("source", "counted_as"), [
    ("198.51.100.7", "198.51.100.7"),
    ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
    ("::ffff:198.51.100.7", "198.51.100.7"),
    ("unknown", "unknown"),
])
def test_what_the_throttle_counts_a_source_as(source: str, counted_as: str) -> None:
    assert throttled_source(source) == counted_as
