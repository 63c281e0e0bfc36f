"""Simulator behaviour: latency, output length and injected faults."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

T = TypeVar("T")


class Fault(enum.StrEnum):
    """A misbehaviour to inject; a request picks one with the `x-sim-fault` header.

    From `one_write` on, the faults are pathological but well-formed streams (each ends with
    `data: [DONE]`): fixtures that prove a client copes with timings and counts a normal
    server never produces. Times are from the start of generation; TTFT and ITL are the
    configured (jittered) delays."""

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
    ONE_WRITE = "one_write"
    """The whole stream in one write when the first token is due (TTFT): the role chunk, every
    token's chunk, the finish chunk, the usage chunk when asked and `[DONE]`, as a buffering
    gateway or a server detokenising in big batches delivers it. A client reads every token
    at once: TPOT 0, every ITL gap 0. A non-streamed request gets its body at TTFT."""
    SINGLE_TOKEN = "single_token"
    """Exactly one content token whatever max_tokens allows: finish_reason "stop", usage
    completion_tokens 1 (a non-streamed body likewise)."""
    ZERO_TOKENS = "zero_tokens"
    """No content at all, as when a model stops at once: no role chunk, then at TTFT the finish
    chunk (finish_reason "stop"), the usage chunk even when not asked (completion_tokens 0)
    and `[DONE]`, in one write. Unlike `empty`, which sends the role chunk at once, ends
    with "length" when max_tokens caps the output, and reports usage only when asked.
    A non-streamed body has empty content and completion_tokens 0."""
    USAGE_ONLY = "usage_only"
    """No choices at all: at TTFT, in one write, only the usage chunk (`choices: []`, usage
    counting the tokens a normal answer would have had), sent even when not asked, and
    `[DONE]`. A non-streamed body has `choices: []` and that usage."""
    IDENTICAL_TIMESTAMPS = "identical_timestamps"
    """The role chunk at once, then every other event in its own write (one per SSE event,
    none coalesced) with no wait between them, all when the first token is due (TTFT): every
    token of the stream has the same time (and, as in every stream, every chunk the same
    `created`). A non-streamed request gets its body at TTFT."""
    OVERLONG = "overlong"
    """More content tokens than max_tokens allows: 2 * max_tokens + 3 (2 * output_tokens + 3
    when the request sets none), usage (when asked) counting all of them, finish_reason
    "length"; always text, never a tool call. A non-streamed body likewise."""
    INSTANT = "instant"
    """All of the stream in one write at TTFT, its content in ONE delta (every token's text,
    concatenated), with the role chunk before it and the finish chunk, the usage chunk when
    asked (counting every token) and `[DONE]` after it: the first content and the last byte
    leave at the same instant. Always text, never a tool call. A non-streamed request gets
    its normal body at TTFT."""
    BAD_ITEMS = "bad_items"
    """Embeddings and rerank: a well-formed answer that is wrong: one vector a value short,
    or a document index past those sent. (Generation kinds answer normally.)"""


FAULT_HEADER = "x-sim-fault"

OPTION = "option"
"""The key of a setting's Option in its dataclass field's metadata."""


AT_ONCE = frozenset({Fault.ONE_WRITE, Fault.USAGE_ONLY, Fault.IDENTICAL_TIMESTAMPS,
                     Fault.INSTANT})
"""Faults whose tokens are all due with the first one (TTFT after the start): no ITL."""


@dataclass(frozen=True, slots=True)
class Option:
    """How `sustain simulate` offers a setting: its flag's help (the flag is `--field-name`
    unless `names` spells it), and the range a number must be in. The command's options are
    made from these (sustain.service.cli.flags.config_parameters); a setting without one is
    no flag."""

    help: str
    at_least: float | None = None
    above: float | None = None
    """An exclusive lower bound."""
    at_most: float | None = None
    names: tuple[str, ...] = ()

    def problem(self, value: object) -> str | None:
        """What is wrong with `value` for this setting; None when nothing is (an unset
        value, None, is never out of range)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if self.at_least is not None and value < self.at_least:
            return f"must be >= {self.at_least:g}"
        if self.above is not None and not value > self.above:
            return f"must be > {self.above:g}"
        if self.at_most is not None and value > self.at_most:
            return f"must be <= {self.at_most:g}"
        return None


def option(default: T, help: str, *, at_least: float | None = None,  # noqa: A002 - Option's word
           above: float | None = None, at_most: float | None = None,
           names: tuple[str, ...] = ()) -> T:
    """A setting's dataclass field, offered as a flag of `sustain simulate` (see Option)."""
    return field(default=default, metadata={OPTION: Option(
        help, at_least=at_least, above=above, at_most=at_most, names=names)})


class SimulatorConfigError(ValueError):
    """Settings out of their range: each problem as (setting, what is wrong)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{name}: {problem}" for name, problem in problems))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class SimulatorConfig:
    """How the simulator behaves. Each setting is declared once, here: the fields with an
    Option are `sustain simulate`'s flags, with their help and range; a config out of range
    cannot be made (SimulatorConfigError)."""

    ttft_ms: float = option(50.0, "Time to first token, ms.", at_least=0)
    """Delay from the start of generation to the first content token (median when jittered)."""
    itl_ms: float = option(10.0, "Inter-token latency, ms.", at_least=0)
    """Delay between successive tokens (median when jittered)."""
    prefill_ms_per_token: float = option(
        0.0, "Added to TTFT per prompt token not served from the prefix cache, ms.", at_least=0)
    """Added to TTFT per prompt token not served from the prefix cache (a cold prefill costs
    more than a cached one, as on a real server)."""
    prefix_cache: bool = option(
        True, "Emulate prefix caching and report cached_tokens (--no-prefix-cache: neither).",
        names=("--prefix-cache/--no-prefix-cache",))
    """Emulate prefix caching (see prefix_cache.py) and report
    `usage.prompt_tokens_details.cached_tokens`."""
    tool_calls: bool = True
    """Answer a chat request that offers `tools` (and whose last message is not a tool's
    result) with a call to its first function, as a model deciding to use it would."""
    ttft_sigma: float = option(0.0, "Lognormal jitter of TTFT (sigma).", at_least=0)
    """Lognormal jitter of TTFT: each request's TTFT is ttft_ms * exp(N(0, sigma))."""
    itl_sigma: float = option(0.0, "Lognormal jitter of ITL (sigma).", at_least=0)
    """Lognormal jitter of each inter-token gap."""
    max_batch: int | None = option(
        None, "Generations at once; more requests queue, so TTFT rises past saturation.",
        at_least=1)
    """Generations served at once; further requests queue (FIFO), so TTFT rises past
    saturation as on a real server. None: unlimited."""
    error_every: int = option(0, "Answer every Nth request with HTTP 500.", at_least=0)
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
    truth_log: str | None = option(
        None, "Append per-request server-side timings (JSON lines) to this file.")
    """When set, one JSON line per answered request, streamed or whole, of every protocol:
    arrival, start of generation, when the first byte, the first token (None for a whole
    answer) and the last byte were handed to the server (perf_counter seconds: the same
    monotonic clock as clients on this machine), and the request's x-request-id and
    traceparent headers."""
    output_tokens: int = option(32, "Tokens per response (max).", at_least=0)
    """Tokens generated when the request's max_tokens allows that many."""
    reasoning_tokens: int = option(
        0, "Reasoning tokens before the answer, as a thinking model streams them.",
        at_least=0)
    """Generation requests think first: this many reasoning deltas (chat
    `delta.reasoning_content`, Responses `response.reasoning_text.delta`, Messages
    `thinking_delta`), ITL apart, before the answer's `output_tokens`; counted in the usage
    (`completion_tokens_details.reasoning_tokens`, `output_tokens_details.reasoning_tokens`)
    and in the truth log's `first_answer` time."""
    item_ms: float = option(
        1.0, "Embeddings and rerank: added per input or document, ms.", at_least=0)
    """Embeddings and rerank: added to the answer's time per input embedded or document
    ranked (after ttft_ms, the fixed part, and prefill_ms_per_token for every word)."""
    embedding_dimensions: int = option(
        64, "Length of the simulated embedding vectors.", at_least=1, at_most=65_536)
    """Length of the simulated embedding vectors."""
    gpu_power_w: float | None = option(
        None, "Also expose DCGM power and energy series, each GPU drawing this many W.",
        above=0)
    """When set, /metrics also exposes DCGM's power and energy series for `gpus` GPUs, each
    drawing this many watts (gpu_power.py)."""
    gpus: int = option(1, "--gpu-power-w: GPUs to expose.", at_least=1, at_most=64)
    audio_ms_per_s: float = option(
        20.0, "Transcriptions: added to the first text per second of audio, ms.", at_least=0)
    """Transcriptions: added to the first text's time per second of audio (a real-time
    factor of 0.02 on top of ttft_ms)."""
    prompt_chars_per_token: float | None = option(
        None, "Count each prompt word as ceil(length / this) tokens, as a subword tokenizer "
        "does (3: about 1.8 a word); unset: one token a word.", above=0)
    """When set, a generation request's prompt word counts as ceil(len(word) /
    prompt_chars_per_token) tokens, as a subword (BPE) tokenizer splits longer words (3 makes
    sustain's synthetic vocabulary about 1.8 tokens a word, its salt 6); None: one token per
    whitespace-separated word. Embeddings and rerank count words either way."""
    chat_template_tokens: int = option(
        0, "Add this many tokens to the prompt count of every chat-shaped request.", at_least=0)
    """Tokens added to the prompt count of every chat-shaped generation request (chat,
    responses, messages; not completions), as a chat template adds its role markers."""
    ignore_stream: bool = option(
        False, "Answer streamed requests whole, as one JSON body (as OpenAI's whisper-1 does).",
        names=("--ignore-stream",))
    """Ignore `stream: true`: every generation request (chat, completions, responses,
    messages, transcriptions) gets its whole answer as `application/json`, as OpenAI's
    whisper-1 and some chat gateways do."""
    model: str = option("sim-model", "Model name to report.")
    strict_model: bool = option(
        False, "Answer a request naming another model than --model with 404, as vLLM does.",
        names=("--strict-model",))
    """Refuse a request whose `model` is not `model`: 404 with vLLM's body (`The model `X`
    does not exist.`), so the failure a wrong --model meets can be tried. Off by default: the
    simulator stands in for whatever model a test or a user names. A request naming no
    model is served either way, as vLLM serves it."""
    fault: Fault = option(  # noqa: RUF009 - an immutable enum member, given to field()
        Fault.NONE, "Fault to inject into --fault-rate of requests.")
    """Fault injected into a fraction `fault_rate` of requests without a fault header."""
    fault_rate: float = option(
        0.0, "Fraction of requests with --fault.", at_least=0, at_most=1)
    hang_s: float = 3600.0
    """How long a `hang` fault keeps the request open before answering."""
    seed: int = option(0, "Seed for jitter and fault selection.")
    speech_audio_ms_per_char: float = option(
        50.0, "Speech: milliseconds of audio per input character.", at_least=0)
    """Speech (`/v1/audio/speech`): the audio's length, per character of the input (at
    least one chunk). Its first chunk is due ttft_ms after the start, each next one itl_ms
    after the one before (jittered as tokens are)."""
    speech_chunk_ms: float = option(
        100.0, "Speech: milliseconds of audio in each streamed chunk.", above=0,
        at_most=60_000)
    """Speech: the audio in each chunk (raw bytes, or an SSE delta): 24 kHz 16-bit mono, 48
    bytes a millisecond."""
    image_ms: float = option(200.0, "Images: milliseconds to generate each image.", at_least=0)
    """Images (`/v1/images/generations`): each image takes this long, one after the other;
    its partial images (streamed, `partial_images`) are due at even fractions of it."""
    image_bytes: int = option(
        4096, "Images: bytes of each generated image (base64 in the answer).", at_least=1,
        at_most=64 * 1024 * 1024)
    video_queue_ms: float = option(
        100.0, "Videos: milliseconds a job waits queued before it runs.", at_least=0)
    """Videos (`/v1/videos`): a job is `queued` this long after its creation, then
    `in_progress` for video_generation_ms, then `completed` (its status read from the clock
    whenever it is asked)."""
    video_generation_ms: float = option(
        1000.0, "Videos: milliseconds a job runs before it is completed.", at_least=0)
    video_bytes: int = option(
        1_048_576, "Videos: bytes of each video's content.", at_least=1,
        at_most=1024 * 1024 * 1024)
    api_key: str | None = None
    """When set, requests must carry `Authorization: Bearer <api_key>` (as vLLM --api-key)."""

    def __post_init__(self) -> None:
        found = [(f.name, problem) for f in fields(self)
                 if (setting := f.metadata.get(OPTION)) is not None
                 and (problem := setting.problem(getattr(self, f.name))) is not None]
        if found:
            raise SimulatorConfigError(found)


def options(config: type[Any] = SimulatorConfig) -> dict[str, Option]:
    """The settings offered as flags, by field name, in field order."""
    return {f.name: f.metadata[OPTION] for f in fields(config) if OPTION in f.metadata}
