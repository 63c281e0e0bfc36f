"""The mergeable sketch: within 1 % of exact quantiles, lossless through bytes, mergeable."""

from __future__ import annotations

import random

import pytest

from sustain.probes.measure.sketch import MetricSketch, SketchMerger

LEVELS = (0.5, 0.9, 0.95, 0.99, 0.999)


def exact(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


@pytest.mark.parametrize("sigma", [0.25, 1.0, 2.0])
def test_relative_error_is_within_one_percent_on_lognormal_data(sigma: float) -> None:
    rng = random.Random(42)
    values = [rng.lognormvariate(4.0, sigma) for _ in range(50_000)]
    sketch = MetricSketch.of(values)
    for q in LEVELS:
        estimate = sketch.quantile(q)
        assert estimate is not None
        assert abs(estimate - exact(values, q)) / exact(values, q) <= 0.01


def test_bytes_round_trip_keeps_quantiles_count_sum_min_max() -> None:
    rng = random.Random(1)
    sketch = MetricSketch.of(rng.expovariate(0.1) for _ in range(5000))
    again = MetricSketch.from_bytes(sketch.to_bytes())
    assert again.count == sketch.count == 5000
    assert again.sum == pytest.approx(sketch.sum)
    assert (again.min, again.max) == (sketch.min, sketch.max)
    assert again.quantile(0.99) == pytest.approx(sketch.quantile(0.99), rel=1e-12)


def test_merged_sketches_match_one_sketch_of_all_values() -> None:
    rng = random.Random(9)
    parts = [[rng.lognormvariate(3, 0.7) for _ in range(3000)] for _ in range(5)]
    merged = MetricSketch()
    for part in parts:
        merged.merge(MetricSketch.from_bytes(MetricSketch.of(part).to_bytes()))
    everything = [v for part in parts for v in part]
    assert merged.count == len(everything)
    for q in LEVELS:
        estimate = merged.quantile(q)
        assert estimate is not None
        assert abs(estimate - exact(everything, q)) / exact(everything, q) <= 0.01


def test_empty_sketch_has_no_quantiles() -> None:
    assert MetricSketch().quantile(0.5) is None
    assert MetricSketch().mean is None


def test_bulk_sketch_has_the_same_bins_as_adding_one_by_one() -> None:
    rng = random.Random(11)
    values = [rng.lognormvariate(3, 1) for _ in range(3000)] + [0.0]
    bulk, one_by_one = MetricSketch.of(values), MetricSketch()
    for value in values:
        one_by_one.add(value)
    for q in (0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0):
        assert bulk.quantile(q) == pytest.approx(one_by_one.quantile(q), rel=1e-9)
    assert bulk.count == one_by_one.count


def test_the_fast_merger_equals_merging_sketches() -> None:
    rng = random.Random(12)
    parts = [MetricSketch.of(rng.expovariate(0.05) for _ in range(300)) for _ in range(20)]
    merger, merged = SketchMerger(), MetricSketch()
    for part in parts:
        merger.add(part.to_bytes())
        merged.merge(MetricSketch.from_bytes(part.to_bytes()))
    fast = merger.result()
    assert fast.count == merged.count == 6000
    assert (fast.min, fast.max) == (merged.min, merged.max)
    for q in (0.5, 0.9, 0.99):
        assert fast.quantile(q) == pytest.approx(merged.quantile(q), rel=1e-9)
    assert SketchMerger().result().count == 0


def test_a_sketch_filled_from_bins_answers_like_a_decoded_one() -> None:
    """MetricSketch.of and SketchMerger fill ddsketch's store in one go instead of through its
    decoder; every rank, threshold count, later add and merge must come out the same."""
    rng = random.Random(13)
    values = [rng.lognormvariate(2, 1.5) for _ in range(2000)] + [0.0, 0.0, -3.5, -0.25]
    filled = MetricSketch.of(values)
    decoded = MetricSketch.from_bytes(filled.to_bytes())
    qs = [i / 200 for i in range(201)]
    assert [filled.quantile(q) for q in qs] == [decoded.quantile(q) for q in qs]
    thresholds = [0.5, 1.0, 7.5, 40.0, 1e4]
    assert [filled.count_at_or_below(t) for t in thresholds] == \
        [decoded.count_at_or_below(t) for t in thresholds]
    other = MetricSketch.of(rng.expovariate(0.01) for _ in range(500))
    for sketch in (filled, decoded):
        sketch.add(1e6)
        sketch.add(1e-3)
        sketch.merge(MetricSketch.from_bytes(other.to_bytes()))
    assert filled.count == decoded.count == 2506
    assert [filled.quantile(q) for q in qs] == [decoded.quantile(q) for q in qs]


def test_merging_mergers_equals_adding_every_sketch_to_one() -> None:
    rng = random.Random(14)
    parts = [MetricSketch.of(rng.lognormvariate(4, 1) for _ in range(200)).to_bytes()
             for _ in range(12)]
    one, by_group = SketchMerger(), SketchMerger()
    for start in range(0, 12, 4):
        group = SketchMerger()
        for data in parts[start:start + 4]:
            group.add(data)
            one.add(data)
        by_group.merge(group)
    by_group.merge(SketchMerger())
    a, b = one.result(), by_group.result()
    assert (a.count, a.min, a.max) == (b.count, b.min, b.max) == (2400, a.min, a.max)
    assert a.sum == pytest.approx(b.sum, rel=1e-12)
    assert [a.quantile(q / 100) for q in range(101)] == [b.quantile(q / 100) for q in range(101)]
