"""Failed authentication in bounded memory: the audit sampler writes the first refusal of a
source and reason per minute (and no more than its budget over all sources), the sign-in
throttle refuses a source past its failures until its window ends; neither remembers more
sources than its cap, however many an attacker uses."""

from __future__ import annotations

from sustain.service.domain.auth_failures import AuditSampler, LoginThrottle


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


def test_a_sign_in_clears_its_sources_failures() -> None:
    throttle = LoginThrottle(allowed=2, window_s=300, timer=Clock())
    throttle.failed("10.0.0.1")
    throttle.succeeded("10.0.0.1")
    throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") is None


def test_the_throttle_remembers_at_most_its_cap_of_sources() -> None:
    clock = Clock()
    throttle = LoginThrottle(max_sources=300, timer=clock)
    for n in range(10_000):
        throttle.failed(f"2001:db8::{n:x}")
    assert len(throttle) == 300
    clock.now += 301
    throttle.failed("2001:db8::1:0")
    assert len(throttle) == 1  # expired windows are dropped on the way
