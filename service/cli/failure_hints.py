"""What `sustain probe` says when no request succeeded: the first failure as it happened
(error class, HTTP status, the server's words, the URL) and a hint for the mistakes people
make most (an API root without /v1, a model the server does not serve, a missing or refused
key, nothing listening). Pure: a run's samples and the flags in, lines out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from urllib.parse import urlsplit

from sustain.probes.measure.sample import ErrorClass, Outcome, Sample

EXIT_OK = 0
"""At least one request succeeded."""
EXIT_NONE_SUCCEEDED = 1
"""No request succeeded (availability 0): the lines say why."""
EXIT_USAGE = 2
"""The flags or a file they name could not be used; nothing was sent."""
MAX_DETAIL_CHARS = 200
UNREACHABLE = frozenset({ErrorClass.CONNECT, ErrorClass.DNS, ErrorClass.TLS,
                         ErrorClass.TIMEOUT_CONNECT, ErrorClass.EGRESS_DENIED})


def none_succeeded(samples: Sequence[Sample]) -> bool:
    return bool(samples) and all(s.outcome is not Outcome.SUCCESS for s in samples)


def failure_lines(samples: Sequence[Sample], base_url: str, model: str | None) -> list[str]:
    """Why every request failed, and what to try; [] when some request succeeded."""
    if not none_succeeded(samples):
        return []
    classes = Counter(str(s.measurement.error_class) for s in samples)
    first = samples[0].measurement
    status = f"HTTP {first.http_status}" if first.http_status is not None else "no HTTP answer"
    detail = (first.error_detail or "").replace("\n", " ")[:MAX_DETAIL_CHARS]
    lines = [f"no request succeeded ({', '.join(f'{k} {n}' for k, n in classes.items())}); "
             f"the first: {first.error_class} ({status}) from {base_url}"
             + (f": {detail}" if detail else "")]
    hint = _hint(first.error_class, first.http_status, base_url, model)
    if hint:
        lines.append(f"hint: {hint}")
    return lines


def _hint(error: ErrorClass | None, status: int | None, base_url: str,
          model: str | None) -> str | None:
    path = urlsplit(base_url).path.rstrip("/")
    if error in UNREACHABLE:
        if error is ErrorClass.EGRESS_DENIED:
            return ("the egress policy refused the address (SUSTAIN_ALLOWED_TARGETS, "
                    "SUSTAIN_DENIED_TARGETS)")
        return f"nothing answered at {urlsplit(base_url).netloc}: is the server up there?"
    if status == 404 and not path.endswith("/v1"):
        return (f"most servers serve their API under /v1: try {base_url.rstrip('/')}/v1 "
                "as the base URL")
    if status == 404:
        return (f"the server has no such route, or does not serve model {model!r}: check "
                "--model (its GET /v1/models lists them) and --api")
    if status in (401, 403):
        return ("the server refused the request's credentials: pass its key with "
                "--api-key-env VAR (the variable's name, never the key)")
    if status == 400 and model:
        return f"the server refused the request: check --model {model!r} and --api"
    return None
