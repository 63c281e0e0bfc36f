"""Schedules are pure and statistically right: constant spacing, Poisson rate, gamma CV."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from pydantic import TypeAdapter, ValidationError

from sustain.probes.load.profiles import (
    ConcurrencyProfile,
    ConstantProfile,
    LoadProfile,
    PoissonProfile,
    SingleProfile,
    Step,
    StepsProfile,
    SweepProfile,
)
from sustain.probes.load.schedule import constant_offsets, gamma_offsets
from sustain.probes.load.stages import ClosedStage, OpenStage, SingleStage

ADAPTER = TypeAdapter[LoadProfile](LoadProfile)


def gaps(offsets: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(offsets)]


def test_single_profile_is_one_single_stage() -> None:
    assert SingleProfile().planned_stages() == [SingleStage()]


def test_constant_profile_spaces_requests_by_one_over_rate() -> None:
    (stage,) = ConstantProfile(rate=2.0, duration_s=5.0).planned_stages()
    assert isinstance(stage, OpenStage)
    assert list(stage.offsets()) == [k * 0.5 for k in range(10)]


def test_max_requests_counts_only_requests_after_the_warmup() -> None:
    profile = ConstantProfile(rate=10.0, duration_s=60.0, max_requests=7, warmup_s=1.0)
    (stage,) = profile.planned_stages()
    assert isinstance(stage, OpenStage)
    offsets = list(stage.offsets())
    assert len([o for o in offsets if o >= 1.0]) == 7
    assert len(offsets) == 17


def test_poisson_mean_rate_is_within_three_percent_over_ten_thousand_arrivals() -> None:
    offsets = list(itertools.islice(gamma_offsets(50.0, 1.0, seed=7, end_s=math.inf), 10_001))
    rate = 10_000 / offsets[-1]
    assert rate == pytest.approx(50.0, rel=0.03)
    cv = statistics.stdev(gaps(offsets)) / statistics.mean(gaps(offsets))
    assert cv == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 2.0, 8.0])
def test_gamma_coefficient_of_variation_is_one_over_sqrt_burstiness(burstiness: float) -> None:
    offsets = list(itertools.islice(gamma_offsets(20.0, burstiness, seed=3, end_s=math.inf),
                                    20_001))
    g = gaps(offsets)
    assert statistics.mean(g) == pytest.approx(1 / 20.0, rel=0.03)
    assert statistics.stdev(g) / statistics.mean(g) == pytest.approx(
        1 / math.sqrt(burstiness), rel=0.05)


def test_poisson_schedule_is_seeded() -> None:
    profile = PoissonProfile(rate=5, duration_s=10, seed=11)
    (a,), (b,) = profile.planned_stages(), profile.planned_stages()
    assert isinstance(a, OpenStage)
    assert isinstance(b, OpenStage)
    assert list(a.offsets()) == list(b.offsets())
    other = list(gamma_offsets(5, 1.0, seed=12, end_s=10))
    assert list(a.offsets()) != other


def test_constant_offsets_never_drift() -> None:
    offsets = list(constant_offsets(3.0, 1000.0))
    assert offsets[-1] == pytest.approx(2999 / 3.0, abs=1e-9)


def test_steps_and_sweep_give_one_stage_each() -> None:
    steps = StepsProfile(stages=[Step(rate=5, duration_s=2), Step(concurrency=3, duration_s=4)])
    first, second = steps.planned_stages()
    assert isinstance(first, OpenStage)
    assert first.rate == 5
    assert isinstance(second, ClosedStage)
    assert second.users == 3
    sweep = SweepProfile(levels=[1, 4, 16], duration_s=5).planned_stages()
    assert [s.users for s in sweep if isinstance(s, ClosedStage)] == [1, 4, 16]
    (closed,) = ConcurrencyProfile(users=8, max_requests=100, think_time_s=0.5).planned_stages()
    assert isinstance(closed, ClosedStage)
    assert closed.think_time_s == 0.5


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"kind": "constant", "rate": 0, "duration_s": 5}, "rate"),
        ({"kind": "poisson", "rate": 5, "duration_s": 5, "burstiness": 0}, "burstiness"),
        ({"kind": "concurrency", "users": 4}, "duration_s or max_requests"),
        ({"kind": "steps", "stages": [{"rate": 1, "concurrency": 2, "duration_s": 1}]},
         "exactly one"),
        ({"kind": "sweep", "levels": [4, 1], "duration_s": 5}, "ascending"),
        ({"kind": "bursty"}, "kind"),
    ],
)
def test_invalid_profiles_are_rejected_with_a_reason(body: dict[str, object],
                                                     message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ADAPTER.validate_python(body)
