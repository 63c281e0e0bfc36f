"""Hints that fit the failure, and the server's words in the lines that report it: a name
that does not resolve, https:// to a plain-HTTP port, a certificate, an HTML page where the
API should be; `sustain probe`'s line and a run page's both name the request (`POST` and its
full URL) and say what the server said, once, without its status twice."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sustain.probes.measure.sample import ErrorClass, Measurement, Sample
from sustain.service.cli.failure_hints import failure_lines as probe_lines
from sustain.service.db.status import FirstFailure
from sustain.service.runs.hints import after_status, failure_hint, request_target
from sustain.service.web.report import failure_lines as page_lines

BASE = "https://gpu-1.internal:8000/v1"
HTML = "HTTP 200 text/html, not an API answer: Sign in - Corp SSO"
NOW = datetime(2026, 12, 5, tzinfo=UTC)


@pytest.mark.parametrize(("error", "status", "detail", "hint"), [
    (ErrorClass.DNS, None, "[Errno -2] Name or service not known",
     "DNS: the name gpu-1.internal does not resolve"),
    (ErrorClass.TLS, None, "WRONG_VERSION_NUMBER",
     "the server speaks plain HTTP? try http://gpu-1.internal:8000/v1"),
    (ErrorClass.TLS, None, None, "the server speaks plain HTTP? try http://gpu-1.internal"),
    (ErrorClass.TLS, None, "CERTIFICATE_VERIFY_FAILED",
     "the TLS certificate of gpu-1.internal:8000 was not accepted"),
    (ErrorClass.PROTOCOL, 200, HTML, "a login page or a proxy in front of the server?"),
    (ErrorClass.CONNECT, None, "Connection refused",
     "nothing answered at gpu-1.internal:8000"),
])
def test_each_failure_gets_the_hint_that_fits_it(error: ErrorClass, status: int | None,
                                                 detail: str | None, hint: str) -> None:
    said = failure_hint(str(error), status, BASE, "llama", detail=detail)
    assert said is not None
    assert hint in said


def test_a_protocol_error_that_is_no_html_page_gets_no_login_hint() -> None:
    assert failure_hint("protocol", 200, BASE, "m", detail="malformed JSON response") is None
    assert failure_hint("tls", None, "http://h:1/v1", "m") == "the TLS handshake with h:1 failed"


def test_the_request_is_named_by_its_method_and_full_url() -> None:
    assert request_target("http://h:8000/v1/", "openai-chat") == \
        "POST http://h:8000/v1/chat/completions"
    assert request_target("http://h:8000/v1", "openai-embeddings") == \
        "POST http://h:8000/v1/embeddings"
    assert request_target("http://h:8000/health", "http", "GET") == "GET http://h:8000/health"
    assert request_target("http://h:8000", "http") == "http://h:8000"
    assert request_target("http://h:8000/v1", "no-such-kind") == "http://h:8000/v1"
    assert request_target(None, "openai-chat") is None


def test_the_status_is_said_once() -> None:
    assert after_status("HTTP 404: The model `x` does not exist.", 404) == \
        "The model `x` does not exist."
    assert after_status("HTTP 404", 404) == ""
    assert after_status(HTML, 200) == HTML, "the content type is the news"
    assert after_status("HTTP 4040", 404) == "HTTP 4040"
    assert after_status("line\nforged", None) == "line forged"


def failed(detail: str, status: int | None = 404) -> Sample:
    return Sample(seq=0, stage=0, t_sched_ms=None, t_send_ms=0.0, sent_at=NOW,
                  measurement=Measurement(
                      ttft_ms=None, itl_ms=(), e2e_ms=9.0, output_tokens=0,
                      tokens_server_counted=False, input_tokens=None, http_status=status,
                      error_class=ErrorClass.HTTP_4XX, error_detail=detail))


def test_the_probe_line_names_the_request_and_the_servers_words() -> None:
    lines = probe_lines([failed("HTTP 404: The model `gpt-4o` does not exist.")],
                        "http://h:8000/v1", "gpt-4o", "POST http://h:8000/v1/chat/completions")
    assert lines[0] == ("no request succeeded (http_4xx 1); the first: http_4xx (HTTP 404) "
                        "from POST http://h:8000/v1/chat/completions: The model `gpt-4o` "
                        "does not exist.")
    assert lines[1] == ("hint: the server does not serve model 'gpt-4o': check --model (GET "
                        "http://h:8000/v1/models lists those it serves)")
    other = probe_lines([failed("HTTP 404: no route /v1/chat")], "http://h:8000/v1", "m")
    assert "no such route, or does not serve model 'm'" in other[1]


def test_the_run_page_says_the_servers_words_when_it_has_them() -> None:
    report = {"attempts": 4, "errors": {"http_4xx": 4}}
    first = FirstFailure("http_4xx", 404, 4)
    lines = page_lines("completed", None, report, first, "http://h:8000/v1", "openai-chat",
                       "gpt-4o", detail="HTTP 404: The model `gpt-4o` does not exist.")
    assert lines[0] == ("4 of 4 requests failed (http_4xx 4); the first: http_4xx (HTTP 404) "
                        "from POST http://h:8000/v1/chat/completions: The model `gpt-4o` "
                        "does not exist.")
    html = page_lines("completed", None, {"attempts": 1, "errors": {"protocol": 1}},
                      FirstFailure("protocol", 200, 1), "http://h:8000/v1", "openai-chat",
                      detail=HTML)
    assert html[0].endswith(f"(HTTP 200) from POST http://h:8000/v1/chat/completions: {HTML}.")
    assert "login page or a proxy" in html[1]
