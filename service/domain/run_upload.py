"""A run an agent measured, as it crosses HTTPS to the service: plain values (msgpack), and
back, checked field by field. The agent's samples keep their own monotonic timings
(t_send, TTFT, ITL and E2E in ms from the agent's clock) and the agent's wall time of each
send; the final record carries what the agent computed from them with the same code a
replica runs (summary, counts, sketches). Nothing here trusts the sender: a value of the
wrong type or beyond its bound is an UploadError naming the field, never a stored row."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from sustain.probes.load.clock import RunClock
from sustain.probes.measure.run_sketches import METRICS
from sustain.probes.measure.sample import Sample
from sustain.probes.measure.sketch import MetricSketch
from sustain.probes.runner import RunReport
from sustain.probes.workers.wire import row_sample, sample_row
from sustain.service.domain.finals import RunCounts, RunFinal

UPLOAD_STATUSES = frozenset({"succeeded", "failed", "cancelled", "abandoned"})
"""How a run an agent measured may end (it never uploads a run still going)."""
MAX_PART_SAMPLES = 5_000
"""Samples in one part of an upload: about 0.6 MB of msgpack at most."""
MAX_PARTS = 2_000
"""Parts of one upload (10 million samples: beyond any run the load limits allow)."""
MAX_SKETCHES = 4_096
MAX_SKETCH_BYTES = 1_000_000
MAX_SERIES = 64
MAX_SERIES_POINTS = 100_000
MAX_TEXT_CHARS = 4_000
EPOCH_MIN = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
EPOCH_MAX = datetime(2200, 1, 1, tzinfo=UTC).timestamp()
UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class UploadError(ValueError):
    """What is wrong with an upload, and where (`field`, dotted)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def encode_samples(samples: Sequence[Sample]) -> list[list[Any]]:
    """Each sample as the worker wire's row, with its wall time (unix seconds) last."""
    return [[*sample_row(s), s.sent_at.timestamp()] for s in samples]


def decode_samples(rows: object, field: str = "samples") -> list[Sample]:
    """The samples of one part; UploadError naming the first row that is not one."""
    if not isinstance(rows, list) or len(rows) > MAX_PART_SAMPLES:
        raise UploadError(field, f"a list of at most {MAX_PART_SAMPLES} sample rows")
    clock = RunClock(0, UNIX_EPOCH)
    out = []
    for index, row in enumerate(rows):
        try:
            sent_at = epoch_time(row[-1], f"{field}[{index}].sent_at")
            sample = row_sample(row[:-1], clock)
            out.append(replace(sample, sent_at=sent_at))
        except UploadError:
            raise
        except (ValueError, TypeError, IndexError, KeyError):
            raise UploadError(f"{field}[{index}]", "not a sample row") from None
        for name in ("t_send_ms", "e2e_ms"):
            value = getattr(sample, name) if name == "t_send_ms" else sample.measurement.e2e_ms
            if not math.isfinite(value):
                raise UploadError(f"{field}[{index}].{name}", "must be finite")
    return out


def epoch_time(value: object, field: str) -> datetime:
    if not isinstance(value, int | float) or isinstance(value, bool) \
            or not EPOCH_MIN <= value <= EPOCH_MAX:
        raise UploadError(field, "unix seconds between 2020 and 2200")
    return datetime.fromtimestamp(value, UTC)


def encode_final(final: RunFinal) -> dict[str, Any]:
    """A final record as plain values (its run id, probe and tick travel beside it)."""
    return {
        "status": final.status, "error": final.error, "summary": final.summary,
        "counts": None if final.counts is None else asdict(final.counts),
        "sketches": [[stage, metric, data] for (stage, metric), data
                     in sorted(final.sketches.items())],
        "server_series": {name: [list(p) for p in points]
                          for name, points in final.server_series.items()},
    }


def decode_final(data: object, run_id: int, probe_id: int, scheduled_for: datetime,
                 dropped: int) -> RunFinal:
    """The final record an agent sent, checked; UploadError naming what is wrong."""
    if not isinstance(data, dict):
        raise UploadError("final", "a map")
    status = data.get("status")
    if status not in UPLOAD_STATUSES:
        raise UploadError("final.status", f"one of {', '.join(sorted(UPLOAD_STATUSES))}")
    error = data.get("error")
    if error is not None and (not isinstance(error, str) or len(error) > MAX_TEXT_CHARS):
        raise UploadError("final.error", f"text of at most {MAX_TEXT_CHARS} characters")
    summary = data.get("summary")
    if summary is not None:
        try:
            summary = RunReport.model_validate(summary).model_dump(mode="json")
        except ValidationError as exc:
            where = ".".join(str(p) for p in exc.errors()[0]["loc"])
            raise UploadError(f"final.summary.{where}".rstrip("."),
                              exc.errors()[0]["msg"]) from None
    return RunFinal(run_id=run_id, probe_id=probe_id, scheduled_for=scheduled_for,
                    status=str(status), error=error, summary=summary,
                    counts=_counts(data.get("counts")), sketches=_sketches(data.get("sketches")),
                    samples_dropped=dropped,
                    server_series=_series(data.get("server_series")))


INT_COUNTS = ("attempts", "successes", "good", "output_tokens", "quality_checked",
              "quality_passed", "capacity")
FLOAT_COUNTS = ("measured_s", "capacity_tps")
REQUIRED_COUNTS = frozenset({"attempts", "successes", "output_tokens", "measured_s"})


def _counts(data: object) -> RunCounts | None:
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) - {*INT_COUNTS, *FLOAT_COUNTS}:
        raise UploadError("final.counts", "a map of the run's counts")
    values: dict[str, int | float | None] = {}
    for name in (*INT_COUNTS, *FLOAT_COUNTS):
        value = data.get(name)
        if value is None:
            if name in REQUIRED_COUNTS:
                raise UploadError(f"final.counts.{name}", "required")
            values[name] = None
            continue
        whole = name in INT_COUNTS
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float) \
                or not 0 <= value <= 2**53 or not math.isfinite(value):
            raise UploadError(f"final.counts.{name}", "a finite number, 0 or more" +
                              (" (whole)" if whole else ""))
        values[name] = value
    return RunCounts(**values)  # type: ignore[arg-type]


def _sketches(data: object) -> Mapping[tuple[int, str], bytes]:
    if data is None:
        return {}
    if not isinstance(data, list) or len(data) > MAX_SKETCHES:
        raise UploadError("final.sketches", f"a list of at most {MAX_SKETCHES}")
    out: dict[tuple[int, str], bytes] = {}
    for index, entry in enumerate(data):
        field = f"final.sketches[{index}]"
        if not isinstance(entry, list) or len(entry) != 3:
            raise UploadError(field, "[stage, metric, sketch]")
        stage, metric, blob = entry
        if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage < 10_000:
            raise UploadError(f"{field}.stage", "a stage number")
        if metric not in METRICS:
            raise UploadError(f"{field}.metric", "a sketched metric")
        if not isinstance(blob, bytes) or len(blob) > MAX_SKETCH_BYTES:
            raise UploadError(f"{field}.sketch", "a serialised sketch")
        try:
            MetricSketch.from_bytes(blob)
        except Exception:  # noqa: BLE001 - whatever the decoder raises, it is not a sketch
            raise UploadError(f"{field}.sketch", "a serialised sketch") from None
        out[(stage, str(metric))] = blob
    return out


def _series(data: object) -> Mapping[str, Sequence[tuple[float, float]]]:
    if data is None:
        return {}
    if not isinstance(data, dict) or len(data) > MAX_SERIES:
        raise UploadError("final.server_series", f"a map of at most {MAX_SERIES} series")
    out: dict[str, list[tuple[float, float]]] = {}
    for name, points in data.items():
        field = f"final.server_series.{str(name)[:64]}"
        if not isinstance(name, str) or not 0 < len(name) <= 200:
            raise UploadError(field, "a series name")
        if not isinstance(points, list) or len(points) > MAX_SERIES_POINTS:
            raise UploadError(field, f"at most {MAX_SERIES_POINTS} points")
        pairs = []
        for point in points:
            if not isinstance(point, list) or len(point) != 2 or not all(
                    isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                    for v in point):
                raise UploadError(field, "[unix seconds, value] points")
            epoch_time(point[0], field)
            pairs.append((float(point[0]), float(point[1])))
        out[name] = pairs
    return out
