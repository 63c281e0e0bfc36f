"""The flags of `sustain probe`, parsed and checked once: ProbeFlags.

Problems are FlagErrors whose message names the flag (`--rate is required with --profile
constant`, `--header: expected NAME:VALUE, ...`), so the command can print them as they are.
What the flags describe (endpoint, workload, load profile, SLO) is validated by the models the
REST API uses, in `oneshot.build`; `flag_error` names the flag of each of their problems too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Self

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

FLAG_OF = {
    "rate": "--rate", "burstiness": "--burstiness", "users": "--concurrency",
    "levels": "--levels", "stages": "--levels", "duration_s": "--duration",
    "max_requests": "--max-requests", "warmup_s": "--warmup", "input_tokens": "--input-tokens",
    "max_tokens": "--output-tokens", "base_url": "BASE_URL", "model": "--model",
    "api_kind": "--api", "headers": "--header", "auth_secret_ref": "--api-key-env",
    "kind": "--profile", "ttft_ms": "--slo-ttft-ms", "tpot_ms": "--slo-tpot-ms",
    "e2e_ms": "--slo-e2e-ms", "method": "--method", "expected_status": "--expect-status",
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
    "metrics_interval_s": "--metrics-interval",
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
        messages.append(f"{flag}: {error['msg']}")
    return FlagError("; ".join(messages))


def option(field: str) -> str:
    """How the flag behind a ProbeFlags field is spelled on the command line."""
    return {"base_url": "BASE_URL", "json_output": "--json"}.get(
        field, "--" + field.replace("_", "-"))


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


def parse_levels(text: object) -> object:
    """`--levels 1,2,4` to numbers; values other than text pass unchanged."""
    if not isinstance(text, str):
        return text
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise FlagError(f"--levels: expected numbers separated by commas, got {text!r}") from None


class ProbeFlags(BaseModel):
    """Every flag of `sustain probe`, one field per parameter of the command and named like
    it (the help texts live on the command). `--header` and `--levels` arrive as typed and are
    kept parsed; the field order is the order in which problems are reported."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    base_url: str
    model: str | None = None
    api: str = "openai-chat"
    header: Annotated[dict[str, str], BeforeValidator(parse_headers)] = Field(
        default_factory=dict)
    levels: Annotated[list[float] | None, BeforeValidator(parse_levels)] = None
    profile: str = "single"
    rate: float | None = None
    burstiness: float = 1.0
    concurrency: int | None = None
    duration: float | None = None
    max_requests: int | None = None
    warmup: float = 0.0
    workers: int = 1
    max_concurrency: int | None = None
    min_concurrency: int = 1
    points: int = 7
    slo_percentile: float = 99
    min_success: float = 0.99
    min_samples: int | None = None
    trace: str | None = None
    trace_format: str = "mooncake"
    speedup: float = 1.0
    input_tokens: int = 32
    output_tokens: int = 64
    no_stream: bool = False
    allow_cache: bool = False
    shared_prefix_tokens: int = 0
    dataset: str | None = None
    sessions: str | None = None
    turns: int | None = None
    turn_delay: float = 0.0
    session_header: bool = False
    api_key_env: str | None = None
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_e2e_ms: float | None = None
    http2: bool = False
    metrics_url: str | None = None
    metrics_interval: float = 1.0
    accelerator: str | None = None
    accelerators: int | None = None
    price_per_hour: float | None = None
    currency: str = "USD"
    power_kw: float | None = None
    method: Annotated[str, AfterValidator(str.upper)] = "GET"
    expect_status: int = 200
    expect_body: str | None = None
    json_output: bool = False
    html: Path | None = None
    save: bool = False
    database_url: str | None = None
    data_dir: Path | None = None

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
        if info.data.get("model") is None and api != "http":
            raise FlagError(f"--model is required with --api {api}")
        return api

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, kind: str) -> str:
        if kind not in PROFILE_KINDS:
            raise FlagError(f"--profile: unknown profile {kind!r}")
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
