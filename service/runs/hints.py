"""What to try after a request failed, for the mistakes people make most (an API root without
/v1, a model the server does not serve, a missing or refused key, nothing listening): the
same words in `sustain probe` and on a failed run's page. Pure."""

from __future__ import annotations

from urllib.parse import urlsplit

from sustain.probes.measure.sample import ErrorClass

UNREACHABLE = frozenset({ErrorClass.CONNECT, ErrorClass.DNS, ErrorClass.TLS,
                         ErrorClass.TIMEOUT_CONNECT, ErrorClass.EGRESS_DENIED})


def failure_hint(error: str | None, status: int | None, base_url: str, model: str | None,
                 flags: bool = True) -> str | None:
    """What to try after a request failed with this error class (its value, e.g.
    `http_4xx`) and HTTP status at base_url, for the mistakes people make most; None when
    there is nothing useful to say. `flags` names `sustain probe`'s flags, else the
    endpoint's fields."""
    path = urlsplit(base_url).path.rstrip("/")
    model_field, api_field = ("--model", "--api") if flags else \
        ("the endpoint's model", "its api_kind")
    if error in UNREACHABLE:
        if error == ErrorClass.EGRESS_DENIED:
            return ("the egress policy refused the address (SUSTAIN_ALLOWED_TARGETS, "
                    "SUSTAIN_DENIED_TARGETS)")
        return f"nothing answered at {urlsplit(base_url).netloc}: is the server up there?"
    if status == 404 and not path.endswith("/v1"):
        return (f"most servers serve their API under /v1: try {base_url.rstrip('/')}/v1 "
                "as the base URL")
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
