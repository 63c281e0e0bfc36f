"""`sustain probe` against what a newcomer meets, as a user runs it: a model the server does not
serve (the simulator strict about its model, as the demo's are), https:// to a plain-HTTP
port, a URL typed without its scheme, a login page where the API should be, and a proxy that
echoes the key back. Each failure line names the request (`POST` and its full URL) and says
what the server said; the hint fits the failure; the key is never printed."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.e2e.test_probe_command import probe
from tests.processes import SustainProcess, free_port

KEY = "sk-e2e-echoed-key-0123456789abcdef"
KEY_VAR = "ECHO_PROXY_TEST_API_KEY"
LOGIN_PAGE = (b"<!DOCTYPE html><html><head><title>Sign in - Corp SSO</title></head>"
              b"<body><form action='/login'><input name='user'></form></body></html>")


def said(text: str) -> str:
    """Output as one line (the console wraps long lines at its width)."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def strict_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`sustain simulate --strict-model` (its model `sim-model`); its API root."""
    port = free_port()
    log = tmp_path_factory.mktemp("strict") / "simulator.log"
    with SustainProcess(["simulate", "--port", str(port), "--strict-model", "--ttft-ms", "1",
                         "--itl-ms", "0", "--output-tokens", "4"], log) as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models")
        yield f"http://127.0.0.1:{port}/v1"


class _Hostile(BaseHTTPRequestHandler):
    """/login/...: a 200 HTML login page; anything else: 401 echoing the request's headers
    (the key among them) over several lines, as a careless proxy does."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.startswith("/login/"):
            status, kind, body = 200, "text/html; charset=utf-8", LOGIN_PAGE
        else:
            echoed = "".join(f"{name}: {value}\n" for name, value in self.headers.items())
            status, kind = 401, "application/json"
            body = json.dumps({"error": {"message": "unauthorized; you sent:\n" + echoed}}
                              ).encode()
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - its signature
        pass


@pytest.fixture(scope="module")
def hostile_root() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_wrong_model_is_named_in_the_servers_words_with_the_full_url(
        strict_url: str, tmp_path: Path) -> None:
    page = tmp_path / "run.html"
    done = probe(strict_url, "--model", "gpt-4o", "--html", str(page))
    assert done.returncode == 1, done.stderr
    assert (f"the first: http_4xx (HTTP 404) from POST {strict_url}/chat/completions: "
            "The model `gpt-4o` does not exist.") in said(done.stderr)
    assert (f"hint: the server does not serve model 'gpt-4o': check --model (GET "
            f"{strict_url}/models lists those it serves)") in said(done.stderr)
    html = page.read_text()
    assert "The model `gpt-4o` does not exist." in html
    assert f"from POST {strict_url}/chat/completions" in html
    served = probe(strict_url, "--model", "sim-model")
    assert served.returncode == 0, served.stderr


def test_https_to_a_plain_http_port_says_to_try_http(strict_url: str) -> None:
    done = probe(strict_url.replace("http://", "https://"), "--model", "sim-model")
    assert done.returncode == 1
    host = strict_url.removeprefix("http://").removesuffix("/v1")
    assert "the first: tls (no HTTP answer)" in said(done.stderr)
    assert (f"hint: the TLS handshake with {host} failed: the server speaks plain HTTP? "
            f"try {strict_url}") in said(done.stderr)


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "vllm:8000/v1", "localhost"])
def test_a_url_without_its_scheme_is_refused_saying_so(url: str) -> None:
    done = probe(url, "--model", "m")
    assert done.returncode == 2
    assert "BASE_URL: must be a URL with a scheme, e.g. http://host:8000/v1" in done.stderr
    assert "relative URL" not in done.stderr
    assert "Traceback" not in done.stderr


def test_a_login_page_where_the_api_should_be_is_called_one(hostile_root: str) -> None:
    base = f"{hostile_root}/login/v1"
    done = probe(base, "--model", "m")
    assert done.returncode == 1
    assert (f"the first: protocol (HTTP 200) from POST {base}/chat/completions: HTTP 200 "
            "text/html, not an API answer: Sign in - Corp SSO") in said(done.stderr)
    assert "hint: the server answered with an HTML page (text/html), not the API: a login " \
        "page or a proxy" in said(done.stderr)


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
