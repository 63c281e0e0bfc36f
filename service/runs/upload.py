"""A run an agent measured, as it crosses HTTPS to the service: plain values (msgpack), and
back, checked field by field. The agent's samples keep their own monotonic timings
(t_send, TTFT, ITL and E2E in ms from the agent's clock) and the agent's wall time of each
send; the final record carries what the agent computed from them with the same code a
replica runs (summary, counts, sketches). Nothing here trusts the sender: a value of the
wrong type or beyond its bound is an UploadError naming the field, never a stored row.

What bounds an upload here (the service's settings come in as UploadLimits):
- every timing of a sample (t_sched, t_send, TTFT, each ITL gap, E2E, tool call, RAG stage,
  HTTP phase) is finite, at least 0 and at most the run's longest length (SUSTAIN_MAX_RUN_S
  plus the budget's grace), in ms; every count (tokens, items) is a whole number from 0 to
  what its column holds; a trace id is 32 lower-case hex digits; a sample carries at most
  SUSTAIN_AGENT_UPLOAD_MAX_ITL_VALUES ITL gaps;
- every sample was sent inside the run's window (from shortly before it started to its
  longest length after), and the run started within CLAIM_LATE_S of its tick, so one upload
  touches a day or two of `samples` partitions, never one per day from 2020 to 2200;
- the final record's summary is a RunReport with no key the schema does not name, and its
  names that become Prometheus labels (RAG stages, error classes, image sizes, currency)
  come from closed sets (sustain.service.runs.label_sets); the server series names are
  checked against the endpoint by the caller (`server_series_names`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ValidationError

from sustain.probes.client.trace_context import is_trace_id
from sustain.probes.load.clock import RunClock
from sustain.probes.measure.run_sketches import METRICS
from sustain.probes.measure.sample import JOB_PHASES, Sample
from sustain.probes.measure.sketch import MetricSketch
from sustain.probes.run_result import RunReport
from sustain.probes.workers.wire import OLD_ROW_FIELDS, row_sample, sample_row
from sustain.probes.workers.wire import ROW_FIELDS as WIRE_FIELDS
from sustain.service.runs.finals import RunCounts, RunFinal
from sustain.service.runs.label_sets import (
    CURRENCY,
    EFFICIENCY_FIGURES,
    ERROR_CLASSES,
    IMAGE_SIZE,
    RAG_STAGES,
    SAMPLE_STAGES,
)

UPLOAD_STATUSES = frozenset({"succeeded", "failed", "cancelled", "abandoned", "interrupted"})
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
MAX_SAMPLE_STAGES = 16
"""Stage times one RAG sample may carry (it has five)."""
MAX_WHOLE = 2**31 - 1
"""The largest count, sequence number or turn a sample may carry: what an `integer` column
holds."""
MAX_STAGE = 9_999
MAX_HTTP_STATUS = 999
MAX_AUDIO_S = 10_000_000.0
"""Seconds of audio one transcription request may have sent (about 116 days)."""
CLOCK_SLACK_S = 600.0
"""How far an agent's clock may be from the service's (the tick is the service's time, the
run's start and its samples' the agent's), in seconds."""
START_LATE_S = 3600.0
"""How long after its tick a run may start: an agent claims a tick up to an hour late
(routes/agent.py CLAIM_LATE_S)."""
EPOCH_MIN = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
EPOCH_MAX = datetime(2200, 1, 1, tzinfo=UTC).timestamp()
UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ROW_FIELDS = WIRE_FIELDS + 1
"""The fields of a sample row: the worker wire's (probes.workers.wire.sample_row), then
the wall time of its send."""
OLD_UPLOAD_FIELDS = OLD_ROW_FIELDS + 1
"""The fields of a sample row an agent of the previous release sends (the wire's row before
`streamed`, then the wall time): still accepted, the fields it lacks read as None."""


class UploadError(ValueError):
    """What is wrong with an upload, and where (`field`, dotted)."""

    upload_id: uuid.UUID | None = None
    """The upload it is about, once that much of it was read (its waiting parts go)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class UploadLimits:
    """The service's bounds on what one upload may carry (from its settings)."""

    max_itl_values: int = 65_536
    """ITL gaps one sample may carry (SUSTAIN_AGENT_UPLOAD_MAX_ITL_VALUES)."""
    run_s: float = 3600.0 + 120.0
    """The longest a run may take, in seconds: SUSTAIN_MAX_RUN_S plus the run
    budget's grace (policy.limits.BUDGET_GRACE_S). Every timing is at most this (in ms)."""
    max_samples: int = 1_000_000
    """Samples one upload may carry: SUSTAIN_MAX_RUN_REQUESTS, the most a run sends (its
    budget stops it there). What assembling one upload holds is bounded by it."""

    @property
    def run_ms(self) -> float:
        return self.run_s * 1000.0


@dataclass(frozen=True, slots=True)
class Window:
    """When a run's samples may have been sent (wall time, UTC)."""

    earliest: datetime
    latest: datetime


def run_window(tick: datetime, started_at: datetime, limits: UploadLimits) -> Window:
    """The window a run's samples must lie in: from CLOCK_SLACK_S before its start to its
    longest length after (plus the slack); UploadError (`started_at`) for a start that is
    not within START_LATE_S of its tick."""
    slack = timedelta(seconds=CLOCK_SLACK_S)
    if not tick - slack <= started_at <= tick + timedelta(seconds=START_LATE_S) + slack:
        raise UploadError("started_at", f"within {START_LATE_S:g} s after the tick "
                          f"(give or take {CLOCK_SLACK_S:g} s of clock difference)")
    return Window(started_at - slack, started_at + timedelta(seconds=limits.run_s) + slack)


def encode_samples(samples: Sequence[Sample]) -> list[list[Any]]:
    """Each sample as the worker wire's row, with its wall time (unix seconds) last."""
    return [[*sample_row(s), s.sent_at.timestamp()] for s in samples]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_timing(value: object, field: str, limit_ms: float) -> None:
    if not _number(value) or not 0 <= value <= limit_ms:  # type: ignore[operator]
        raise UploadError(field, f"a time in ms from 0 to {limit_ms:g} (the longest run)")


def _check_whole(value: object, field: str, high: int = MAX_WHOLE) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise UploadError(field, f"a whole number from 0 to {high}")


TIMINGS = {2: "t_sched_ms", 3: "t_send_ms", 4: "ttft_ms", 6: "e2e_ms", 14: "tool_call_ms",
           26: "ttfo_ms", 31: "dns_ms", 32: "connect_ms", 33: "tls_ms", 34: "ttfb_ms"}
"""Row index -> name of each single timing of a sample row (ms)."""
REQUIRED_TIMINGS = frozenset({3, 6})
COUNTS = {7: "output_tokens", 9: "input_tokens", 13: "cached_tokens", 19: "items",
          24: "prompt_tokens_requested", 27: "reasoning_tokens", 29: "input_chars"}
REQUIRED_COUNTS_OF_ROW = frozenset({7})
TEXTS = {12: "error_detail", 15: "conversation", 21: "image_size"}
FLAGS = {25: "streamed", 28: "reasoning_server_counted", 35: "connection_reused"}
"""Row index -> name of each true/false/null value (absent from a row of an earlier
release)."""
PHASES = 30
"""Row index of a job's `phases_ms`."""
TRACE_ID = 36
"""Row index of the request's W3C `trace_id` (32 lower-case hex digits, or null)."""


def check_row(row: object, field: str, limits: UploadLimits) -> None:
    """Each number of a sample row within its bound; UploadError naming the first that is
    not (`samples[3].e2e_ms`)."""
    if not isinstance(row, list) or not OLD_UPLOAD_FIELDS <= len(row) <= ROW_FIELDS:
        raise UploadError(field, f"a sample row of {OLD_UPLOAD_FIELDS} to {ROW_FIELDS} "
                          "values")
    limit_ms = limits.run_ms
    _check_whole(row[0], f"{field}.seq")
    _check_whole(row[1], f"{field}.stage", MAX_STAGE)
    size = len(row) - 1  # the wall time is last
    for index, name in TIMINGS.items():
        if index < size and (row[index] is not None or index in REQUIRED_TIMINGS):
            _check_timing(row[index], f"{field}.{name}", limit_ms)
    for index, name in COUNTS.items():
        if index < size and (row[index] is not None or index in REQUIRED_COUNTS_OF_ROW):
            _check_whole(row[index], f"{field}.{name}")
    itl = row[5]
    if not isinstance(itl, list) or len(itl) > limits.max_itl_values:
        raise UploadError(f"{field}.itl_ms", f"a list of at most {limits.max_itl_values} "
                          "inter-token latencies (SUSTAIN_AGENT_UPLOAD_MAX_ITL_VALUES)")
    for gap in itl:
        if not _number(gap) or not 0 <= gap <= limit_ms:
            _check_timing(gap, f"{field}.itl_ms", limit_ms)
    if row[10] is not None:
        _check_whole(row[10], f"{field}.http_status", MAX_HTTP_STATUS)
    if row[16] is not None:
        _check_whole(row[16], f"{field}.turn")
    for index, name in FLAGS.items():
        if index < size and row[index] is not None and not isinstance(row[index], bool):
            raise UploadError(f"{field}.{name}", "true, false or null")
    phases = row[PHASES] if size > PHASES else None
    if phases is not None:
        if not isinstance(phases, list) or len(phases) > len(JOB_PHASES):
            raise UploadError(f"{field}.phases_ms", f"at most {len(JOB_PHASES)} phases")
        for phase in phases:
            if not isinstance(phase, list) or len(phase) != 2 or phase[0] not in JOB_PHASES:
                raise UploadError(f"{field}.phases_ms", "[phase, ms] pairs of a job's phases "
                                  f"({', '.join(JOB_PHASES)})")
            _check_timing(phase[1], f"{field}.phases_ms", limit_ms)
    if row[20] is not None and (not _number(row[20]) or not 0 <= row[20] <= MAX_AUDIO_S):
        raise UploadError(f"{field}.audio_s", f"seconds of audio from 0 to {MAX_AUDIO_S:g}")
    for index, name in TEXTS.items():
        if row[index] is not None and not isinstance(row[index], str):
            raise UploadError(f"{field}.{name}", "text")
    if size > TRACE_ID and row[TRACE_ID] is not None and not is_trace_id(row[TRACE_ID]):
        raise UploadError(f"{field}.trace_id", "32 lower-case hex digits, not all zero")
    stages = row[22]
    if stages is not None:
        if not isinstance(stages, list) or len(stages) > MAX_SAMPLE_STAGES:
            raise UploadError(f"{field}.stages_ms", f"at most {MAX_SAMPLE_STAGES} stages")
        for stage in stages:
            if not isinstance(stage, list) or len(stage) != 2 \
                    or stage[0] not in SAMPLE_STAGES:
                raise UploadError(f"{field}.stages_ms", "[stage, ms] pairs of the RAG stages "
                                  f"({', '.join(sorted(SAMPLE_STAGES))})")
            _check_timing(stage[1], f"{field}.stages_ms", limit_ms)


def decode_samples(rows: object, limits: UploadLimits, window: Window,
                   field: str = "samples") -> list[Sample]:
    """The samples of one part; UploadError naming the first row (and field) that is not
    one, or not within its bounds."""
    if not isinstance(rows, list) or len(rows) > MAX_PART_SAMPLES:
        raise UploadError(field, f"a list of at most {MAX_PART_SAMPLES} sample rows")
    clock = RunClock(0, UNIX_EPOCH)
    out = []
    for index, row in enumerate(rows):
        where = f"{field}[{index}]"
        check_row(row, where, limits)
        sent_at = epoch_time(row[-1], f"{where}.sent_at")
        if not window.earliest <= sent_at <= window.latest:
            raise UploadError(f"{where}.sent_at", "outside the run's window "
                              f"({window.earliest.isoformat()} to {window.latest.isoformat()})")
        try:
            sample = row_sample(row[:-1], clock)
        except (ValueError, TypeError, IndexError, KeyError):
            raise UploadError(where, "not a sample row") from None
        out.append(replace(sample, sent_at=sent_at))
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
            report = RunReport.model_validate(summary)
        except ValidationError as exc:
            where = ".".join(str(p) for p in exc.errors()[0]["loc"])
            raise UploadError(f"final.summary.{where}".rstrip("."),
                              exc.errors()[0]["msg"]) from None
        if (unknown := unknown_key(report, summary, "final.summary")) is not None:
            raise UploadError(unknown, "not a field of a run's summary")
        check_summary_names(report.model_dump(mode="json"))
        summary = report.model_dump(mode="json")
    return RunFinal(run_id=run_id, probe_id=probe_id, scheduled_for=scheduled_for,
                    status=str(status), error=error, summary=summary,
                    counts=_counts(data.get("counts")), sketches=_sketches(data.get("sketches")),
                    samples_dropped=dropped,
                    server_series=_series(data.get("server_series")))


def unknown_key(model: BaseModel, data: object, path: str) -> str | None:
    """The first key of `data` (what `model` was validated from) that its schema does not
    name, dotted from `path`, or None. Pydantic drops such keys silently (the models allow
    extras so a local run's report can grow); an upload is held to the schema exactly."""
    if not isinstance(data, dict):
        return None
    # a computed field is a deprecated name the model still answers to (probes/renamed.py)
    fields = type(model).model_fields.keys() | type(model).model_computed_fields.keys()
    for key, value in data.items():
        if key not in fields:
            return f"{path}.{str(key)[:64]}"
        if (found := _unknown_in(getattr(model, key), value, f"{path}.{key}")) is not None:
            return found
    return None


def _unknown_in(validated: object, data: object, path: str) -> str | None:
    if isinstance(validated, BaseModel):
        return unknown_key(validated, data, path)
    if isinstance(validated, list) and isinstance(data, list):
        for index, (item, raw) in enumerate(zip(validated, data, strict=False)):
            if (found := _unknown_in(item, raw, f"{path}[{index}]")) is not None:
                return found
    if isinstance(validated, dict) and isinstance(data, dict):
        for key, item in validated.items():
            if (found := _unknown_in(item, data.get(key), f"{path}.{key}")) is not None:
                return found
    return None


def _summaries(summary: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The run's summary and each stage's, with where each sits."""
    out: list[tuple[str, Mapping[str, Any]]] = [("final.summary", summary)]
    for index, stage in enumerate(summary.get("stages") or []):
        out.append((f"final.summary.stages[{index}].summary", stage["summary"]))
    return out


def check_summary_names(summary: Mapping[str, Any]) -> None:
    """The names in a validated summary (dumped) that become label values or keys readers
    rely on come from their closed sets; UploadError naming the first that does not."""
    for where, part in _summaries(summary):
        for key in part.get("rag_stages_ms") or {}:
            if key not in RAG_STAGES:
                raise UploadError(f"{where}.rag_stages_ms.{str(key)[:64]}",
                                  f"one of {', '.join(sorted(RAG_STAGES))}")
        for key in part.get("job_phases_ms") or {}:
            if key not in JOB_PHASES:
                raise UploadError(f"{where}.job_phases_ms.{str(key)[:64]}",
                                  f"one of {', '.join(JOB_PHASES)}")
        for key in part.get("errors") or {}:
            if key not in ERROR_CLASSES:
                raise UploadError(f"{where}.errors.{str(key)[:64]}", "an error class")
        for key in part.get("ttft_by_image_size") or {}:
            if not IMAGE_SIZE.match(key):
                raise UploadError(f"{where}.ttft_by_image_size.{str(key)[:64]}",
                                  "an image size, WIDTHxHEIGHT")
        efficiency = part.get("efficiency") or {}
        if efficiency and not CURRENCY.match(str(efficiency.get("currency"))):
            raise UploadError(f"{where}.efficiency.currency", "three capital letters")
        for key in efficiency:  # the schema names them all; kept in step with label_sets
            if key not in EFFICIENCY_FIGURES and key not in ("currency", "power_source"):
                raise UploadError(f"{where}.efficiency.{key}", "an efficiency figure")


def server_series_names(final: RunFinal) -> dict[str, str]:
    """Every server series name a final record carries (its summaries' `server_metrics` and
    its `server_series`), each with where it sits: the caller checks them against the
    endpoint's (label_sets.server_series)."""
    names: dict[str, str] = {}
    for name in final.server_series:
        names.setdefault(name, f"final.server_series.{name[:64]}")
    if final.summary is not None:
        for where, part in _summaries(final.summary):
            for name in part.get("server_metrics") or {}:
                names.setdefault(name, f"{where}.server_metrics.{str(name)[:64]}")
    return names


def currencies(final: RunFinal) -> dict[str, str]:
    """The currencies a final record's summaries price in, each with where it sits."""
    out: dict[str, str] = {}
    if final.summary is not None:
        for where, part in _summaries(final.summary):
            if currency := (part.get("efficiency") or {}).get("currency"):
                out.setdefault(str(currency), f"{where}.efficiency.currency")
    return out


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
            sketch = MetricSketch.from_untrusted(blob)
        except Exception:  # noqa: BLE001 - whatever the decoder raises, it is not a sketch
            raise UploadError(f"{field}.sketch", "a serialised sketch") from None
        # Kept as decoded, not as sent: the merges of rollups fill every bin between a
        # sketch's lowest and highest key, so only what the checks above saw is stored.
        out[(stage, str(metric))] = sketch.to_bytes()
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
