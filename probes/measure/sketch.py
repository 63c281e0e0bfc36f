"""Mergeable quantile sketches (DDSketch, 1 % relative accuracy) that serialise to bytes, so
percentiles over many runs and time windows are merged, never averaged."""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ddsketch import DDSketch
from ddsketch.ddsketch import BaseDDSketch
from ddsketch.mapping import KeyMapping, LogarithmicMapping
from ddsketch.pb.ddsketch_pb2 import DDSketch as DDSketchMessage
from ddsketch.pb.proto import DDSketchProto, KeyMappingProto
from ddsketch.store import DenseStore

from sustain.probes.measure import finite

RELATIVE_ACCURACY = 0.01
_HEADER = struct.Struct("<3d")  # sum, min, max: the protobuf form keeps only the bins


class MetricSketch:
    """A DDSketch with exact count, sum, min and max. An empty sketch's min and max are +inf
    and -inf (the identities of merging), never reported: `quantile`, `mean` and the
    statistics built on them answer None for it."""

    def __init__(self, sketch: BaseDDSketch | None = None, *, total: float = 0.0,
                 low: float = math.inf, high: float = -math.inf) -> None:
        self._sketch = sketch if sketch is not None else DDSketch(RELATIVE_ACCURACY)
        self.sum = total
        self.min = low
        self.max = high

    @classmethod
    def of(cls, values: Iterable[float]) -> MetricSketch:
        """The sketch of all `values` at once: the same bins as adding them one by one, about
        ten times faster (bin keys are counted in bulk, the store is built once)."""
        bins = _Bins()
        bins.add_values(list(values))
        return bins.result()

    def add(self, value: float) -> None:
        self._sketch.add(value)
        self.sum += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    @property
    def count(self) -> int:
        return int(self._sketch.count)

    def quantile(self, q: float) -> float | None:
        """The q-quantile as `percentiles.quantile` defines it (linear interpolation between
        the values at ranks floor and ceil of q*(count-1)), each rank's value within 1 %, so
        the result is within 1 % of the exact one; None when empty."""
        n = self.count
        if n == 0:
            return None
        position = q * (n - 1)
        low = math.floor(position)
        high = min(low + 1, n - 1)
        lower = self._at_rank(low)
        if high == low or position == low:
            return lower
        upper, frac = self._at_rank(high), position - low
        value = lower + (upper - lower) * frac
        return value if math.isfinite(value) else lower * (1.0 - frac) + upper * frac

    def _at_rank(self, rank: int) -> float:
        """The value at 0-based rank `rank`, within 1 %. DDSketch answers rank r' with the
        first bin whose cumulative count exceeds r'; asking r + 0.5 lands on rank r exactly,
        whatever the float rounding of the level."""
        n = self.count
        level = 1.0 if rank >= n - 1 else (rank + 0.5) / (n - 1)
        value = self._sketch.get_quantile_value(level)
        assert value is not None
        return min(max(float(value), self.min), self.max)

    @property
    def mean(self) -> float | None:
        """sum / count, in the values' unit; None when empty, or when the sum went past the
        float range (values near the float maximum)."""
        return finite.ratio(self.sum, self.count) if math.isfinite(self.sum) else None

    def merge(self, other: MetricSketch) -> None:
        self._sketch.merge(other._sketch)
        self.sum += other.sum
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    def count_at_or_below(self, threshold: float) -> int:
        """About how many values are at or under `threshold`: exact outside [min, max]; else
        whole bins below the threshold's bin, plus the share of that bin's (log-)width under
        the threshold. A threshold within the zero bin (at or below the smallest positive
        value the mapping tells apart, 0 included) counts that bin and every negative value
        (latencies have none)."""
        if self.count == 0 or threshold < self.min:
            return 0
        if threshold >= self.max:
            return self.count
        sketch: Any = self._sketch
        mapping = sketch._mapping
        below: float = sketch._zero_count + sketch._negative_store.count
        if threshold <= mapping.min_possible:
            return round(below)
        key = mapping.key(threshold)
        store = sketch._store
        below += sum(c for i, c in enumerate(store.bins) if store.offset + i < key)
        index = key - store.offset
        if 0 <= index < len(store.bins):
            lower = mapping.gamma ** (key - 1 - mapping._offset)
            upper = lower * mapping.gamma
            share = math.log(threshold / lower) / math.log(upper / lower)
            below += store.bins[index] * min(1.0, max(0.0, share))
        return round(below)

    def to_bytes(self) -> bytes:
        """The interchange form (agents' uploads, rollups): sum, min and max, then ddsketch's
        protobuf message with each store trimmed to its first and last non-empty bin (a
        store keeps spare bins around them, which would be a kilobyte of zeros)."""
        proto: Any = DDSketchProto.to_proto(self._sketch)  # type: ignore[no-untyped-call]
        _trim(proto.positiveValues)
        _trim(proto.negativeValues)
        message: bytes = proto.SerializeToString()
        return _HEADER.pack(self.sum, self.min, self.max) + message

    def pack(self) -> PackedSketch:
        """The compact form a run's record stores (sketch_record): the value itself for a
        single value (a sketch of one value answers it exactly), else sum, min, max, the
        zero count and each store's first key and counts. Only sketches with sustain's index
        mapping pack (ValueError otherwise): the form does not carry the mapping."""
        sketch: Any = self._sketch
        if not _is_sustains(sketch._mapping):
            raise ValueError("sketch was not made with sustain's index mapping")
        if self.count == 1 and math.isfinite(self.sum) and self.sum == self.min == self.max:
            return PackedSketch((self.sum,))
        if self.count == 0:
            return PackedSketch(())
        entry: list[Any] = [self.sum, self.min, self.max, _number(sketch._zero_count),
                            *_packed_store(sketch._store)]
        negative = _packed_store(sketch._negative_store)
        if negative[1]:
            entry.extend(negative)
        return PackedSketch(tuple(entry))

    @classmethod
    def from_untrusted(cls, data: bytes) -> MetricSketch:
        """A sketch from bytes another process sent (an agent's upload), checked so that
        storing and merging it costs what its bytes do: sustain's index mapping exactly, no
        sparse bin map (the decoder ignores one), bins within the keys of finite values,
        whole non-negative counts, min <= max unless empty. ValueError otherwise."""
        if len(data) < _HEADER.size:
            raise ValueError("shorter than a sketch's header")
        message = DDSketchMessage.FromString(data[_HEADER.size:])
        if message.mapping.SerializeToString() != _DEFAULT_MAPPING:
            raise ValueError("sketch was not made with sustain's index mapping")
        counts = [message.zeroCount]
        for store in (message.positiveValues, message.negativeValues):
            if store.binCounts:
                raise ValueError("a sparse bin map")
            first = store.contiguousBinIndexOffset
            last = first + len(store.contiguousBinCounts) - 1
            if store.contiguousBinCounts and not (first >= _KEY_MIN and last <= _KEY_MAX):
                raise ValueError("bins beyond the keys of finite values")
            counts.extend(store.contiguousBinCounts)
        if not all(math.isfinite(c) and c >= 0 and float(c).is_integer() for c in counts):
            raise ValueError("a count that is not a whole number, 0 or more")
        sketch = cls.from_bytes(data)
        if sketch.count and not sketch.min <= sketch.max:
            raise ValueError("min above max")
        return sketch

    @classmethod
    def load(cls, data: SketchData) -> MetricSketch:
        """The sketch of either stored form."""
        if isinstance(data, PackedSketch):
            bins = _Bins()
            bins.add_packed(data)
            return bins.result()
        return cls.from_bytes(data)

    @classmethod
    def from_bytes(cls, data: bytes) -> MetricSketch:
        total, low, high = _HEADER.unpack_from(data)
        message = DDSketchMessage.FromString(data[_HEADER.size:])
        sketch = DDSketchProto.from_proto(message)  # type: ignore[no-untyped-call]
        return cls(sketch, total=total, low=low, high=high)


class SketchMerger:
    """Merges many serialised sketches into one, fast: bin counts are summed straight from the
    decoded protobuf messages, and a DDSketch is built once at the end. Several times faster
    than `from_bytes` + `merge` per sketch, which matters when a window merges thousands."""

    def __init__(self) -> None:
        self._bins = _Bins()
        self._mapping: bytes | None = None

    def add(self, data: SketchData) -> None:
        if isinstance(data, PackedSketch):  # always of sustain's mapping (pack checks)
            if self._mapping is None:
                self._mapping = _DEFAULT_MAPPING
            self._bins.add_packed(data)
            return
        total, low, high = _HEADER.unpack_from(data)
        message = DDSketchMessage.FromString(data[_HEADER.size:])
        mapping = message.mapping.SerializeToString()
        if self._mapping is None:
            self._mapping = mapping
        elif mapping != self._mapping:
            raise ValueError("cannot merge sketches with different index mappings")
        if mapping != _DEFAULT_MAPPING:
            raise ValueError("sketch was not made with sustain's index mapping")
        bins = self._bins
        _add_store(bins.positive, message.positiveValues)
        _add_store(bins.negative, message.negativeValues)
        bins.zero += message.zeroCount
        bins.sum += total
        bins.min = min(bins.min, low)
        bins.max = max(bins.max, high)

    def merge(self, other: SketchMerger) -> None:
        """Add everything `other` was given, without decoding it again."""
        if other._mapping is None:
            return
        if self._mapping is None:
            self._mapping = other._mapping
        self._bins.merge(other._bins)

    def result(self) -> MetricSketch:
        return self._bins.result()


class _Bins:
    """Bin counts of sustain's DDSketch mapping, with exact sum, min and max."""

    def __init__(self) -> None:
        self.positive: dict[int, float] = {}
        self.negative: dict[int, float] = {}
        self.zero = 0.0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf

    def merge(self, other: _Bins) -> None:
        for mine, theirs in ((self.positive, other.positive), (self.negative, other.negative)):
            get = mine.get
            for index, count in theirs.items():
                mine[index] = get(index, 0.0) + count
        self.zero += other.zero
        self.sum += other.sum
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    def add_packed(self, packed: PackedSketch) -> None:
        """Add a sketch in the packed form (MetricSketch.pack)."""
        entry = packed.entry
        if len(entry) == 1:
            self.add_values([float(entry[0])])
            return
        if not entry:
            return
        total, low, high, zero = entry[:4]
        for counts, offset, stored in ((self.positive, entry[4], entry[5]),
                                       (self.negative, *(entry[6:8] or (0, ())))):
            get = counts.get
            for index, count in enumerate(stored, offset):
                if count:
                    counts[index] = get(index, 0.0) + count
        self.zero += zero
        self.sum += total
        self.min = min(self.min, low)
        self.max = max(self.max, high)

    def add_values(self, values: list[float]) -> None:
        if not values:
            return
        floor = _MAPPING.min_possible
        for counts, keys in (
            (self.positive, _keys([v for v in values if v > floor])),
            (self.negative, _keys([-v for v in values if v < -floor])),
        ):
            for index, count in keys.items():
                counts[index] = counts.get(index, 0.0) + count
        self.zero += sum(1 for v in values if -floor <= v <= floor)
        self.sum += finite.total(values)
        self.min = min(self.min, min(values))
        self.max = max(self.max, max(values))

    def result(self) -> MetricSketch:
        sketch = BaseDDSketch(mapping=_STORED_MAPPING,
                              store=_dense_store(self.positive),
                              negative_store=_dense_store(self.negative),
                              zero_count=self.zero)
        return MetricSketch(sketch, total=self.sum, low=self.min, high=self.max)


_MAPPING = LogarithmicMapping(RELATIVE_ACCURACY)
_DEFAULT_MAPPING: bytes = DDSketchProto.to_proto(  # type: ignore[no-untyped-call]
    DDSketch(RELATIVE_ACCURACY)).mapping.SerializeToString()
_STORED_MAPPING: KeyMapping = KeyMappingProto.from_proto(  # type: ignore[no-untyped-call]
    DDSketchMessage.FromString(DDSketchProto.to_proto(  # type: ignore[no-untyped-call]
        DDSketch(RELATIVE_ACCURACY)).SerializeToString()).mapping)
"""The mapping as decoded from bytes (its gamma can differ from a fresh one's in the last
bit): sketches filled from bins use it, so they answer exactly like decoded ones."""


@dataclass(frozen=True, slots=True)
class PackedSketch:
    """A sketch in the compact form a run's record stores (MetricSketch.pack): `(value,)`
    for a sketch of one value, `()` for an empty one, else `(sum, min, max, zero count,
    first positive key, positive counts[, first negative key, negative counts])`. Counts are
    ints where whole (msgpack writes small ints in one byte)."""

    entry: tuple[Any, ...]


SketchData = bytes | PackedSketch
"""A stored sketch: the interchange bytes (MetricSketch.to_bytes) or the packed form."""


def _is_sustains(mapping: KeyMapping) -> bool:
    """Whether `mapping` is sustain's (a fresh one, or one decoded from bytes): its protobuf
    form is byte for byte the one merges and uploads are checked against."""
    form: bytes = KeyMappingProto.to_proto(mapping).SerializeToString()  # type: ignore[no-untyped-call]
    return form == _DEFAULT_MAPPING


def _number(count: float) -> float | int:
    """A count as an int when whole (so it packs small), else as it is."""
    return int(count) if float(count).is_integer() else count


def _packed_store(store: Any) -> tuple[int, tuple[float | int, ...]]:
    """(first key, counts up to the last non-empty bin) of a DenseStore; (0, ()) if empty."""
    bins: list[float] = store.bins
    nonzero = [i for i, count in enumerate(bins) if count]
    if not nonzero:
        return 0, ()
    first, last = nonzero[0], nonzero[-1]
    return store.offset + first, tuple(_number(c) for c in bins[first:last + 1])


def _trim(store: Any) -> None:
    """Cut a protobuf Store's contiguous counts to its first and last non-empty bin."""
    counts = list(store.contiguousBinCounts)
    nonzero = [i for i, count in enumerate(counts) if count]
    first, last = (nonzero[0], nonzero[-1]) if nonzero else (0, -1)
    del store.contiguousBinCounts[:]
    store.contiguousBinCounts.extend(counts[first:last + 1])
    store.contiguousBinIndexOffset = store.contiguousBinIndexOffset + first if nonzero else 0


_KEY_MIN = _MAPPING.key(_MAPPING.min_possible)
_KEY_MAX = _MAPPING.key(_MAPPING.max_possible)
"""The keys of the smallest and largest positive values the mapping tells apart."""


def _keys(values: list[float]) -> Counter[int]:
    """LogarithmicMapping.key of every value (the same float operations, inlined)."""
    log, ceil = math.log, math.ceil
    multiplier = _MAPPING._multiplier
    offset = _MAPPING._offset
    return Counter([int(ceil(log(v, 2) * multiplier) + offset) for v in values])


def _dense_store(bins: dict[int, float]) -> DenseStore:
    """A DenseStore holding `bins` (key -> count), filled in one go. ddsketch's own decoder
    adds each bin through `add`, which re-checks and may re-centre the range every time: that
    made up most of the cost of a drift report (one sketch per run, thousands of runs). The
    store's fields are set as `add` would leave them, without the spare bins `add` allocates
    (they hold zeros, which no rank, merge or serialisation reads differently)."""
    store = DenseStore()
    if bins:
        low, high = min(bins), max(bins)
        store.offset = low
        store.bins = [bins.get(key, 0.0) for key in range(low, high + 1)]
        store.min_key, store.max_key = low, high
        store.count = sum(store.bins)
    return store


def _add_store(bins: dict[int, float], store: object) -> None:
    offset: int = store.contiguousBinIndexOffset  # type: ignore[attr-defined]
    get = bins.get
    for index, count in enumerate(store.contiguousBinCounts, offset):  # type: ignore[attr-defined]
        if count:
            bins[index] = get(index, 0.0) + count
    for index, count in store.binCounts.items():  # type: ignore[attr-defined]
        bins[index] = get(index, 0.0) + count
