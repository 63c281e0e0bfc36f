"""Synthetic workload: seeded prompts of a fixed input length, and the request body they make.

Input length is counted in whitespace-separated words, the simple documented tokenizer used
until a probe names a real one.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from probes.client.target import ApiKind

_VOCABULARY = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
    "sigma tau upsilon phi chi psi omega river stone cloud lamp harbor garden signal engine"
).split()


class Workload(BaseModel):
    """What each request asks for."""

    model_config = ConfigDict(extra="forbid")

    prompt: str | None = Field(
        default=None, min_length=1, max_length=100_000,
        description="Fixed prompt text; when unset, a seeded synthetic prompt is generated.",
    )
    input_tokens: int = Field(default=32, ge=1, le=100_000, description="Synthetic prompt length.")
    max_tokens: int = Field(default=64, ge=1, le=1_000_000)
    stream: bool = True
    temperature: float | None = Field(default=None, ge=0, le=2)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Vendor parameters passed through verbatim, e.g. ignore_eos, min_tokens.",
    )


def synthetic_prompt(input_tokens: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_VOCABULARY) for _ in range(input_tokens))


def prompt_for(workload: Workload, seq: int) -> str:
    """The prompt of request `seq`: deterministic for a given workload seed."""
    if workload.prompt is not None:
        return workload.prompt
    return synthetic_prompt(workload.input_tokens, workload.seed * 1_000_003 + seq)


def request_body(workload: Workload, api_kind: ApiKind, model: str, seq: int) -> dict[str, Any]:
    """The JSON body for request `seq`; streaming asks for usage so tokens are server-counted."""
    body: dict[str, Any] = dict(workload.extra_body)
    prompt = prompt_for(workload, seq)
    if api_kind is ApiKind.OPENAI_CHAT:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body.update(model=model, max_tokens=workload.max_tokens, stream=workload.stream)
    if workload.stream:
        body["stream_options"] = {"include_usage": True}
    if workload.temperature is not None:
        body["temperature"] = workload.temperature
    return body
