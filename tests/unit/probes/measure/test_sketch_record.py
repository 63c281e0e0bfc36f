"""A run's sketches as one record: the packed form answers as the sketch does, a
single-request run's record is about its values' size, and the interchange bytes keep only
non-empty bins."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import msgpack
import pytest
from ddsketch import DDSketch
from ddsketch.pb.ddsketch_pb2 import DDSketch as DDSketchMessage
from ddsketch.pb.proto import DDSketchProto

from sustain.probes.measure import sketch_record
from sustain.probes.measure.run_sketches import METRICS, MetricName
from sustain.probes.measure.sketch import RELATIVE_ACCURACY, MetricSketch, SketchMerger

QUANTILES = (0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 1.0)
SINGLE_REQUEST_METRICS: tuple[MetricName, ...] = (
    "ttft", "ttfo", "ttfb", "tpot", "answer_tpot", "itl", "e2e", "corrected_e2e", "lag",
    "output_tokens", "reasoning_share")
"""The sketches of a single-request streamed chat run (connect too on a new connection)."""


def figures(sketch: MetricSketch) -> tuple[object, ...]:
    return (sketch.count, sketch.sum, sketch.min, sketch.max,
            *(sketch.quantile(q) for q in QUANTILES))


def spread(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.lognormvariate(3.5, 0.6) for _ in range(n)]


def test_every_sketched_metric_has_a_record_code_and_codes_are_unique() -> None:
    assert set(METRICS) <= set(sketch_record.CODES)
    assert len(set(sketch_record.CODES)) == len(sketch_record.CODES)


def test_a_single_request_runs_record_is_about_its_values_size() -> None:
    values = {metric: 1.0 + 37.3 * i for i, metric in enumerate(SINGLE_REQUEST_METRICS)}
    record = sketch_record.pack({(0, metric): MetricSketch.of([value])
                                 for metric, value in values.items()})
    assert len(record) <= 13 * len(values) + 2, len(record)
    found = {metric: MetricSketch.load(packed)
             for _, metric, packed in sketch_record.unpack(record)}
    assert {metric: (s.count, s.quantile(0.5), s.quantile(0.99), s.sum)
            for metric, s in found.items()} == {
        metric: (1, value, value, value) for metric, value in values.items()}


@pytest.mark.parametrize("values", [
    spread(1_000, 1), spread(2, 2), [0.0, 0.0, 5.0], [-3.0, -1.0, 0.0, 2.0, 40.0],
    [7.25] * 30], ids=["lognormal", "two", "zeros", "negatives", "repeated"])
def test_a_packed_sketch_answers_every_figure_as_the_sketch_does(values: list[float]) -> None:
    sketch = MetricSketch.of(values)
    record = sketch_record.pack({(0, "e2e"): sketch})
    (stage, metric, packed), = sketch_record.unpack(record)
    assert (stage, metric) == (0, "e2e")
    assert figures(MetricSketch.load(packed)) == figures(sketch)
    merger = SketchMerger()
    merger.add(packed)
    assert figures(merger.result()) == figures(sketch)


def test_packed_and_interchange_sketches_merge_together() -> None:
    first, second = spread(300, 3), spread(200, 4)
    merger = SketchMerger()
    merger.add(MetricSketch.of(first).pack())
    merger.add(MetricSketch.of(second).to_bytes())
    merged, whole = figures(merger.result()), figures(MetricSketch.of(first + second))
    assert merged[1] == pytest.approx(whole[1], rel=1e-12), "the sum, in another order"
    assert merged[:1] + merged[2:] == whole[:1] + whole[2:]


def test_mergers_of_packed_sketches_merge_into_one_another() -> None:
    first, second = SketchMerger(), SketchMerger()
    first.add(MetricSketch.of([1.0, 2.0]).pack())
    second.add(MetricSketch.of([3.0, 4.0, 5.0]).pack())
    everything = SketchMerger()
    everything.merge(first)
    everything.merge(second)
    assert figures(everything.result()) == figures(MetricSketch.of([1.0, 2.0, 3.0, 4.0, 5.0]))


def test_unpack_gives_the_metrics_asked_for_with_their_stages() -> None:
    record = sketch_record.pack({(0, "ttft"): MetricSketch.of([1.0]),
                                 (1, "ttft"): MetricSketch.of([2.0, 3.0]),
                                 (1, "e2e"): MetricSketch.of([9.0])})
    assert [(stage, metric) for stage, metric, _ in sketch_record.unpack(record, {"ttft"})] \
        == [(0, "ttft"), (1, "ttft")]
    assert len(list(sketch_record.unpack(record))) == 3


def test_an_empty_sketch_packs_and_answers_nothing() -> None:
    (_, _, packed), = sketch_record.unpack(sketch_record.pack({(0, "lag"): MetricSketch()}))
    empty = MetricSketch.load(packed)
    assert (empty.count, empty.quantile(0.5), empty.mean) == (0, None, None)


def test_a_newer_releases_metric_is_passed_over_when_metrics_are_named() -> None:
    newer = msgpack.packb([sketch_record.VERSION, [0, 0, 1.0],
                           [len(sketch_record.CODES), 0, 2.0]])
    assert [m for _, m, _ in sketch_record.unpack(newer, {"ttft", "e2e"})] == ["ttft"]
    with pytest.raises(ValueError, match="unknown metric code"):
        list(sketch_record.unpack(newer))


def test_a_record_of_another_version_is_refused() -> None:
    with pytest.raises(ValueError, match="version"):
        list(sketch_record.unpack(msgpack.packb([sketch_record.VERSION + 1, [0, 0, 1.0]])))


def test_a_sketch_of_another_index_mapping_does_not_pack() -> None:
    foreign = DDSketch(0.05)
    for value in (1.0, 2.0, 3.0):
        foreign.add(value)
    message = DDSketchProto.to_proto(foreign).SerializeToString()  # type: ignore[no-untyped-call]
    sketch = MetricSketch.from_bytes(struct.pack("<3d", 6.0, 1.0, 3.0) + message)
    with pytest.raises(ValueError, match="mapping"):
        sketch.pack()
    with pytest.raises(ValueError, match="mapping"):
        sketch_record.pack({(0, "e2e"): sketch})


def test_a_metric_without_a_code_does_not_pack() -> None:
    with pytest.raises(ValueError, match="no record code"):
        sketch_record.pack({(0, "retired"): MetricSketch.of([1.0])})


def test_interchange_bytes_keep_only_the_non_empty_bins() -> None:
    one = MetricSketch.of([42.0])
    assert len(one.to_bytes()) < 80
    filled = DDSketch(RELATIVE_ACCURACY)
    filled.add(42.0)
    untrimmed = DDSketchProto.to_proto(filled).SerializeToString()  # type: ignore[no-untyped-call]
    assert len(untrimmed) > 1_000, "ddsketch's own message carries the store's spare bins"
    values = spread(500, 5)
    sketch = MetricSketch.of(values)
    assert figures(MetricSketch.from_bytes(sketch.to_bytes())) == figures(sketch)
    decoded = DDSketchProto.from_proto(  # type: ignore[no-untyped-call]
        DDSketchMessage.FromString(sketch.to_bytes()[24:]))
    assert decoded.count == len(values), "ddsketch's own decoder reads the trimmed form"


def untrusted(edit: Any, values: tuple[float, ...] = (1.0, 2.0)) -> bytes:
    """Interchange bytes of a sketch of `values`, its protobuf message changed by `edit`."""
    sketch = DDSketch(RELATIVE_ACCURACY)
    for value in values:
        sketch.add(value)
    proto: Any = DDSketchProto.to_proto(sketch)  # type: ignore[no-untyped-call]
    edit(proto)
    message: bytes = proto.SerializeToString()
    return struct.pack("<3d", sum(values), min(values), max(values)) + message


def test_an_untrusted_sketch_of_sustains_form_is_read_as_it_is() -> None:
    values = [*spread(400, 6), 0.0, -2.0]
    sketch = MetricSketch.from_untrusted(MetricSketch.of(values).to_bytes())
    assert figures(sketch) == figures(MetricSketch.of(values))
    assert MetricSketch.from_untrusted(MetricSketch().to_bytes()).count == 0


@pytest.mark.parametrize(("edit", "values", "why"), [
    (lambda p: p.mapping.__setattr__("gamma", p.mapping.gamma * 2), (5.0,), "mapping"),
    (lambda p: p.mapping.__setattr__("gamma", math.nextafter(p.mapping.gamma, 2.0)),
     (1.0, 2.0), "mapping"),
    (lambda p: p.positiveValues.binCounts.__setitem__(9_000_000, 1.0), (1.0,), "sparse"),
    (lambda p: p.positiveValues.__setattr__("contiguousBinIndexOffset", 20_000_000), (1.0,),
     "beyond"),
    (lambda p: p.positiveValues.__setattr__("contiguousBinIndexOffset", -20_000_000), (1.0,),
     "beyond"),
    (lambda p: p.__setattr__("zeroCount", 0.5), (1.0,), "whole"),
    (lambda p: p.positiveValues.contiguousBinCounts.append(-3.0), (1.0,), "whole"),
], ids=["foreign-one-value", "gamma-one-ulp-off", "sparse-map", "far-above", "far-below",
        "half-a-count", "negative-count"])
def test_an_untrusted_sketch_off_sustains_form_is_refused(edit: Any, values: tuple[float, ...],
                                                          why: str) -> None:
    with pytest.raises(ValueError, match=why):
        MetricSketch.from_untrusted(untrusted(edit, values))
