"""The flags of `sustain probe`, parsed and checked once: ProbeFlags.

Problems are FlagErrors whose message names the flag (`--rate is required with --profile
constant`, `--header: expected NAME:VALUE, ...`), so the command can print them as they are.
What the flags describe (endpoint, workload, load profile, SLO) is validated by the models the
REST API uses, in `oneshot.build`; `flag_error` names the flag of each of their problems too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sustain.probes.load.profiles import PROFILE_KINDS
from sustain.probes.protocols.registry import KIND_NAMES, PROTOCOLS, is_check
from sustain.probes.workload.spec import ReasoningEffort, Workload
from sustain.service.cli.flags import Flag

FLAG_OF = {
    "rate": "--rate", "burstiness": "--burstiness", "users": "--concurrency",
    "levels": "--levels", "stages": "--levels", "duration_s": "--duration",
    "max_requests": "--max-requests", "warmup_s": "--warmup", "input_tokens": "--input-tokens",
    "max_tokens": "--output-tokens", "base_url": "BASE_URL", "model": "--model",
    "api_kind": "--api", "headers": "--header", "auth_secret_ref": "--api-key-env",
    "kind": "--profile", "ttft_ms": "--slo-ttft-ms", "tpot_ms": "--slo-tpot-ms",
    "e2e_ms": "--slo-e2e-ms", "ttfo_ms": "--slo-ttfo-ms", "method": "--method",
    "expected_status": "--expect-status",
    "body_contains": "--expect-body", "path": "BASE_URL", "workers": "--workers",
    "cache": "--allow-cache", "shared_prefix_tokens": "--shared-prefix-tokens",
    "format": "--trace-format", "speedup": "--speedup", "sessions": "--sessions",
    "turns": "--turns", "session_header": "--session-header", "dataset": "--dataset",
    "turn_delay_s": "--turn-delay", "metrics_url": "--metrics-url",
    "maximum": "--max-concurrency", "minimum": "--min-concurrency", "points": "--points",
    "max_concurrency": "--max-concurrency", "percentile": "--slo-percentile",
    "min_success": "--min-success", "min_samples": "--min-samples", "slo": "--slo-ttft-ms",
    "accelerators": "--accelerators", "price_per_hour": "--price-per-hour",
    "power_kw": "--power-kw", "accelerator": "--accelerator", "currency": "--currency",
    "watts_per_accelerator": "--watts-per-accelerator", "gpus": "--gpus",
    "metrics_interval_s": "--metrics-interval", "batch_size": "--batch-size",
    "dimensions": "--dimensions", "documents": "--documents", "query_tokens": "--query-tokens",
    "audio_s": "--audio-seconds", "corpus": "--rag-corpus", "top_k": "--rag-top-k",
    "rerank_top_n": "--rag-top-n", "pgvector_dsn_ref": "--rag-pgvector-env",
    "count": "--images", "width": "--image-size", "height": "--image-size",
    "voice": "--voice", "audio_format": "--audio-format", "stream_format": "--stream-format",
    "output_images": "--output-images", "output_image_size": "--output-image-size",
    "partial_images": "--partial-images", "poll_interval_s": "--poll-interval",
    "connection": "--connection",
}
"""The flag behind each field of EndpointCreate, Workload, SloThresholds and LoadProfile."""

REQUIRED_BY_PROFILE = {"constant": "rate", "poisson": "rate", "concurrency": "concurrency",
                       "steps": "levels", "sweep": "levels", "trace": "trace",
                       "capacity": "max_concurrency", "pareto": "max_concurrency"}
"""The flag (a ProbeFlags field) each profile cannot do without."""


class FlagError(ValueError):
    """A flag value that cannot be used, with a message naming the flag."""


def flag_error(exc: ValidationError, flag_of: Mapping[str, str] = FLAG_OF) -> FlagError:
    """One FlagError for all the problems of a validation, each led by the flag behind it
    (`flag_of`: field name to flag)."""
    messages = []
    for error in exc.errors():
        ctx = error.get("ctx") or {}
        if isinstance(ctx.get("error"), FlagError):
            messages.append(str(ctx["error"]))
            continue
        names = [str(p) for p in error["loc"] if isinstance(p, str)]
        if ctx.get("field"):
            names.append(str(ctx["field"]))
        flag = next((flag_of[n] for n in reversed(names) if n in flag_of), ".".join(names))
        text = in_flags(error["msg"], flag_of)
        messages.append(text if flag in text else f"{flag}: {text}")
    return FlagError("; ".join(messages))


PHRASES = {"auth_secret_ref (env:NAME or file:/path)":
           "--api-key-env VAR (the variable's name, never the key)"}
"""Whole phrases of the REST API's messages that read differently on the command line."""


def in_flags(message: str, flag_of: Mapping[str, str] = FLAG_OF) -> str:
    """A message with the field names it mentions (those with an underscore: `ttft_ms`, not
    `rate`, a word of its own) spelled as the flags the user types."""
    for phrase, flags in PHRASES.items():
        message = message.replace(phrase, flags)
    return re.sub(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b",
                  lambda m: flag_of.get(m.group(0), m.group(0)), message)


def option(field: str) -> str:
    """How the flag behind a ProbeFlags field is spelled on the command line."""
    return {"base_url": "BASE_URL", "json_output": "--json"}.get(
        field, "--" + field.replace("_", "-"))


def for_kinds(field: str, text: str) -> str:
    """The help of a flag that only some API kinds take: `--api KIND: text`, the kinds being
    those whose protocol takes the flag's workload `field` (ApiProtocol.workload_fields)."""
    kinds = " | ".join(kind.value for kind, protocol in PROTOCOLS.items()
                       if field in protocol.workload_fields)
    return f"--api {kinds}: {text}"


KIND_FLAGS = {"voice": "voice", "audio_format": "audio_format",
              "stream_format": "stream_format", "output_images": "output_images",
              "output_image_size": "output_image_size", "partial_images": "partial_images",
              "poll_interval": "poll_interval_s"}
"""The flags made from a kind's workload field (`kind_flag`): ProbeFlags field -> Workload
field."""


def kind_flag(field: str) -> Flag:
    """The flag of a kind's Workload `field`, made from the workload model: the kinds that
    take it (for_kinds) and the first sentence of the field's description, past its own lead
    naming the kinds."""
    description = Workload.model_fields[field].description or field
    text = description.partition(": ")[2] or description
    return Flag(for_kinds(field, text.split(". ")[0].rstrip(".") + "."))


def kind_default(field: str) -> Any:
    """The Workload `field`'s default, as its flag's."""
    return Workload.model_fields[field].default


def kind_workload(flags: ProbeFlags) -> dict[str, Any]:
    """The Workload fields of the kind flags (KIND_FLAGS), as `flags` give them."""
    return {field: getattr(flags, flag) for flag, field in KIND_FLAGS.items()}


def parse_headers(pairs: object) -> object:
    """Repeated `--header NAME:VALUE` to a mapping; values other than a list pass unchanged."""
    if pairs is None:
        return {}
    if not isinstance(pairs, list):
        return pairs
    headers: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = str(pair).partition(":")
        if not sep or not name.strip():
            # without a colon the text may be a credential typed in the wrong place: not echoed
            raise FlagError(f"--header: expected NAME:VALUE (header {len(headers) + 1}, "
                            "its text not echoed)")
        headers[name.strip()] = value.strip()
    return headers


def none_if_empty(values: object) -> object:
    """A repeatable option given no times (click passes an empty tuple) as unset."""
    return None if isinstance(values, list | tuple) and not values else values


def parse_levels(text: object) -> object:
    """`--levels 1,2,4` to numbers; values other than text pass unchanged."""
    if not isinstance(text, str):
        return text
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise FlagError(f"--levels: expected numbers separated by commas, got {text!r}") from None


class ProbeFlags(BaseModel):
    """Every flag of `sustain probe`: the command's parameters are these fields (flags.py), each
    with its help text. `--header` and `--levels` arrive as typed and are kept parsed; the field
    order is the order in which problems are reported."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    base_url: Annotated[str, Flag("OpenAI-style base URL, e.g. http://127.0.0.1:8001/v1.",
                                  argument=True)]
    model: Annotated[str | None, Flag("Model name to request (required unless --api http).")] = None
    api: Annotated[str, Flag(" | ".join(KIND_NAMES) + ".")] = "openai-chat"
    header: Annotated[dict[str, str], BeforeValidator(parse_headers), Flag(
        "Extra request header NAME:VALUE (repeatable).", typed_as=list[str] | None)] = Field(
        default_factory=dict)
    levels: Annotated[list[float] | None, BeforeValidator(parse_levels), Flag(
        "Comma-separated: rates for steps, user counts for sweep.", typed_as=str | None)] = None
    profile: Annotated[str, Flag(
        "single | constant | poisson | concurrency | steps | sweep | trace | capacity | "
        "pareto.")] = "single"
    rate: Annotated[float | None, Flag("Requests/s (constant, poisson).")] = None
    burstiness: Annotated[float, Flag("Poisson gamma shape; 1 = Poisson, < 1 burstier.")] = 1.0
    concurrency: Annotated[int | None, Flag("Users (concurrency).")] = None
    duration: Annotated[float | None, Flag(
        "Seconds of measurement (per stage for steps and sweep). Default 10.")] = None
    max_requests: Annotated[int | None, Flag("Cap on measured requests.")] = None
    warmup: Annotated[float, Flag("Seconds of unmeasured warmup per stage.")] = 0.0
    workers: Annotated[int, Flag(
        "Worker processes to spread the load over, each sending its share (about one per free "
        "core; 1 measures in this process).")] = 1
    max_concurrency: Annotated[int | None, Flag(
        "capacity: the highest level tried; pareto: C_max.")] = None
    min_concurrency: Annotated[int, Flag("capacity: the first level.")] = 1
    points: Annotated[int, Flag("pareto: concurrency points (>= 7 for MLPerf).")] = 7
    slo_percentile: Annotated[float, Flag(
        "capacity: the percentile the --slo-* thresholds hold (50, 90, 95, 99, 99.9).")] = 99
    min_success: Annotated[float, Flag("capacity: the success ratio a level needs.")] = 0.99
    min_samples: Annotated[int | None, Flag(
        "capacity: a level runs on until it has this many requests.")] = None
    trace: Annotated[str | None, Flag(
        "Replay this request trace at its own arrival times (implies --profile trace).")] = None
    trace_format: Annotated[str, Flag("mooncake (JSONL) | azure (CSV).")] = "mooncake"
    speedup: Annotated[float, Flag("Replay the trace this many times faster.")] = 1.0
    input_tokens: Annotated[int, Flag(
        "Synthetic prompt length (tokens, as the server counts them).")] = 32
    output_tokens: Annotated[int, Flag("max_tokens per request.")] = 64
    no_stream: Annotated[bool, Flag("Ask for whole responses.", ("--no-stream",))] = False
    batch_size: Annotated[int, Flag(for_kinds("batch_size", "inputs per request."))] = 1
    dimensions: Annotated[int | None, Flag(for_kinds(
        "dimensions", "the vector length every answer must have."))] = None
    documents: Annotated[int, Flag(for_kinds("documents", "documents per request."))] = 8
    query_tokens: Annotated[int, Flag(for_kinds("query_tokens", "query length (words)."))] = 16
    audio_seconds: Annotated[float, Flag(for_kinds(
        "audio_s", "seconds of synthetic audio per request."))] = 5.0
    reasoning_effort: Annotated[ReasoningEffort | None, Flag(for_kinds(
        "reasoning_effort", "how long a reasoning model thinks: none, minimal, low, medium "
        "or high."))] = None
    thinking_budget_tokens: Annotated[int | None, Flag(for_kinds(
        "thinking_budget_tokens", "extended thinking with this many tokens at most "
        "(1024 or more)."))] = None
    voice: Annotated[str, kind_flag("voice")] = kind_default("voice")
    audio_format: Annotated[str, kind_flag("audio_format")] = kind_default("audio_format")
    stream_format: Annotated[str, kind_flag("stream_format")] = kind_default("stream_format")
    output_images: Annotated[int, kind_flag("output_images")] = kind_default("output_images")
    output_image_size: Annotated[str, kind_flag("output_image_size")] = kind_default(
        "output_image_size")
    partial_images: Annotated[int, kind_flag("partial_images")] = kind_default(
        "partial_images")
    poll_interval: Annotated[float, kind_flag("poll_interval_s")] = kind_default(
        "poll_interval_s")
    rag_corpus: Annotated[str | None, Flag(
        'RAG: a JSONL corpus of {"id", "text"} passages; BASE_URL then generates.')] = None
    rag_embed_url: Annotated[str | None, Flag(
        "--rag-corpus: the openai-embeddings endpoint's base URL.")] = None
    rag_embed_model: Annotated[str | None, Flag(
        "--rag-corpus: its model (default --model).")] = None
    rag_rerank_url: Annotated[str | None, Flag(
        "--rag-corpus: a rerank endpoint's base URL, to rerank what was retrieved.")] = None
    rag_rerank_model: Annotated[str | None, Flag(
        "--rag-rerank-url: its model (default --model).")] = None
    rag_pgvector_env: Annotated[str | None, Flag(
        "--rag-corpus: keep the index in PostgreSQL with pgvector, whose postgresql:// URL is "
        "in this environment variable (read from there only).")] = None
    rag_top_k: Annotated[int, Flag("--rag-corpus: passages retrieved.")] = 4
    rag_top_n: Annotated[int | None, Flag(
        "--rag-rerank-url: passages kept after reranking.")] = None
    images: Annotated[int | None, Flag(
        "Chat kinds: synthetic PNG images per request (salted per request).")] = None
    image_size: Annotated[str, Flag("--images: WIDTHxHEIGHT of each image.")] = "512x512"
    allow_cache: Annotated[bool, Flag(
        "Send the same prompts every run, so a prefix-caching server may serve them from its "
        "cache (default: a fresh salt per request keeps every prefill cold).",
        ("--allow-cache",))] = False
    shared_prefix_tokens: Annotated[int, Flag(
        "A stable shared prefix of this many tokens before the salt (a system prompt the "
        "cache may serve).")] = 0
    dataset: Annotated[str | None, Flag(
        "JSONL prompts, one request per line ({prompt} or {messages}, optional max_tokens), "
        "cycled in a seeded order.")] = None
    sessions: Annotated[str | None, Flag(
        "JSONL multi-turn sessions, one turn per line (conversation_id, turn, messages, "
        "optional tools, delay_s, max_tokens); users are conversations in flight.")] = None
    turns: Annotated[int | None, Flag(
        "Synthetic sessions: conversations of this many turns of --input-tokens each.")] = None
    turn_delay: Annotated[float, Flag(
        "Synthetic sessions: think time (s) before each turn after the first.")] = 0.0
    session_header: Annotated[bool, Flag(
        "Send each turn's conversation as X-Session-ID.", ("--session-header",))] = False
    api_key_env: Annotated[str | None, Flag(
        "Send `Authorization: Bearer $NAME`; the key itself is never printed.")] = None
    slo_ttft_ms: Annotated[float | None, Flag("Goodput: TTFT threshold.")] = None
    slo_tpot_ms: Annotated[float | None, Flag("Goodput: TPOT threshold.")] = None
    slo_ttfo_ms: Annotated[float | None, Flag(
        "Goodput: threshold on the time to the first answer output (after thinking).")] = None
    slo_e2e_ms: Annotated[float | None, Flag("Goodput: E2E threshold.")] = None
    http2: Annotated[bool, Flag("Offer HTTP/2 (https).", ("--http2",))] = False
    connection: Annotated[Literal["reuse", "new"], Flag(
        "reuse: kept-alive connections; new: a connection of its own per request, so each "
        "pays DNS, TCP and TLS as a new user does.")] = "reuse"
    metrics_url: Annotated[str | None, Flag(
        "The server's Prometheus metrics (e.g. http://vllm:8000/metrics), read during the "
        "run: queue, KV-cache use, prefix-cache hits, preemptions.")] = None
    metrics_interval: Annotated[float, Flag("Seconds between reads of --metrics-url.")] = 1.0
    accelerator: Annotated[str | None, Flag(
        "What serves the endpoint, e.g. H100-80GB (for the report).")] = None
    accelerators: Annotated[int | None, Flag(
        "Accelerators serving the endpoint, every role counted: tok/s per accelerator.")] = None
    price_per_hour: Annotated[float | None, Flag(
        "The deployment's price per hour: cost per million output and good tokens.")] = None
    currency: Annotated[str, Flag("Of --price-per-hour.")] = "USD"
    power_kw: Annotated[float | None, Flag("The deployment's power draw: tok/s per kW.")] = None
    watts_per_accelerator: Annotated[float | None, Flag(
        "Declared power per accelerator (with --accelerators), where --metrics-url is no "
        "DCGM exporter.")] = None
    gpus: Annotated[list[str] | None, BeforeValidator(none_if_empty), Flag(
        "The GPUs serving the endpoint, as the DCGM exporter labels them (index or UUID; "
        "repeatable).")] = None
    method: Annotated[str, AfterValidator(str.upper), Flag("--api http: request method.")] = "GET"
    expect_status: Annotated[int, Flag("--api http: expected status.")] = 200
    expect_body: Annotated[str | None, Flag(
        "--api http: text the response must contain.")] = None
    json_output: Annotated[bool, Flag("Print one JSON object only.", ("--json",))] = False
    html: Annotated[Path | None, Flag(
        "Also write the run as one self-contained HTML report (no script, no network) to this "
        "file.")] = None
    save: Annotated[bool, Flag("Store the result as a run.", ("--save",))] = False
    database_url: Annotated[str | None, Flag(
        "PostgreSQL URL; unset: embedded (env SUSTAIN_DATABASE_URL).", ("--database-url",))] = None
    data_dir: Annotated[Path | None, Flag("Data directory (env SUSTAIN_DATA_DIR).")] = None

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> Self:
        """The flags from the command's parameters, by name; FlagError lists every problem."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise flag_error(exc, {name: option(name) for name in cls.model_fields}) from None

    @field_validator("api")
    @classmethod
    def _model_unless_http(cls, api: str, info: ValidationInfo) -> str:
        if info.data.get("model") is None and not is_check(api):
            raise FlagError(f"--model is required with --api {api}")
        return api

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, kind: str) -> str:
        if kind not in PROFILE_KINDS:
            raise FlagError(f"--profile: unknown profile {kind!r} (one of "
                            f"{', '.join(sorted(PROFILE_KINDS))})")
        return kind

    @model_validator(mode="before")
    @classmethod
    def _trace_implies_its_profile(cls, values: Any) -> Any:
        if isinstance(values, dict) and values.get("trace") is not None:
            return {**values, "profile": "trace"}
        return values

    @model_validator(mode="after")
    def _profile_needs(self) -> Self:
        needed = REQUIRED_BY_PROFILE.get(self.profile)
        if needed is not None and getattr(self, needed) is None:
            raise FlagError(f"{option(needed)} is required with --profile {self.profile}")
        if self.profile == "sweep" and not all(level.is_integer() for level in self.levels or []):
            raise FlagError("--levels: sweep levels are whole numbers of users")
        return self

    @property
    def stream(self) -> bool:
        return not self.no_stream
