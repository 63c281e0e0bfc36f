"""Simulator behaviour: latency, output length and injected faults."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Fault(enum.StrEnum):
    """A misbehaviour to inject; a request picks one with the `x-sim-fault` header."""

    NONE = "none"
    HTTP_400 = "http_400"
    HTTP_429 = "http_429"
    HTTP_500 = "http_500"
    WRONG_CONTENT_TYPE = "wrong_content_type"
    MALFORMED = "malformed"
    TRUNCATE = "truncate"
    EMPTY = "empty"
    HANG = "hang"
    ERROR_EVENT = "error_event"
    HUGE_CHUNK = "huge_chunk"
    TRICKLE = "trickle"


FAULT_HEADER = "x-sim-fault"


@dataclass(frozen=True, slots=True)
class SimulatorConfig:
    ttft_ms: float = 50.0
    """Delay from the start of generation to the first content token (median when jittered)."""
    itl_ms: float = 10.0
    """Delay between successive tokens (median when jittered)."""
    prefill_ms_per_token: float = 0.0
    """Added to TTFT per prompt token not served from the prefix cache (a cold prefill costs
    more than a cached one, as on a real server)."""
    prefix_cache: bool = True
    """Emulate prefix caching (see prefix_cache.py) and report
    `usage.prompt_tokens_details.cached_tokens`."""
    tool_calls: bool = True
    """Answer a chat request that offers `tools` (and whose last message is not a tool's
    result) with a call to its first function, as a model deciding to use it would."""
    ttft_sigma: float = 0.0
    """Lognormal jitter of TTFT: each request's TTFT is ttft_ms * exp(N(0, sigma))."""
    itl_sigma: float = 0.0
    """Lognormal jitter of each inter-token gap."""
    max_batch: int | None = None
    """Generations served at once; further requests queue (FIFO), so TTFT rises past
    saturation as on a real server. None: unlimited."""
    error_every: int = 0
    """When > 0, every Nth generation request answers HTTP 500."""
    retry_after_s: int = 1
    """Retry-After of `http_429` answers."""
    huge_chunk_bytes: int = 524_288
    """Content size of the one oversized delta of a `huge_chunk` fault: far larger than one
    read, still within the client's 1 MiB cap on an event (probes/client/sse.py), so the
    stream stays valid."""
    trickle_bytes: int = 5
    trickle_ms: float = 1.0
    """A `trickle` fault writes each event in pieces of trickle_bytes, trickle_ms apart."""
    truth_log: str | None = None
    """When set, one JSON line per streamed request: arrival, start of generation, when the
    first byte, the first token and the last byte were handed to the server (perf_counter
    seconds: the same monotonic clock as clients on this machine), and the request's
    x-request-id header."""
    output_tokens: int = 32
    """Tokens generated when the request's max_tokens allows that many."""
    model: str = "sim-model"
    fault: Fault = Fault.NONE
    """Fault injected into a fraction `fault_rate` of requests without a fault header."""
    fault_rate: float = 0.0
    hang_s: float = 3600.0
    """How long a `hang` fault keeps the request open before answering."""
    seed: int = 0
    api_key: str | None = None
    """When set, requests must carry `Authorization: Bearer <api_key>` (as vLLM --api-key)."""
