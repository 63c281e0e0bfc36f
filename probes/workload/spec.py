"""What each request of a probe asks for: prompts (fixed, synthetic with a length
distribution, or a JSONL dataset), output length, sampling and vendor parameters."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.probes.workload.lengths import InputLength


class Workload(InputModel):
    prompt: str | None = Field(
        default=None, min_length=1, max_length=1_000_000,
        description="Fixed prompt text for every request.",
    )
    input_tokens: int = Field(default=32, ge=1, le=200_000,
                              description="Synthetic prompt length when input_length is unset.")
    input_length: InputLength | None = Field(
        default=None, description="Synthetic prompt length distribution (fixed, uniform, "
        "normal), drawn per request.")
    dataset: str | None = Field(
        default=None, min_length=1, max_length=4096,
        description="Path of a JSONL file of {prompt} or {messages} lines, cycled in a "
        "seeded order.")
    tokenizer: str | None = Field(
        default=None, min_length=1, max_length=4096,
        description="Path of a local Hugging Face tokenizer.json used to count synthetic "
        "input tokens; unset: one whitespace-separated word per token.")
    max_tokens: int = Field(default=64, ge=1, le=1_000_000)
    stream: bool = True
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Vendor parameters passed through verbatim, e.g. ignore_eos, min_tokens.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if self.prompt is not None and self.dataset is not None:
            raise PydanticCustomError("prompt_source", "set prompt or dataset, not both",
                                      {"field": "dataset"})
        return self
