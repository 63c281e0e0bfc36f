"""Which per-request SLO thresholds an endpoint's kind can meet: an embeddings, rerank or
plain HTTP answer comes whole, with no first token and no time per output token, so a TTFT
or TPOT threshold on it would fail every request. It is refused where a probe is created or
changed (REST, config file, command line) rather than counted as bad forever; the latency of
those kinds is `e2e_ms`."""

from __future__ import annotations

from sustain.probes.measure.slo import SloThresholds
from sustain.probes.protocols.registry import find_protocol


def threshold_problems(api_kind: str, slo: SloThresholds) -> list[tuple[str, str]]:
    """(threshold, message) for each of `slo`'s thresholds (`ttft_ms`, `tpot_ms`,
    `ttfo_ms`) an endpoint of `api_kind` can never meet."""
    protocol = find_protocol(api_kind)
    if protocol is None or protocol.first_token:  # a kind whose answers have tokens to time
        return []
    return [(name, f"an endpoint of api_kind {api_kind} answers whole, with no first token "
             "or time per output token: judge its latency with e2e_ms")
            for name in ("ttft_ms", "tpot_ms", "ttfo_ms") if getattr(slo, name) is not None]
