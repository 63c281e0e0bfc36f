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


FAULT_HEADER = "x-sim-fault"


@dataclass(frozen=True, slots=True)
class SimulatorConfig:
    ttft_ms: float = 50.0
    """Delay from request arrival to the first content token."""
    itl_ms: float = 10.0
    """Delay between successive tokens."""
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
