"""What each request of a probe asks for: prompts (fixed, synthetic with a length
distribution, or a JSONL dataset), output length, sampling and vendor parameters."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel, storable_problem
from sustain.probes.renamed import WORKLOAD_RENAMED, accept_renamed, old_name
from sustain.probes.workload.audio import MAX_AUDIO_SECONDS
from sustain.probes.workload.corpus import RagSpec
from sustain.probes.workload.images import ImageSpec
from sustain.probes.workload.lengths import InputLength, longest


class WorkloadError(ValueError):
    """The workload cannot run as asked (sessions on a completions endpoint or under an open
    loop): the run fails with this message, nothing sent."""


MAX_EXTRA_BODY_BYTES = 64 * 1024
"""Largest `extra_body`, as compact JSON."""
MAX_PROMPT_CHARS = 1_000_000
"""Longest fixed `prompt` (a long-context probe's, some 250k tokens of English)."""
MAX_PATH_CHARS = 4096
"""Longest path of a file a workload names (PATH_MAX on Linux)."""
MAX_BATCH_TOKENS = 1_000_000
"""Most tokens one embeddings or rerank request may carry in all (inputs x their length)."""
MAX_VOICE_CHARS = 256
"""Longest speech `voice` (a name, or a custom voice's id)."""
MAX_OUTPUT_IMAGES = 10
"""Most images one openai-images request asks for (OpenAI's own bound on `n`)."""
MAX_PARTIAL_IMAGES = 3
"""Most partial images a streamed image may send (OpenAI's bound)."""
MIN_POLL_INTERVAL_S = 0.05
MAX_POLL_INTERVAL_S = 60.0
"""The bounds of a video job's poll interval: not faster than 20 polls a second per job, not
slower than a minute (the phase times' accuracy)."""


ReasoningEffort = Literal["none", "minimal", "low", "medium", "high"]
"""How long a reasoning model should think, as OpenAI's `reasoning_effort` names it."""


class Workload(InputModel):
    prompt: str | None = Field(
        default=None, min_length=1, max_length=MAX_PROMPT_CHARS,
        description="Fixed prompt text for every request.",
    )
    input_tokens: int = Field(default=32, ge=1, le=200_000,
                              description="Synthetic prompt length when input_length is unset.")
    input_length: InputLength | None = Field(
        default=None, description="Synthetic prompt length distribution (fixed, uniform, "
        "normal), drawn per request.")
    dataset: str | None = Field(
        default=None, min_length=1, max_length=MAX_PATH_CHARS,
        description="Path of a JSONL file of {prompt} or {messages} lines, cycled in a "
        "seeded order.")
    sessions: str | None = Field(
        default=None, min_length=1, max_length=MAX_PATH_CHARS,
        description="Path of a JSONL sessions file (multi-turn, agentic): one line per turn "
        "with conversation_id, turn, messages and optional tools, tool_calls, delay_s (or "
        "MLPerf's delay_seconds) and max_tokens. Each conversation plays in order with its "
        "history; a concurrency profile's users are conversations in flight.",
    )
    turns: int | None = Field(
        default=None, ge=1, le=1000,
        description="Synthetic sessions: conversations of this many turns, each turn one "
        "new user message of the input length, sent with the history so far.",
    )
    turn_delay_s: float = Field(
        default=0.0, ge=0, le=3600,
        description="Synthetic sessions: think time before each turn after the first.")
    session_header: bool = Field(
        default=False,
        description="Send each turn's conversation as an X-Session-ID header (for sticky "
        "routing to the replica that holds its cache).")
    tokenizer: str | None = Field(
        default=None, min_length=1, max_length=MAX_PATH_CHARS,
        description="Path of a local Hugging Face tokenizer.json used to count synthetic "
        "input tokens; unset: one whitespace-separated word per token. Read as datasets are: "
        "from under SUSTAIN_DATASET_DIR, a regular file up to SUSTAIN_DATASET_MAX_BYTES.")
    cache: Literal["defeat", "allow"] = Field(
        default="defeat",
        description="defeat: every request's prompt starts with a fresh random salt (64 bits, "
        "new per run and per request, counted in the input length), so no request reuses "
        "another's cached prefix and every prefill is cold, as a new user's is; allow: the "
        "same prompts every run (a prefix-caching server then serves them from its cache).",
    )
    shared_prefix_tokens: int = Field(
        default=0, ge=0, le=200_000,
        description="A stable prefix of this many tokens before the salt, the same in every "
        "request and run (a shared system prompt): the part a prefix cache may serve.",
    )
    max_tokens: int = Field(default=64, ge=1, le=1_000_000)
    stream: bool = True
    batch_size: int = Field(
        default=1, ge=1, le=2048,
        description="openai-embeddings: inputs per request, each of the input length.")
    dimensions: int | None = Field(
        default=None, ge=1, le=65_536,
        description="openai-embeddings: the length every vector must have (a vector of "
        "another length fails the request as protocol); unset: all alike.")
    documents: int = Field(
        default=8, ge=1, le=1000,
        description="rerank: documents per request, each of the input length.")
    query_tokens: int = Field(default=16, ge=1, le=10_000,
                              description="rerank: length of the query.")
    images: ImageSpec | None = Field(
        default=None, description="Chat kinds (openai-chat, openai-responses, "
        "anthropic-messages): synthetic PNG images attached to each request's user message, "
        "as data URIs; their pixels are salted per request (unless the cache is allowed) so "
        "no image cache can answer.")
    rag: RagSpec | None = Field(
        default=None, description="A RAG pipeline (the endpoint generates; the probe names "
        "its embeddings and, optionally, rerank endpoints): each request embeds its question, "
        "retrieves top_k passages from the corpus, optionally reranks them, then generates "
        "with them in the prompt. Questions come from the dataset (its lines' `passage` is "
        "the expected passage's id) or are drawn from the corpus.")
    audio_s: float = Field(
        default=5.0, ge=0.1, le=MAX_AUDIO_SECONDS,
        description="openai-transcriptions: length of each request's synthetic audio, "
        "seconds (16 kHz mono 16-bit WAV, a few tones under noise, its samples new for every "
        "request unless the cache is allowed). Formerly `audio_seconds` (still accepted, "
        "deprecated).")
    reasoning_effort: ReasoningEffort | None = Field(
        default=None, description="openai-chat (`reasoning_effort`) and openai-responses "
        "(`reasoning: {effort}`): how long a reasoning model should think; unset: the "
        "server's default.")
    thinking_budget_tokens: int | None = Field(
        default=None, ge=1024, le=1_000_000, description="anthropic-messages: extended "
        "thinking (`thinking: {type: enabled, budget_tokens}`) with this many tokens at most "
        "(Anthropic's least is 1024); unset: no extended thinking asked.")
    voice: str = Field(
        default="alloy", min_length=1, max_length=MAX_VOICE_CHARS,
        description="openai-speech: the voice to speak with.")
    audio_format: Literal["pcm", "wav", "mp3", "opus", "aac", "flac"] = Field(
        default="pcm",
        description="openai-speech: the audio format asked for (`response_format`). pcm (24 "
        "kHz 16-bit mono) and wav tell the seconds of audio, hence the real-time factor; the "
        "compressed formats are counted in bytes only.")
    stream_format: Literal["audio", "sse"] = Field(
        default="audio",
        description="openai-speech: audio, raw audio bytes streamed; sse, server-sent "
        "speech.audio.delta events (base64 audio) and speech.audio.done.")
    output_images: int = Field(
        default=1, ge=1, le=MAX_OUTPUT_IMAGES,
        description="openai-images: images generated per request (`n`).")
    output_image_size: str = Field(
        default="1024x1024", pattern=r"^(auto|[1-9][0-9]{1,4}x[1-9][0-9]{1,4})$",
        description="openai-images: the size of each generated image, WIDTHxHEIGHT or auto.")
    partial_images: int = Field(
        default=0, ge=0, le=MAX_PARTIAL_IMAGES,
        description="openai-images, streamed: partial images sent before each image is "
        "complete (its TTFT is the first partial image's).")
    poll_interval_s: float = Field(
        default=1.0, ge=MIN_POLL_INTERVAL_S, le=MAX_POLL_INTERVAL_S,
        description="openai-videos: seconds between polls of a job's status; a job's phase "
        "times are exact to within one interval.")
    connection: Literal["reuse", "new"] = Field(
        default="reuse",
        description="reuse: requests go on kept-alive connections, as a busy client's do "
        "(only the first ones pay to connect); new: every request opens a connection of its "
        "own and closes it after its response, so each pays name resolution, TCP and TLS as a "
        "new user does (docs/metrics.md#http-phases).")
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Vendor parameters passed through verbatim, e.g. ignore_eos, min_tokens "
        f"(at most {MAX_EXTRA_BODY_BYTES} bytes as JSON).",
    )

    @field_validator("extra_body")
    @classmethod
    def _small(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Sent with every request and returned by every read of the probe: kept small. The
        size is taken only of a storable value (one with NaN or deep nesting is refused for
        that, by InputModel)."""
        if storable_problem(value) is None and \
                len(json.dumps(value, separators=(",", ":"))) > MAX_EXTRA_BODY_BYTES:
            raise PydanticCustomError("too_large", "at most {limit} bytes as JSON",
                                      {"limit": MAX_EXTRA_BODY_BYTES})
        return value

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return accept_renamed(data, WORKLOAD_RENAMED)

    audio_seconds = old_name("audio_s", float)  # type: ignore[pydantic-field]

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if self.prompt is not None and self.dataset is not None:
            raise PydanticCustomError("prompt_source", "set prompt or dataset, not both",
                                      {"field": "dataset"})
        if self.sessions is not None and self.turns is not None:
            raise PydanticCustomError("session_source", "set sessions or turns, not both",
                                      {"field": "turns"})
        if (self.sessions is not None or self.turns is not None) and (
                self.prompt is not None or self.dataset is not None):
            raise PydanticCustomError(
                "session_source", "sessions bring their own messages: no prompt or dataset "
                "with them", {"field": "sessions" if self.sessions is not None else "turns"})
        most = longest(self.input_length) if self.input_length is not None \
            else self.input_tokens
        for field, count in (("batch_size", self.batch_size), ("documents", self.documents)):
            # only a count given: the defaults are bounded by the input length's own bound
            if field in self.model_fields_set and count * most > MAX_BATCH_TOKENS:
                raise PydanticCustomError(
                    "batch_too_large", "{field} x the input length must stay within {limit} "
                    "tokens", {"field": field, "limit": MAX_BATCH_TOKENS})
        synthetic = self.prompt is None and self.dataset is None and self.input_length is None
        if synthetic and self.shared_prefix_tokens >= self.input_tokens:
            raise PydanticCustomError(
                "prefix_too_long", "shared_prefix_tokens must be below input_tokens (the salt "
                "and the request's own words follow it)", {"field": "shared_prefix_tokens"})
        return self

    @property
    def in_sessions(self) -> bool:
        """Whether requests are the turns of multi-turn conversations."""
        return self.sessions is not None or self.turns is not None
