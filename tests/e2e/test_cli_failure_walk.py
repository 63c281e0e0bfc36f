"""A newcomer's first hour with the command line, in the order they meet its failures: a model
the server does not serve (a simulator started as the demo starts its own, strict about its
model as vLLM is), https:// to a plain-HTTP port, a name that does not resolve, a login page
where the API should be, a URL typed without its scheme, a port nothing listens on, and
`sustain serve` without SUSTAIN_ADMIN_KEY (then `sustain keys list` with no key yet). Each
`sustain probe` is run as a user runs it, and its exit status and its last lines on stderr
are checked word for word: the request (`POST` and its full URL), what the server (or the
resolver, or the TLS library) said, and the hint. Where the words are the operating system's
(`[Errno -2] Name or service not known`), the line is checked around them. The whole list is
here, once; tests/e2e/test_probe_failures.py keeps what a careless proxy does with a key."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest

from sustain.service.db.first_key import NO_KEY_REMEDIES
from sustain.service.demo.objects import DEMO_MODEL, DEMO_SIMULATOR, probe_line
from sustain.service.demo.simulators import simulate_args
from tests.e2e.test_keys_command import keys
from tests.e2e.test_probe_command import probe
from tests.processes import SustainProcess, free_port, wait_until
from tests.receivers import serving

THEIR_WORDS = "<their words>"
"""In an expected line: the words of the resolver or the TLS library, which differ from one
system to the next (any non-empty text there)."""
LOGIN_PAGE = (b"<!DOCTYPE html><html><head><title>Sign in - Corp SSO</title></head>"
              b"<body><form action='/login'><input name='user'></form></body></html>")
UNRESOLVABLE = "no-such-host.invalid"
""".invalid never resolves (RFC 2606), with or without a network."""
FORM = {"content-type": "application/x-www-form-urlencoded"}
START_TIMEOUT_S = 120.0
"""Only a hang guard: how long a simulator or the service may take to answer (a busy machine
starts a Python process, and migrates a fresh database, slowly)."""


def ends_saying(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    """stderr's last lines are `expected`, word for word (THEIR_WORDS standing for any text),
    and no traceback came before them."""
    lines = done.stderr.splitlines()
    assert len(lines) >= len(expected), done.stderr
    for line, want in zip(lines[-len(expected):], expected, strict=True):
        pattern = ".+".join(re.escape(part) for part in want.split(THEIR_WORDS))
        assert re.fullmatch(pattern, line), f"\n  said: {line!r}\nwanted: {want!r}"
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A simulator started with the flags the demo starts its own with (simulate_args of
    DEMO_SIMULATOR: strict about its model); its API root. (That the demo's simulators
    refuse another model is tests/e2e/test_demo.py's.)"""
    port = free_port()
    log = tmp_path_factory.mktemp("demo-simulator") / "simulator.log"
    with SustainProcess(["simulate", "--port", str(port), *simulate_args(DEMO_SIMULATOR)],
                        log) as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models", timeout_s=START_TIMEOUT_S)
        yield f"http://127.0.0.1:{port}/v1"


class _LoginPage(BaseHTTPRequestHandler):
    """Any POST: 200 and an HTML sign-in page, as an SSO proxy in front of an API answers."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(LOGIN_PAGE)))
        self.end_headers()
        self.wfile.write(LOGIN_PAGE)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - its signature
        pass


@pytest.fixture(scope="module")
def login_root() -> Iterator[str]:
    with serving(_LoginPage) as root:
        yield root


def test_1_a_model_the_demo_does_not_serve_is_refused_in_the_servers_words(
        demo_url: str, tmp_path: Path) -> None:
    page = tmp_path / "run.html"
    done = probe(demo_url, "--model", "gpt-4o", "--html", str(page))
    assert done.returncode == 1, done.stderr
    ends_saying(
        done,
        "no request succeeded (http_4xx 1); the first: http_4xx (HTTP 404) from POST "
        f"{demo_url}/chat/completions: The model `gpt-4o` does not exist.",
        f"hint: the server does not serve model 'gpt-4o': check --model (GET {demo_url}/models "
        "lists those it serves)")
    html = page.read_text()
    assert "The model `gpt-4o` does not exist." in html
    assert f"from POST {demo_url}/chat/completions" in html


def test_1b_the_line_the_demo_banner_gives_succeeds_against_its_simulator(demo_url: str) -> None:
    """The demo's own model is the one its strict simulator serves: the banner's line (the
    demo probe's load) succeeds, and the TTFT it measures is at least what the banner states
    the simulator is set to."""
    line = shlex.split(probe_line(demo_url))
    assert line[:2] == ["sustain", "probe"]
    assert line[line.index("--model") + 1] == DEMO_MODEL
    done = probe(*line[2:], "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["availability"] == 1.0
    assert report["requests"] == 10, "2 requests/s for 5 s"
    assert report["ttft_ms"]["p50"] >= DEMO_SIMULATOR.ttft_ms


def test_2_https_to_a_plain_http_port_says_to_try_http(demo_url: str) -> None:
    tls_url = demo_url.replace("http://", "https://")
    host = demo_url.removeprefix("http://").removesuffix("/v1")
    done = probe(tls_url, "--model", DEMO_MODEL)
    assert done.returncode == 1, done.stderr
    ends_saying(
        done,
        "no request succeeded (tls 1); the first: tls (no HTTP answer) from POST "
        f"{tls_url}/chat/completions: {THEIR_WORDS}",
        f"hint: the TLS handshake with {host} failed: the server speaks plain HTTP? try "
        f"{demo_url}")


def test_3_a_name_that_does_not_resolve_is_a_dns_failure() -> None:
    url = f"http://{UNRESOLVABLE}:8000/v1"
    done = probe(url, "--model", "m")
    assert done.returncode == 1, done.stderr
    ends_saying(
        done,
        "no request succeeded (dns 1); the first: dns (no HTTP answer) from POST "
        f"{url}/chat/completions: {THEIR_WORDS}",
        f"hint: DNS: the name {UNRESOLVABLE} does not resolve from here: check its spelling "
        "(a container's name resolves only inside its network)")


def test_4_a_login_page_where_the_api_should_be_is_called_one(login_root: str) -> None:
    url = f"{login_root}/v1"
    done = probe(url, "--model", "m")
    assert done.returncode == 1, done.stderr
    ends_saying(
        done,
        "no request succeeded (protocol 1); the first: protocol (HTTP 200) from POST "
        f"{url}/chat/completions: HTTP 200 text/html, not an API answer: Sign in - Corp SSO",
        "hint: the server answered with an HTML page (text/html), not the API: a login page "
        "or a proxy in front of the server? Use the URL the API itself is served at, and a "
        "key the proxy lets through")


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "vllm:8000/v1", "localhost"])
def test_5_a_url_without_its_scheme_is_refused_saying_so(url: str) -> None:
    done = probe(url, "--model", "m")
    assert done.returncode == 2, done.stderr
    ends_saying(done, "BASE_URL: must be a URL with a scheme, e.g. http://host:8000/v1")
    assert "relative URL" not in done.stderr


def test_6_a_port_nothing_listens_on_is_connection_refused() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    done = probe(url, "--model", "m")
    assert done.returncode == 1, done.stderr
    ends_saying(
        done,
        "no request succeeded (connect 1); the first: connect (no HTTP answer) from POST "
        f"{url}/chat/completions: Connection refused",
        f"hint: nothing answered at 127.0.0.1:{port}: is the server up there?")


def test_7_serve_without_an_admin_key_says_how_to_create_one_and_that_key_gets_in(
        tmp_path: Path, database_url: str) -> None:
    """`sustain serve` with no SUSTAIN_ADMIN_KEY on a database with no key says at start, in
    one WARNING line, that nobody can get in and the two ways in; `sustain keys list` says
    there is no key yet and how to make one; the sign-in page says the same; `sustain keys
    create` beside the running service is a way in, and then the page is quiet and the
    printed key signs in."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"SUSTAIN_DATABASE_URL": database_url}
    service = SustainProcess(["serve", "--port", str(port)], tmp_path / "serve.log", env=env)
    service.env.pop("SUSTAIN_ADMIN_KEY")
    with service, httpx.Client(base_url=base, timeout=10) as anonymous:
        service.wait_http(f"{base}/readyz", timeout_s=START_TIMEOUT_S)
        warned = [line for line in service.output().splitlines()
                  if "nobody can get in yet" in line]
        assert len(warned) == 1, service.output()
        assert "WARNING" in warned[0]
        assert warned[0].endswith(
            "nobody can get in yet: SUSTAIN_ADMIN_KEY is not set and no API key exists, so "
            "every call that needs a key answers 401 and the sign-in at /login accepts "
            f"nothing; {NO_KEY_REMEDIES}"), warned[0]
        assert "run `sustain keys create --name admin --role admin` on the service's " \
            "database" in warned[0]

        listed = keys("list", database_url=database_url)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines() == [
            "no API keys yet; create one with `sustain keys create --name admin --role admin` "
            "(roles: viewer, editor, admin, agent; it prints the key once)"]

        assert anonymous.get("/api/v1/probes").status_code == 401
        assert anonymous.get("/").headers["location"] == "/login"
        assert 'id="no-key"' in anonymous.get("/login").text

        create = SustainProcess(["keys", "create", "--name", "admin", "--role", "admin"],
                                tmp_path / "keys.log", env=env)
        with create:
            assert create.proc is not None
            assert create.proc.wait(60) == 0, create.output()
        key = re.findall(r"^sk_sustain_\S+$", create.output(), re.MULTILINE)[-1]
        wait_until(lambda: 'id="no-key"' not in anonymous.get("/login").text, 10)
        signed_in = anonymous.post("/login", content=f"key={key}", headers=FORM)
        assert signed_in.status_code == 303, signed_in.text
        assert anonymous.get("/api/v1/probes",
                             headers={"Authorization": f"Bearer {key}"}).status_code == 200
        assert service.stop() == 0
