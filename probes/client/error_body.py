"""What a server said when it refused a request: the first KiB of an error body (or of an HTML
page where an API answer was due), read as the server's words for a sample's error detail.

A 404 from vLLM says `The model `gpt-4o` does not exist.`; the status alone says nothing of
the kind. Both transports keep the first ERROR_TEXT_BYTES of such a body (they count the rest
up to streaming.ERROR_BODY_LIMIT and keep none of it) and pass it here after the response:
`refusal_detail` turns it into `HTTP 404: The model `gpt-4o` does not exist.`.

The body comes from a server that may be hostile or a proxy that echoes the request, so what
is kept is bounded, printable and secret-free: the server's message where the body is JSON
(`error.message` as OpenAI and Anthropic send it, `message` as vLLM does, `detail` as
FastAPI does, `error` as a string as TGI does), else the page's title or its text;
control and format characters (newlines, ANSI escapes, bidirectional overrides) become
spaces; every value of the request's headers that carries a credential (the bearer token, an
`x-api-key`) is redacted wherever it appears, a prefix of one cut off at the end of the
kept KiB included, as is anything that reads as a credential (`Bearer ...`, `api_key=...`,
`sk-...`); and at most WORDS_CHARS characters are kept. Pure."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

ERROR_TEXT_BYTES = 1024
"""Bytes of an error body kept to read the server's words from (the rest is only counted)."""
WORDS_CHARS = 300
"""Characters of the server's words kept in a sample's error detail: a vLLM or OpenAI error
message fits; a sample of a run of a million failed requests stays small."""
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
"""A request header value shorter than this is not searched for: a short one (`1`, `true`)
would redact every digit of a message, and no key is that short."""
MIN_PREFIX_CHARS = 4
"""A secret cut by the end of the kept KiB is redacted when at least this much of it is
there (shorter, it gives nothing away)."""
CREDENTIAL_WORDS = ("auth", "key", "token", "secret", "credential", "password", "passwd",
                    "signature", "cookie")
"""A request header whose name holds one of these carries a credential (`Authorization`,
`x-api-key`, `api-key`, `X-Auth-Token`); so does any value led by an auth scheme. Other
headers' values (`application/json`, a fault name) may well appear in a message."""
AUTH_SCHEMES = ("bearer ", "basic ", "digest ", "negotiate ", "token ")
HTML_TYPES = ("text/html", "application/xhtml+xml")
NOT_AN_API_ANSWER = "not an API answer"
"""What the detail of a 2xx HTML page says of it (`HTTP 200 text/html, not an API answer`)."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f"
                          "\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")
"""Controls, and the format characters that hide or reorder text (zero-width, bidirectional
overrides)."""
_SPACES = re.compile(r"\s+")
_CREDENTIAL = (r"(?:(?=[\w.~+/=:-]*(?:[\d.~+/=-]|(?-i:[a-z][A-Z])))[\w.~+/=:-]{8,}"
               r"|[\w.~+/=:-]{24,})")
"""What reads as a credential after an auth scheme or a credential's name: 8 characters or
more with a digit, a symbol or a capital after a small letter in them (`dXNlcjpwYXNz`), or
24 or more; a word (`authentication`, `Authentication`) is none."""
_SCHEME_TOKEN = re.compile(rf"(?i)\b(bearer|basic|digest)(\s+){_CREDENTIAL}")
_KEYED = re.compile(
    rf"""(?ix)
    (\b(?:authorization|proxy-authorization|x-api-key|api[-_]?key|access[-_]?token|
         refresh[-_]?token|token|password|passwd|secret|cookie)
     ["']?\s*[:=]\s*["']?)
    (?!(?:bearer|basic|digest)\s)
    {_CREDENTIAL}""")
_OPENAI_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
_JSON_WORDS = re.compile(r'"(?:message|detail|error)"\s*:\s*"((?:[^"\\]|\\.)*)')
_TITLE = re.compile(r"(?is)<title[^>]*>(.*?)(?:</title>|$)")
_TAGS = re.compile(r"(?s)<(script|style)\b.*?(?:</\1\s*>|$)|<[^>]*>?")


class ErrorBody:
    """The first ERROR_TEXT_BYTES of a body, kept as it arrives (each chunk costs at most
    what is still to keep)."""

    __slots__ = ("kept",)

    def __init__(self) -> None:
        self.kept = bytearray()

    def add(self, chunk: bytes) -> None:
        room = ERROR_TEXT_BYTES - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]


def is_html(content_type: str) -> bool:
    """Whether a response is an HTML page (a login page, a proxy's), not an API answer."""
    return content_type.split(";", 1)[0].strip().lower() in HTML_TYPES


def media_type(content_type: str) -> str:
    """A content type without its parameters, printable, for a message (`text/html`)."""
    return clean(content_type.split(";", 1)[0].strip().lower())[:100] or "no content type"


def request_secrets(headers: Mapping[str, str]) -> tuple[str, ...]:
    """What in a request's headers is a credential, to redact from what the server answers:
    each value of a header that carries one (CREDENTIAL_WORDS, AUTH_SCHEMES), and the token
    of a `Bearer TOKEN` value on its own; the longest first, so a value is redacted before
    a part of it."""
    found: set[str] = set()
    for name, value in headers.items():
        value = value.strip()
        _, _, token = value.partition(" ")
        led = value.lower().startswith(AUTH_SCHEMES)
        if not led and not any(word in name.lower() for word in CREDENTIAL_WORDS):
            continue
        found.add(value)
        if led and token:
            found.add(token.strip())
    return tuple(sorted((v for v in found if len(v) >= MIN_SECRET_CHARS), key=len,
                        reverse=True))


@lru_cache(maxsize=256)
def refusal_detail(status: int, content_type: str, body: bytes,
                   secrets: tuple[str, ...] = ()) -> str:
    """A sample's error detail for a refused request: `HTTP 404: <the server's words>`, or
    `HTTP 200 text/html, not an API answer: <its title>` for an HTML page where an API answer
    was due; `HTTP 404` alone when the body says nothing. `body` is the kept first KiB;
    `secrets` the request's (request_secrets). Remembered for the last few hundred bodies:
    a run that meets a wall of identical 429s reads each body once, not once a request, on
    the loop that times the others."""
    html = is_html(content_type)
    head = f"HTTP {status}"
    if html and 200 <= status < 300:
        head = f"HTTP {status} {media_type(content_type)}, {NOT_AN_API_ANSWER}"
    words = server_words(body, secrets, html=html)
    return f"{head}: {words}" if words else head


def server_words(body: bytes, secrets: Iterable[str] = (), *, html: bool = False) -> str:
    """The server's message in a body (its first KiB), printable, secret-free and at most
    WORDS_CHARS characters; "" when there is none."""
    secrets = tuple(secrets)
    text = redact(body[:ERROR_TEXT_BYTES].decode("utf-8", "replace"), secrets,
                  cut=len(body) >= ERROR_TEXT_BYTES)
    message = _json_words(text)
    if message is None and (html or text.lstrip().startswith("<")):
        message = _html_words(text)
    words = redact(clean(text if message is None else message), secrets)
    if len(words) > WORDS_CHARS:
        words = words[:WORDS_CHARS - 1].rstrip() + "…"
    return words


def clean(text: str) -> str:
    """`text` as one printable line: ANSI escapes dropped, every control, format, private
    use, unassigned or line and paragraph separator character a space, runs of spaces one.
    The usual ones by one regular expression; the rest (rare) a character at a time."""
    text = _UNPRINTABLE.sub(" ", _ANSI.sub(" ", text))
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else " " for ch in text)
    return _SPACES.sub(" ", text).strip()


def redact(text: str, secrets: Iterable[str] = (), *, cut: bool = False) -> str:
    """`text` with each of `secrets` and anything that reads as a credential replaced by
    REDACTED; with `cut` (the text is the start of a longer body), also a secret's prefix of
    at least MIN_PREFIX_CHARS that the cut left at its end."""
    secrets = tuple(secrets)
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    if cut:
        for secret in secrets:
            text = _without_cut_secret(text, secret)
    text = _SCHEME_TOKEN.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _KEYED.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    return _OPENAI_KEY.sub(REDACTED, text)


def _without_cut_secret(text: str, secret: str) -> str:
    """`text` with a prefix of `secret` (MIN_PREFIX_CHARS or longer) at its very end
    redacted: where a cut fell inside the secret."""
    start = secret[:MIN_PREFIX_CHARS]
    if len(start) < MIN_PREFIX_CHARS:
        return text
    at = text.find(start, max(0, len(text) - len(secret) + 1))
    while at != -1:
        if secret.startswith(text[at:]):
            return text[:at] + REDACTED
        at = text.find(start, at + 1)
    return text


def _json_words(text: str) -> str | None:
    """The message of a JSON error body, or None when the body is not one. A body cut at
    the kept KiB is not JSON any more: its first `"message"`, `"detail"` or `"error"`
    string is read as far as it goes."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        payload: Any = json.loads(text, strict=False)
    except (ValueError, RecursionError):
        found = _JSON_WORDS.search(text)
        return None if found is None else _unescaped(found.group(1))
    return _message_of(payload)


def _message_of(payload: Any) -> str | None:
    """`error.message` (OpenAI, Anthropic), `error` as a string (TGI), `message` (vLLM),
    `detail` (FastAPI: a string, or its list of validation errors), in that order."""
    if isinstance(payload, list):
        return _message_of(payload[0]) if payload else None
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    if isinstance(error, dict):
        inner = _message_of(error)
        if inner:
            return inner
    if isinstance(error, str) and error:
        return error
    for key in ("message", "detail"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
        if key == "detail" and isinstance(value, list):
            parts = [_validation_error(item) for item in value[:5]]
            joined = "; ".join(p for p in parts if p)
            if joined:
                return joined
    return None


def _validation_error(item: Any) -> str:
    """One of FastAPI's validation errors as `body.model: Field required`."""
    if not isinstance(item, dict) or not isinstance(item.get("msg"), str):
        return ""
    loc = item.get("loc")
    where = ".".join(str(p) for p in loc) if isinstance(loc, list) else ""
    return f"{where}: {item['msg']}" if where else str(item["msg"])


def _unescaped(literal: str) -> str:
    """A JSON string's content, escapes undone as far as they are whole (a cut one, at the
    end, dropped)."""
    for candidate in (literal, literal.rsplit("\\", 1)[0]):
        try:
            value = json.loads(f'"{candidate}"', strict=False)
        except ValueError:
            continue
        if isinstance(value, str):
            return value
    return literal


def _html_words(text: str) -> str:
    """An HTML page's title, else its text without tags, scripts and styles."""
    title = _TITLE.search(text)
    if title is not None and (words := clean(_TAGS.sub(" ", title.group(1)))):
        return words
    return _TAGS.sub(" ", text)
