"""What `sustain probe` says when no request succeeded: the first failure as it happened and
a hint for the usual mistakes; nothing when a request succeeded."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sustain.probes.measure.sample import ErrorClass, Measurement, Sample
from sustain.service.cli.failure_hints import failure_lines

NOW = datetime(2026, 12, 5, tzinfo=UTC)


def sample(error: ErrorClass | None, status: int | None, detail: str | None = None) -> Sample:
    return Sample(seq=0, stage=0, t_sched_ms=None, t_send_ms=0.0, sent_at=NOW,
                  measurement=Measurement(
                      ttft_ms=None if error else 5.0, itl_ms=(), e2e_ms=9.0,
                      output_tokens=0 if error else 3, tokens_server_counted=True,
                      input_tokens=None, http_status=status, error_class=error,
                      error_detail=detail))


@pytest.mark.parametrize(("base", "error", "status", "hint"), [
    ("http://h:8000", ErrorClass.HTTP_4XX, 404, "try http://h:8000/v1 as the base URL"),
    ("http://h:8000/v1", ErrorClass.HTTP_4XX, 404, "does not serve model 'llama'"),
    ("http://h:8000/v1", ErrorClass.HTTP_4XX, 401, "--api-key-env VAR"),
    ("http://h:8000/v1", ErrorClass.HTTP_4XX, 403, "--api-key-env VAR"),
    ("http://h:8000/v1", ErrorClass.CONNECT, None, "nothing answered at h:8000"),
    ("http://h:8000/v1", ErrorClass.EGRESS_DENIED, None, "SUSTAIN_ALLOWED_TARGETS"),
])
def test_the_usual_mistakes_get_a_hint(base: str, error: ErrorClass, status: int | None,
                                       hint: str) -> None:
    lines = failure_lines([sample(error, status, "Not Found\nat all")], base, "llama")
    assert lines[0].startswith(f"no request succeeded ({error} 1); the first: {error} (")
    assert "\n" not in lines[0], "the server's words cannot forge a line"
    assert hint in lines[1]


def test_nothing_is_said_when_a_request_succeeded() -> None:
    assert failure_lines([sample(ErrorClass.HTTP_5XX, 500), sample(None, 200)],
                         "http://h/v1", "m") == []
    assert failure_lines([], "http://h/v1", "m") == []


def test_a_failure_without_a_known_cause_has_no_hint() -> None:
    (line,) = failure_lines([sample(ErrorClass.HTTP_5XX, 503, "busy")], "http://h/v1", "m")
    assert line.endswith("(HTTP 503) from http://h/v1: busy")
