"""Mergeable quantile sketches (DDSketch, 1 % relative accuracy) that serialise to bytes, so
percentiles over many runs and time windows are merged, never averaged."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable

from ddsketch import DDSketch
from ddsketch.pb.ddsketch_pb2 import DDSketch as DDSketchMessage
from ddsketch.pb.proto import DDSketchProto

RELATIVE_ACCURACY = 0.01
_HEADER = struct.Struct("<3d")  # sum, min, max: the protobuf form keeps only the bins


class MetricSketch:
    """A DDSketch with exact count, sum, min and max."""

    def __init__(self, sketch: DDSketch | None = None, *, total: float = 0.0,
                 low: float = math.inf, high: float = -math.inf) -> None:
        self._sketch = sketch if sketch is not None else DDSketch(RELATIVE_ACCURACY)
        self.sum = total
        self.min = low
        self.max = high

    @classmethod
    def of(cls, values: Iterable[float]) -> MetricSketch:
        sketch = cls()
        for value in values:
            sketch.add(value)
        return sketch

    def add(self, value: float) -> None:
        self._sketch.add(value)
        self.sum += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    @property
    def count(self) -> int:
        return int(self._sketch.count)

    def quantile(self, q: float) -> float | None:
        """Within 1 % of the exact value at rank q*(count-1); None when empty."""
        if self.count == 0:
            return None
        value = self._sketch.get_quantile_value(q)
        return None if value is None else min(max(float(value), self.min), self.max)

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None

    def merge(self, other: MetricSketch) -> None:
        self._sketch.merge(other._sketch)
        self.sum += other.sum
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    def to_bytes(self) -> bytes:
        message: bytes = DDSketchProto.to_proto(  # type: ignore[no-untyped-call]
            self._sketch).SerializeToString()
        return _HEADER.pack(self.sum, self.min, self.max) + message

    @classmethod
    def from_bytes(cls, data: bytes) -> MetricSketch:
        total, low, high = _HEADER.unpack_from(data)
        message = DDSketchMessage.FromString(data[_HEADER.size:])
        sketch = DDSketchProto.from_proto(message)  # type: ignore[no-untyped-call]
        return cls(sketch, total=total, low=low, high=high)
