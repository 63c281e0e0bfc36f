"""What `sustain probe` says when no request succeeded: the first failure as it happened
(error class, HTTP status, the server's words, the URL) and a hint for the mistakes people
make most (an API root without /v1, a model the server does not serve, a missing or refused
key, nothing listening). Pure: a run's samples and the flags in, lines out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sustain.probes.measure.sample import Outcome, Sample
from sustain.service.runs.hints import failure_hint

EXIT_OK = 0
"""At least one request succeeded."""
EXIT_NONE_SUCCEEDED = 1
"""No request succeeded (availability 0): the lines say why."""
EXIT_USAGE = 2
"""The flags or a file they name could not be used; nothing was sent."""
MAX_DETAIL_CHARS = 200


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
    hint = failure_hint(None if first.error_class is None else str(first.error_class),
                        first.http_status, base_url, model)
    if hint:
        lines.append(f"hint: {hint}")
    return lines
