"""`sustain probe` behind a careless proxy that echoes the request's headers, the key among
them, back in its 401: the failure line says what the server said, and the key is never
printed. The failures a newcomer meets first, each word for word, are
tests/e2e/test_cli_failure_walk.py's."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from tests.e2e.test_probe_command import probe
from tests.receivers import serving

KEY = "sk-e2e-echoed-key-0123456789abcdef"
KEY_VAR = "ECHO_PROXY_TEST_API_KEY"


def said(text: str) -> str:
    """Output as one line (the console wraps long lines at its width)."""
    return " ".join(text.split())


class _Hostile(BaseHTTPRequestHandler):
    """Any POST: 401 echoing the request's headers (the key among them) over several lines,
    as a careless proxy does."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        echoed = "".join(f"{name}: {value}\n" for name, value in self.headers.items())
        body = json.dumps({"error": {"message": "unauthorized; you sent:\n" + echoed}}
                          ).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - its signature
        pass


@pytest.fixture(scope="module")
def hostile_root() -> Iterator[str]:
    with serving(_Hostile) as root:
        yield root


def test_a_key_echoed_back_by_a_proxy_is_never_printed(hostile_root: str) -> None:
    env = {**os.environ, KEY_VAR: KEY}
    done = probe(f"{hostile_root}/echo/v1", "--model", "m", "--api-key-env", KEY_VAR, env=env)
    assert done.returncode == 1
    assert "the first: http_4xx (HTTP 401)" in said(done.stderr)
    assert "unauthorized; you sent: " in said(done.stderr)
    assert "[redacted]" in done.stderr
    for output in (done.stdout, done.stderr, said(done.stderr).replace(" ", "")):
        assert KEY not in output
        assert KEY[:12] not in output
