"""Endpoint bodies. The auth secret is a reference; header values that carry credentials are
refused so that no secret is ever stored or returned."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Literal
from urllib.parse import unquote_plus, urlsplit

from pydantic import (
    AfterValidator,
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from sustain.probes.client.secrets import SECRET_REF_PATTERN
from sustain.probes.client.target import CLIENT_HEADERS, HttpCheck, client_headers
from sustain.probes.inputs import InputModel
from sustain.probes.measure.deployment import Deployment
from sustain.probes.protocols.registry import KIND_NAMES, is_check
from sustain.probes.telemetry.families import MAX_EXTRA_NAMES, NAME_PATTERN
from sustain.service.schemas.common import (
    MAX_HEADER_BYTES,
    MAX_HEADER_NAME_CHARS,
    MAX_HEADER_VALUE_CHARS,
    MAX_HEADERS,
    MAX_MODEL_CHARS,
    DbId,
    Documented,
    Labels,
    Name,
    Text,
    Url,
    patch_schema,
    reject_nulls,
)
from sustain.service.schemas.patterns import none_of

if TYPE_CHECKING:
    ApiKindName = str
else:  # one of the registry's kinds, in its order (the OpenAPI schema's enum)
    ApiKindName = Literal[KIND_NAMES]
SecretRef = Annotated[str, StringConstraints(pattern=SECRET_REF_PATTERN, max_length=1024)]
HeaderName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_HEADER_NAME_CHARS,
                                              pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")]


def _printable_ascii(value: str) -> str:
    if not all(ch == "\t" or " " <= ch <= "~" for ch in value):
        raise ValueError("must be printable ASCII (what HTTP clients can send in a header)")
    return value


HeaderValue = Annotated[str, StringConstraints(max_length=MAX_HEADER_VALUE_CHARS),
                        AfterValidator(_printable_ascii)]
Model = Annotated[Text, StringConstraints(min_length=1, max_length=MAX_MODEL_CHARS)]
Timeout = Annotated[float, Field(gt=0, le=3600)]
MetricsInterval = Annotated[float, Field(ge=0.2, le=60)]
SeriesName = Annotated[str, StringConstraints(pattern=NAME_PATTERN.pattern)]

CREDENTIAL_WORDS = ("token", "key", "secret", "auth", "credential", "password", "passwd",
                    "signature")
"""A header or URL parameter whose name holds one of these looks like a credential
(X-Auth-Token, X-Goog-Api-Key, Ocp-Apim-Subscription-Key, Private-Token, x-amz-credential)."""
CREDENTIAL_NAMES = frozenset({"cookie", "code", "sig", "jwt"})
"""Names that carry credentials without a word above: a cookie, OAuth's `code`, the `sig` of
an Azure shared access signature, a bare JWT."""
CREDENTIAL_SCHEMES = ("bearer ", "basic ", "digest ", "negotiate ", "token ")
"""A header value starting with an auth scheme is a credential, whatever the header's name."""


HEADER_NAME_PATTERN = (
    "^" + none_of(CLIENT_HEADERS | CREDENTIAL_NAMES, "is") + none_of(CREDENTIAL_WORDS, "contains")
    + r"[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
"""A header an endpoint may give: a token, neither one the HTTP client sets itself nor one
that carries credentials (see _check_headers)."""
HEADER_VALUE_PATTERN = "^" + none_of(CREDENTIAL_SCHEMES, "starts") + r"[\t -~]*$"
"""Printable ASCII, not starting with an auth scheme."""
Headers = Annotated[dict[HeaderName, HeaderValue], Field(max_length=MAX_HEADERS), Documented({
    "patternProperties": None,
    "propertyNames": {"minLength": 1, "maxLength": MAX_HEADER_NAME_CHARS,
                      "pattern": HEADER_NAME_PATTERN},
    "additionalProperties": {"type": "string", "maxLength": MAX_HEADER_VALUE_CHARS,
                             "pattern": HEADER_VALUE_PATTERN}})]


def looks_like_credential(name: str) -> bool:
    """Whether a header or URL parameter named `name` would carry a secret."""
    lowered = name.lower()
    return lowered in CREDENTIAL_NAMES or any(word in lowered for word in CREDENTIAL_WORDS)


def _check_headers(headers: dict[str, str] | None) -> dict[str, str] | None:
    """Refuse headers the HTTP client sets itself (framing, the host, hop-by-hop: the error
    names the first, as `headers.<Name>`, and lists them all), more than MAX_HEADER_BYTES of
    names and values, and headers that carry credentials."""
    if reserved := client_headers(headers or {}):
        raise PydanticCustomError(
            "client_header", "{names}: set by the HTTP client itself (message framing, the "
            "host and hop-by-hop headers may not be given)",
            {"field": reserved[0], "names": ", ".join(reserved)})
    size = sum(len(name) + len(value) for name, value in (headers or {}).items())
    if size > MAX_HEADER_BYTES:
        raise PydanticCustomError(
            "too_large", "at most {limit} bytes of header names and values in all, not {size}",
            {"limit": MAX_HEADER_BYTES, "size": size})
    for name, value in (headers or {}).items():
        if looks_like_credential(name) or value.lower().startswith(CREDENTIAL_SCHEMES):
            raise ValueError(
                f"header {name!r} carries credentials; use auth_secret_ref (env:NAME or "
                "file:/path) so the secret is never stored"
            )
    return headers


def check_query_has_no_credentials(query: str) -> None:
    """Refuse a query string (or fragment) with a parameter that looks like a credential; the
    message names the parameter, never its value."""
    for pair in query.replace(";", "&").split("&"):
        name = unquote_plus(pair.partition("=")[0])
        if name and looks_like_credential(name):
            raise ValueError(f"parameter {name!r} looks like a credential; use "
                             "auth_secret_ref")


def check_url_has_no_credentials(url: AnyHttpUrl | None) -> AnyHttpUrl | None:
    if url is None:
        return None
    if url.username or url.password:
        raise ValueError("must not contain credentials; use auth_secret_ref")
    check_query_has_no_credentials(url.query or "")
    if url.fragment:
        raise ValueError("must not have a fragment (#...): it is never sent, and may hold a "
                         "token")
    return url


class _EndpointFields(InputModel):
    @field_validator("headers", check_fields=False)
    @classmethod
    def _headers(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return _check_headers(value)

    @field_validator("base_url", "metrics_url", check_fields=False)
    @classmethod
    def _base_url(cls, value: AnyHttpUrl | None) -> AnyHttpUrl | None:
        return check_url_has_no_credentials(value)

    @field_validator("http_check", check_fields=False)
    @classmethod
    def _check_path(cls, value: HttpCheck | None) -> HttpCheck | None:
        if value is not None:
            parts = urlsplit(value.path)
            check_query_has_no_credentials(parts.query)
            check_query_has_no_credentials(parts.fragment)
        return value


CHECK_ONLY_FOR_HTTP: JsonDict = {"anyOf": [
    {"required": ["api_kind"], "properties": {"api_kind": {"enum": [
        k for k in KIND_NAMES if is_check(k)]}}},
    {"properties": {"http_check": {"type": "null"}}}]}
"""http_check only with an api_kind that is a check (http)."""


class EndpointCreate(_EndpointFields):
    model_config = ConfigDict(json_schema_extra=CHECK_ONLY_FOR_HTTP)

    name: Name
    base_url: Url = Field(description="API root, e.g. http://vllm:8000/v1")
    api_kind: ApiKindName = "openai-chat"
    model: Model
    headers: Headers = Field(
        default_factory=dict,
        description=f"Extra request headers: at most {MAX_HEADERS}, {MAX_HEADER_BYTES} bytes "
        "of names and values in all; none the HTTP client sets itself (Host, Content-Length, "
        "Transfer-Encoding, Connection and other hop-by-hop headers), none carrying "
        "credentials (use auth_secret_ref).")
    auth_secret_ref: SecretRef | None = Field(
        default=None, description="env:NAME or file:/path; sent as a bearer token."
    )
    timeout_connect_s: Timeout = 5.0
    timeout_first_token_s: Timeout = 30.0
    timeout_total_s: Timeout = 120.0
    tls_verify: bool = True
    http2: bool = Field(default=False, description="Offer HTTP/2 (https endpoints).")
    http_check: HttpCheck | None = Field(
        default=None, description="api_kind http: the request to send and what to expect.")
    metrics_url: Url | None = Field(
        default=None, description="The server's own Prometheus metrics (e.g. vLLM's "
        "http://vllm:8000/metrics), scraped during every run of the endpoint's probes: "
        "queue, KV-cache use, prefix-cache hits and preemptions beside the client's figures.")
    metrics_interval_s: MetricsInterval = Field(
        default=1.0, description="Seconds between scrapes of metrics_url during a run.")
    metrics_names: list[SeriesName] = Field(
        default_factory=list, max_length=MAX_EXTRA_NAMES,
        description="Sample names to read besides the built-in series.")
    deployment: Deployment | None = Field(
        default=None, description="What serves the endpoint (accelerator, accelerators, "
        "price_per_hour, currency, power_kw): each run's efficiency and cost per million "
        "output and good tokens.")
    labels: Labels = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_only_for_http(self) -> EndpointCreate:
        if self.http_check is not None and not is_check(self.api_kind):
            raise PydanticCustomError("http_check", "only used with api_kind http",
                                      {"field": "http_check"})
        return self


class EndpointUpdate(_EndpointFields):
    """PATCH body: only the fields given change."""

    model_config = ConfigDict(json_schema_extra=patch_schema(
        frozenset({"auth_secret_ref", "metrics_url", "deployment"})))

    name: Name | None = None
    base_url: Url | None = None
    api_kind: ApiKindName | None = None
    model: Model | None = None
    headers: Headers | None = None
    auth_secret_ref: SecretRef | None = None
    timeout_connect_s: Timeout | None = None
    timeout_first_token_s: Timeout | None = None
    timeout_total_s: Timeout | None = None
    tls_verify: bool | None = None
    metrics_url: Url | None = None
    metrics_interval_s: MetricsInterval | None = None
    metrics_names: list[SeriesName] | None = Field(default=None, max_length=MAX_EXTRA_NAMES)
    deployment: Deployment | None = None
    labels: Labels | None = None


    @model_validator(mode="after")
    def _nulls(self) -> EndpointUpdate:
        reject_nulls(self, frozenset({"auth_secret_ref", "metrics_url", "deployment"}))
        return self


class EndpointRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: DbId
    name: str
    base_url: str
    api_kind: ApiKindName
    model: str
    headers: dict[str, str]
    auth_secret_ref: str | None
    timeout_connect_s: float
    timeout_first_token_s: float
    timeout_total_s: float
    tls_verify: bool
    http2: bool
    http_check: HttpCheck | None
    metrics_url: str | None = None
    metrics_interval_s: float = 1.0
    metrics_names: list[str] = Field(default_factory=list)
    deployment: Deployment | None = None
    labels: dict[str, str]
    created_at: datetime
    updated_at: datetime
