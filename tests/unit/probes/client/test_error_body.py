"""The server's words in a refused request's detail: the message of the JSON bodies servers
send (vLLM, OpenAI, Anthropic, FastAPI, TGI), the title of an HTML page, and never anything
a hostile body could abuse: a line break, an escape sequence, a credential echoed back, or
more than WORDS_CHARS characters."""

from __future__ import annotations

import json

import pytest

from sustain.probes.client.error_body import (
    ERROR_TEXT_BYTES,
    REDACTED,
    WORDS_CHARS,
    ErrorBody,
    is_html,
    refusal_detail,
    request_secrets,
    server_words,
)

VLLM_404 = (b'{"object":"error","message":"The model `gpt-4o` does not exist.",'
            b'"type":"NotFoundError","param":null,"code":404}')
KEY = "sk-test-0123456789abcdefghij"
HEADERS = {"authorization": f"Bearer {KEY}", "content-type": "application/json",
           "accept": "application/json"}


@pytest.mark.parametrize(("body", "words"), [
    (VLLM_404, "The model `gpt-4o` does not exist."),
    (b'{"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",'
     b' "code": "invalid_api_key"}}', "Incorrect API key provided."),
    (b'{"type": "error", "error": {"type": "not_found_error", "message": "model: claude-x"}}',
     "model: claude-x"),
    (b'{"error": "Input validation error: `inputs` must have less than 4096 tokens",'
     b' "error_type": "validation"}',
     "Input validation error: `inputs` must have less than 4096 tokens"),
    (b'{"detail": "Not Found"}', "Not Found"),
    (b'{"detail": [{"loc": ["body", "model"], "msg": "Field required", "type": "missing"}]}',
     "body.model: Field required"),
    (b"upstream connect error or disconnect/reset before headers",
     "upstream connect error or disconnect/reset before headers"),
    (b'{"unrelated": 1}', '{"unrelated": 1}'),
    (b"", ""),
])
def test_the_message_of_each_servers_error_body_is_read(body: bytes, words: str) -> None:
    assert server_words(body) == words


def test_a_refusal_reads_as_its_status_and_the_servers_words() -> None:
    assert refusal_detail(404, "application/json", VLLM_404) == \
        "HTTP 404: The model `gpt-4o` does not exist."
    assert refusal_detail(503, "text/plain", b"") == "HTTP 503"


def test_an_html_page_where_an_api_answer_was_due_is_named_with_its_title() -> None:
    page = (b"<!doctype html><html><head><title>Sign in \xc2\xb7 Corp SSO</title>"
            b"<script>var x = '<b>';</script></head><body><h1>Welcome</h1></body></html>")
    assert refusal_detail(200, "text/html; charset=utf-8", page) == \
        "HTTP 200 text/html, not an API answer: Sign in \u00b7 Corp SSO"
    assert server_words(b"<html><body><h1>502 Bad Gateway</h1><hr>nginx</body></html>",
                        html=True) == "502 Bad Gateway nginx"
    assert is_html("application/xhtml+xml")
    assert not is_html("application/json")


def test_a_body_cut_at_the_kept_kib_still_gives_its_message() -> None:
    body = json.dumps({"message": "a" * 2000 + " tail"}).encode()
    kept = ErrorBody()
    for start in range(0, len(body), 100):
        kept.add(body[start:start + 100])
    assert len(kept.kept) == ERROR_TEXT_BYTES
    words = server_words(bytes(kept.kept))
    assert words == "a" * (WORDS_CHARS - 1) + "…"
    assert server_words(b'{"error": {"message": "cut in an escape \\u00') == \
        "cut in an escape"


def test_no_line_break_escape_or_hidden_character_survives() -> None:
    hostile = (b'{"message": "line one\\nforged: line\\r\\u001b[31mred\\u001b[0m '
               b'\\u202egnp.exe\\u200b \\u0000end\\t\\u2028x"}')
    words = server_words(hostile)
    assert words == "line one forged: line red gnp.exe end x"
    assert words.isprintable()
    assert server_words(b"\xff\xfe bad utf-8 \x1b[2J").isprintable()


def test_a_key_the_server_or_a_proxy_echoes_back_is_redacted() -> None:
    secrets = request_secrets(HEADERS)
    assert KEY in secrets
    assert "application/json" not in secrets
    echoed = json.dumps({"error": {"message": f"invalid key {KEY}; headers: "
                                   f"authorization: Bearer {KEY}"}}).encode()
    words = server_words(echoed, secrets)
    assert KEY not in words
    assert KEY[:8] not in words
    assert words == f"invalid key {REDACTED}; headers: authorization: {REDACTED}"


def test_credentials_it_was_not_told_of_read_as_credentials_and_are_redacted() -> None:
    words = server_words(b'{"message": "forwarded Authorization: Basic dXNlcjpwYXNz, '
                         b'api_key=abc123xyz and sk-ant-api03-abcdefghijklmnop"}')
    for leaked in ("dXNlcjpwYXNz", "abc123xyz", "sk-ant-api03"):
        assert leaked not in words
    assert words.count(REDACTED) == 3


def test_a_key_cut_in_two_by_the_kept_kib_leaves_nothing_of_it() -> None:
    """The cut at ERROR_TEXT_BYTES falls inside the echoed key: its first part, at the end
    of what is kept (and of the message read from it), must not be shown either."""
    key = "k3y-" + "Q" * 40
    head = b'{"pad": "' + b"x" * 900 + b'", "message": "invalid key '
    body = head + b"y" * (ERROR_TEXT_BYTES - 20 - len(head)) + key.encode() + b'"}'
    kept = ErrorBody()
    kept.add(body)
    words = server_words(bytes(kept.kept), request_secrets({"x-api-key": key}))
    assert words.startswith("invalid key yyy")
    assert words.endswith(f"y{REDACTED}")
    assert "k3y-" not in words


@pytest.mark.parametrize("words", [
    "Bearer authentication required", "Basic Authentication required",
    "max token count exceeded", "authorization: missing header",
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
])
def test_words_about_credentials_are_not_taken_for_credentials(words: str) -> None:
    assert server_words(json.dumps({"message": words}).encode()) == words
