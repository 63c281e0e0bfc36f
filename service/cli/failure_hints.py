"""What `sustain probe` says when no request succeeded: the first failure as it happened
(error class, HTTP status, the request it was: `POST http://host:8000/v1/chat/completions`,
and the server's words: `The model `gpt-4o` does not exist.`) and a hint for the mistakes
people make most (service/runs/hints.py). Pure: a run's samples and the flags in, lines
out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sustain.probes.measure.sample import Outcome, Sample
from sustain.service.runs.hints import MAX_DETAIL_CHARS, after_status, failure_hint

EXIT_OK = 0
"""At least one request succeeded."""
EXIT_NONE_SUCCEEDED = 1
"""No request succeeded (availability 0): the lines say why."""
EXIT_USAGE = 2
"""The flags or a file they name could not be used; nothing was sent."""


def none_succeeded(samples: Sequence[Sample]) -> bool:
    return bool(samples) and all(s.outcome is not Outcome.SUCCESS for s in samples)


def failure_lines(samples: Sequence[Sample], base_url: str, model: str | None,
                  request: str | None = None) -> list[str]:
    """Why every request failed, and what to try; [] when some request succeeded. `request`
    is where the requests went (hints.request_target), base_url when not given."""
    if not none_succeeded(samples):
        return []
    classes = Counter(str(s.measurement.error_class) for s in samples)
    first = samples[0].measurement
    status = f"HTTP {first.http_status}" if first.http_status is not None else "no HTTP answer"
    detail = after_status(first.error_detail, first.http_status)[:MAX_DETAIL_CHARS]
    lines = [f"no request succeeded ({', '.join(f'{k} {n}' for k, n in classes.items())}); "
             f"the first: {first.error_class} ({status}) from {request or base_url}"
             + (f": {detail}" if detail else "")]
    hint = failure_hint(None if first.error_class is None else str(first.error_class),
                        first.http_status, base_url, model, detail=first.error_detail)
    if hint:
        lines.append(f"hint: {hint}")
    return lines

