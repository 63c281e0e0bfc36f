"""What to try after a request failed, for the mistakes people make most (an API root without
/v1, a model the server does not serve, a missing or refused key, nothing listening, a name
that does not resolve, https:// to a plain-HTTP port, a login page or a proxy where the API
should be): the same words in `sustain probe` and on a failed run's page, and the URL the
request went to. Pure."""

from __future__ import annotations

from urllib.parse import urlsplit

from sustain.probes.client.error_body import NOT_AN_API_ANSWER, clean
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.registry import find_protocol

UNREACHABLE = frozenset({ErrorClass.CONNECT, ErrorClass.DNS, ErrorClass.TLS,
                         ErrorClass.TIMEOUT_CONNECT, ErrorClass.EGRESS_DENIED})
MAX_DETAIL_CHARS = 400
"""Characters of a failure's detail a message shows: the server's words (at most
error_body.WORDS_CHARS) and what leads them."""


def request_target(base_url: str | None, api_kind: str | None,
                   check_method: str | None = None) -> str | None:
    """Where a probe's requests go, for a message: `POST` and its endpoint's base URL with
    its API's path (`POST http://host:8000/v1/chat/completions`); for a plain HTTP check (a
    kind without a path) the URL checked, after its method when the caller knows it
    (`check_method`)."""
    if not base_url:
        return None
    protocol = find_protocol(api_kind) if api_kind else None
    if protocol is not None and protocol.path:
        return f"POST {base_url.rstrip('/')}{protocol.path}"
    return f"{check_method} {base_url}" if check_method else base_url


def after_status(detail: str | None, status: int | None) -> str:
    """An error detail as one printable line, without the `HTTP 404` it starts with, for a
    message that names the status already (`HTTP 404: The model ...` -> `The model ...`)."""
    text = clean(detail or "")
    lead = f"HTTP {status}"
    if status is not None and text.startswith(lead) and \
            text[len(lead):len(lead) + 2] in ("", ": "):
        text = text[len(lead) + 2:]
    return text


def failure_hint(error: str | None, status: int | None, base_url: str, model: str | None,
                 flags: bool = True, detail: str | None = None) -> str | None:
    """What to try after a request failed with this error class (its value, e.g.
    `http_4xx`), HTTP status and error detail (when known) at base_url, for the mistakes
    people make most; None when there is nothing useful to say. `flags` names `sustain
    probe`'s flags, else the endpoint's fields."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    model_field, api_field = ("--model", "--api") if flags else \
        ("the endpoint's model", "its api_kind")
    if error in UNREACHABLE:
        return _unreachable(error, base_url, detail)
    if status is not None and 200 <= status < 300 and detail and NOT_AN_API_ANSWER in detail:
        return ("the server answered with an HTML page (text/html), not the API: a login "
                "page or a proxy in front of the server? Use the URL the API itself is "
                "served at, and a key the proxy lets through")
    if status == 404 and not path.endswith("/v1"):
        return (f"most servers serve their API under /v1: try {base_url.rstrip('/')}/v1 "
                "as the base URL")
    if status == 404 and detail and "model" in detail.lower():
        return (f"the server does not serve model {model!r}: check {model_field} (GET "
                f"{base_url.rstrip('/')}/models lists those it serves)")
    if status == 404:
        return (f"the server has no such route, or does not serve model {model!r}: check "
                f"{model_field} (its GET /v1/models lists them) and {api_field}")
    if status in (401, 403):
        return ("the server refused the request's credentials: pass its key with "
                "--api-key-env VAR (the variable's name, never the key)" if flags else
                "the server refused the request's credentials: check the endpoint's "
                "auth_secret_ref and that the secret it names holds the server's key")
    if status == 400 and model:
        return f"the server refused the request: check {model_field} {model!r} and {api_field}"
    return None


def _unreachable(error: str, base_url: str, detail: str | None) -> str:
    """Why nothing answered: the egress policy, the name, TLS, or nothing listening."""
    parts = urlsplit(base_url)
    if error == ErrorClass.EGRESS_DENIED:
        return ("the egress policy refused the address (SUSTAIN_ALLOWED_TARGETS, "
                "SUSTAIN_DENIED_TARGETS)")
    if error == ErrorClass.DNS:
        return (f"DNS: the name {parts.hostname or parts.netloc} does not resolve from here: "
                "check its spelling (a container's name resolves only inside its network)")
    if error == ErrorClass.TLS:
        if detail and "certificate" in detail.lower():
            return (f"the TLS certificate of {parts.netloc} was not accepted: is it issued "
                    "for that name, by an authority this machine trusts?")
        if parts.scheme == "https":
            plain = parts._replace(scheme="http").geturl()
            return (f"the TLS handshake with {parts.netloc} failed: the server speaks plain "
                    f"HTTP? try {plain}")
        return f"the TLS handshake with {parts.netloc} failed"
    return f"nothing answered at {parts.netloc}: is the server up there?"
