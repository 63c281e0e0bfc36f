"""What the total-rate and object-count limits count: each enabled probe's peak planned rate
(a closed loop at the pace it is held to, SUSTAIN_MAX_RATE), and objects per kind."""

from __future__ import annotations

from typing import Any

import pytest

from sustain.probes.load.profiles import parse_profile
from sustain.service.policy.limits import (
    LoadLimits,
    too_many,
    total_rate,
    total_rate_problem,
)

MAX_RATE = 100.0


@pytest.mark.parametrize(("profile", "rate"), [
    ({"kind": "single"}, 1.0),
    ({"kind": "constant", "rate": 30, "duration_s": 5}, 30.0),
    ({"kind": "poisson", "rate": 7.5, "duration_s": 5}, 7.5),
    ({"kind": "steps", "stages": [{"rate": 5, "duration_s": 1},
                                  {"rate": 40, "duration_s": 1}]}, 40.0),
    ({"kind": "steps", "stages": [{"rate": 5, "duration_s": 1},
                                  {"concurrency": 2, "duration_s": 1}]}, MAX_RATE),
    ({"kind": "concurrency", "users": 1, "max_requests": 3}, MAX_RATE),
    ({"kind": "sweep", "levels": [1, 2], "duration_s": 1}, MAX_RATE),
    ({"kind": "capacity", "unit": "rate", "minimum": 1, "maximum": 60, "duration_s": 1,
      "slo": {"e2e_ms": 500}}, 60.0),
])
def test_peak_rate_counts_closed_loops_at_max_rate(profile: dict[str, Any], rate: float
                                                   ) -> None:
    assert parse_profile(profile).peak_rate(MAX_RATE) == rate


def test_an_open_loop_faster_than_a_lowered_max_rate_counts_at_its_own_rate() -> None:
    steps = parse_profile({"kind": "steps", "stages": [{"rate": 500, "duration_s": 1},
                                                       {"concurrency": 2, "duration_s": 1}]})
    assert steps.peak_rate(MAX_RATE) == 500.0


def test_total_rate_sums_the_peaks_and_the_problem_names_the_setting() -> None:
    profiles = [parse_profile({"kind": "constant", "rate": 60, "duration_s": 1}),
                parse_profile({"kind": "concurrency", "users": 2, "duration_s": 1})]
    assert total_rate(profiles, MAX_RATE) == 160.0
    assert total_rate_problem(160.0, 160.0) is None
    problem = total_rate_problem(160.0, 150.0)
    assert problem is not None
    assert "160" in problem
    assert "at most 150 (SUSTAIN_MAX_TOTAL_RATE" in problem


def test_too_many_names_the_limit_and_its_setting() -> None:
    assert too_many("endpoint", 1000, 1000) is None
    assert too_many("endpoint", 1001, 1000) == "at most 1,000 endpoints (SUSTAIN_MAX_ENDPOINTS)"
    assert too_many("notifier", 2, 1) == "at most 1 notifiers (SUSTAIN_MAX_NOTIFIERS)"


def test_the_run_budget_carries_max_rate_to_pace_closed_loops() -> None:
    limits = LoadLimits(max_rate=25.0, max_concurrency=10, max_run_s=60,
                        max_run_requests=100)
    assert limits.budget().max_rate == 25.0
