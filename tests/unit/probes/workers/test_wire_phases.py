"""A sample's HTTP phases and trace id cross the worker pipe and an agent's upload, and rows
of the releases before them still decode (their phases read as None)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack
import pytest

from sustain.probes.load.clock import RunClock
from sustain.probes.measure.sample import Measurement, Sample
from sustain.probes.workers import wire
from sustain.service.runs.upload import (
    UploadError,
    UploadLimits,
    Window,
    check_row,
    decode_samples,
    encode_samples,
)

CLOCK = RunClock(0, datetime(2026, 12, 6, 12, 0, tzinfo=UTC))
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def sample(**phases: object) -> Sample:
    return Sample(seq=3, stage=0, t_sched_ms=None, t_send_ms=1.0, sent_at=CLOCK.wall(1.0),
                  measurement=Measurement(ttft_ms=60.0, itl_ms=(1.0,), e2e_ms=80.0,
                                          output_tokens=2, tokens_server_counted=True,
                                          input_tokens=None, http_status=200,
                                          error_class=None, streamed=True,
                                          **phases))  # type: ignore[arg-type]


NEW_CONNECTION = {"dns_ms": 0.75, "connect_ms": 0.25, "tls_ms": 3.5, "ttfb_ms": 52.125,
                  "connection_reused": False, "trace_id": TRACE_ID}
REUSED = {"ttfb_ms": 50.5, "connection_reused": True, "trace_id": TRACE_ID}


@pytest.mark.parametrize("phases", [NEW_CONNECTION, REUSED, {}], ids=["new", "reused", "none"])
def test_phases_and_trace_id_survive_the_pipe(phases: dict[str, object]) -> None:
    measured = sample(**phases)
    decoder = wire.unpacker()
    decoder.feed(wire.pack({"op": "samples", "rows": [wire.sample_row(measured)]}))
    (message,) = list(decoder)
    assert wire.row_sample(message["rows"][0], CLOCK) == measured


def test_a_row_of_the_release_before_phases_decodes_with_none_for_them() -> None:
    row = list(wire.sample_row(sample(**NEW_CONNECTION)))
    before = row[:31]  # up to a job's phases_ms: the release before HTTP phases
    decoded = wire.row_sample(before, CLOCK).measurement
    assert (decoded.dns_ms, decoded.connect_ms, decoded.tls_ms, decoded.ttfb_ms,
            decoded.connection_reused, decoded.trace_id) == (None,) * 6
    assert decoded.ttft_ms == 60.0
    assert wire.row_sample(row, CLOCK).measurement.trace_id == TRACE_ID


def uploaded(measured: Sample) -> list[list[Any]]:
    """The sample's upload rows as the service reads them: msgpack lists."""
    rows: list[list[Any]] = msgpack.unpackb(msgpack.packb(encode_samples([measured])))
    return rows


def _window() -> Window:
    sent = CLOCK.wall(1.0)
    return Window(sent - timedelta(minutes=1), sent + timedelta(minutes=1))


def test_an_agent_s_upload_carries_the_phases_and_one_of_the_release_before_still_decodes(
        ) -> None:
    rows = uploaded(sample(**NEW_CONNECTION))
    (decoded,) = decode_samples(rows, UploadLimits(), _window())
    assert decoded.measurement.connect_ms == 0.25
    assert decoded.measurement.trace_id == TRACE_ID
    old = [[*rows[0][:31], rows[0][-1]]]  # the release before: no phases, then the wall time
    (earlier,) = decode_samples(old, UploadLimits(), _window())
    assert earlier.measurement.ttfb_ms is None
    assert earlier.measurement.trace_id is None


@pytest.mark.parametrize(("index", "value", "field"), [
    (31, -1.0, "dns_ms"), (32, float("nan"), "connect_ms"), (33, "3", "tls_ms"),
    (34, 1e12, "ttfb_ms"), (35, 1, "connection_reused"), (36, "ABC", "trace_id"),
    (36, "0" * 32, "trace_id"), (36, 7, "trace_id")])
def test_an_uploaded_phase_or_trace_id_out_of_its_bounds_is_refused_naming_it(
        index: int, value: object, field: str) -> None:
    row = uploaded(sample(**NEW_CONNECTION))[0]
    check_row(row, "samples[0]", UploadLimits())
    row[index] = value
    with pytest.raises(UploadError) as refused:
        check_row(row, "samples[0]", UploadLimits())
    assert refused.value.field == f"samples[0].{field}"
