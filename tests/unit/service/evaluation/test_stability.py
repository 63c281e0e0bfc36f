"""Run-to-run stability bands (service/evaluation/stability.py)."""

from __future__ import annotations

import pytest

from sustain.service.evaluation.stability import band, stability


@pytest.mark.parametrize(("cov", "expected"), [
    (0.0, "excellent"), (0.049, "excellent"), (0.05, "good"), (0.099, "good"),
    (0.1, "fair"), (0.199, "fair"), (0.2, "unstable"), (3.0, "unstable")])
def test_bands_follow_the_thresholds(cov: float, expected: str) -> None:
    assert band(cov) == expected


def test_the_cov_is_the_sample_deviation_over_the_mean_from_three_runs() -> None:
    assert stability([10.0, 10.0]).cov is None
    found = stability([90.0, 100.0, 110.0])
    assert found.cov == pytest.approx(0.1)
    assert (found.runs, found.band) == (3, "fair")
