"""The load limits: what each kind of profile plans (rate, users, seconds, requests, warmups
included), and every figure beyond a limit named by the field that sets it."""

from __future__ import annotations

from typing import Any

import pytest

from sustain.probes.load.profiles import parse_profile
from sustain.probes.workers.pool import available_cpus
from sustain.service.config import Settings
from sustain.service.policy.limits import (
    BUDGET_GRACE_S,
    BeyondLimitsError,
    LoadLimits,
    ObjectLimits,
    check_limits,
    limit_violations,
)

LIMITS = LoadLimits(max_rate=100, max_concurrency=300, max_run_s=600,
                    max_run_requests=10_000)


def violations(**profile: Any) -> list[tuple[str, str]]:
    found = limit_violations(parse_profile(profile).planned_load(), LIMITS)
    return [(".".join(str(p) for p in path), message) for path, message in found]


def test_the_settings_defaults_are_the_documented_limits() -> None:
    limits = Settings().load_limits()
    assert limits == LoadLimits(max_rate=1000, max_concurrency=2000, max_run_s=3600,
                                max_run_requests=1_000_000, max_workers=available_cpus(),
                                max_total_rate=10_000,
                                objects=ObjectLimits(endpoints=1000, probes=10_000,
                                                     slos=1000, notifiers=100,
                                                     silences=1000))
    budget = limits.budget()
    assert (budget.seconds, budget.requests, budget.max_rate) == (3600 + BUDGET_GRACE_S,
                                                                  1_000_000, 1000)


def test_a_constant_rate_plans_its_warmup_and_its_measured_requests() -> None:
    load = parse_profile({"kind": "constant", "rate": 10, "duration_s": 60,
                          "warmup_s": 5}).planned_load()
    assert load.peak_rate is not None
    assert load.peak_rate.value == 10
    assert load.seconds is not None
    assert load.seconds.value == 65
    assert load.requests is not None
    assert load.requests.value == 650
    capped = parse_profile({"kind": "poisson", "rate": 10, "duration_s": 60,
                            "warmup_s": 5, "max_requests": 100}).planned_load()
    assert capped.requests is not None
    assert capped.requests.value == 150
    assert capped.requests.field == ("max_requests",)


SECONDS = "at most 600 s per run (SUSTAIN_MAX_RUN_S)"
REQUESTS = "at most 10,000 per run (SUSTAIN_MAX_RUN_REQUESTS)"


@pytest.mark.parametrize(("profile", "expected"), [
    ({"kind": "single"}, []),
    ({"kind": "constant", "rate": 1, "duration_s": 1, "max_in_flight": 300}, []),
    ({"kind": "constant", "rate": 100, "duration_s": 100}, []),
    ({"kind": "constant", "rate": 10_000, "duration_s": 86_400}, [
        ("rate", "10,000 requests/s; at most 100 (SUSTAIN_MAX_RATE)"),
        ("duration_s", f"warmup_s + duration_s = 86,400 s; {SECONDS}"),
        ("duration_s", f"rate x (warmup_s + duration_s) = 864,000,000 requests; {REQUESTS}")]),
    ({"kind": "constant", "rate": 10, "duration_s": 500, "warmup_s": 200}, [
        ("duration_s", f"warmup_s + duration_s = 700 s; {SECONDS}")]),
    ({"kind": "poisson", "rate": 50, "duration_s": 300}, [
        ("duration_s", f"rate x (warmup_s + duration_s) = 15,000 requests; {REQUESTS}")]),
    ({"kind": "poisson", "rate": 50, "duration_s": 300, "max_requests": 9_000}, []),
    ({"kind": "constant", "rate": 1, "duration_s": 1, "max_in_flight": 301}, [
        ("max_in_flight", "max_in_flight (requests in flight) is 301; at most 300 "
                          "(SUSTAIN_MAX_CONCURRENCY)")]),
    ({"kind": "concurrency", "users": 301, "max_requests": 10}, [
        ("users", "users is 301; at most 300 (SUSTAIN_MAX_CONCURRENCY)")]),
    ({"kind": "concurrency", "users": 5, "max_requests": 10_001}, [
        ("max_requests", f"max_requests = 10,001 requests; {REQUESTS}")]),
    ({"kind": "concurrency", "users": 5, "duration_s": 590, "warmup_s": 20}, [
        ("duration_s", f"warmup_s + duration_s = 610 s; {SECONDS}")]),
    ({"kind": "steps", "stages": [{"rate": 10, "duration_s": 10},
                                  {"rate": 150, "duration_s": 10},
                                  {"concurrency": 301, "duration_s": 10}]}, [
        ("stages.1.rate", "150 requests/s; at most 100 (SUSTAIN_MAX_RATE)"),
        ("stages.2.concurrency", "concurrency is 301; at most 300 (SUSTAIN_MAX_CONCURRENCY)")]),
    ({"kind": "steps", "warmup_s": 100, "stages": [{"rate": 1, "duration_s": 200},
                                                   {"concurrency": 1, "duration_s": 200}]},
     []),
    ({"kind": "steps", "warmup_s": 101, "stages": [{"rate": 1, "duration_s": 200},
                                                   {"concurrency": 1, "duration_s": 200}]}, [
        ("stages", f"2 stages x warmup_s + their duration_s = 602 s; {SECONDS}")]),
    ({"kind": "sweep", "levels": [1, 10, 301], "duration_s": 10}, [
        ("levels", "the highest level is 301; at most 300 (SUSTAIN_MAX_CONCURRENCY)")]),
    ({"kind": "sweep", "levels": [1, 2, 4, 8], "duration_s": 100, "warmup_s": 60}, [
        ("duration_s", f"4 levels x (warmup_s + duration_s) = 640 s; {SECONDS}")]),
    ({"kind": "sweep", "levels": [1, 2], "duration_s": 10, "max_requests": 6000}, [
        ("max_requests", f"2 levels x max_requests = 12,000 requests; {REQUESTS}")]),
])
def test_each_figure_beyond_a_limit_is_named_by_its_field(
        profile: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert violations(**profile) == expected


def test_a_stored_profile_beyond_lowered_limits_names_every_field() -> None:
    profile = parse_profile({"kind": "sweep", "levels": [1, 301], "duration_s": 1000})
    with pytest.raises(BeyondLimitsError) as caught:
        check_limits(profile, LIMITS)
    assert str(caught.value) == (
        "the profile is beyond this service's limits: profile.levels: the highest level is "
        f"301; at most 300 (SUSTAIN_MAX_CONCURRENCY); profile.duration_s: 2 levels x (warmup_s "
        f"+ duration_s) = 2,000 s; {SECONDS}")
    check_limits(profile, Settings().load_limits())
