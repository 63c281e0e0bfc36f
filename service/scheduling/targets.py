"""Endpoint fields to the probe library's Target: one mapping for stored endpoints (ORM rows)
and for ones built from CLI flags (the API schema), which spell their fields the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from pydantic import BaseModel

from sustain.probes.client.target import (
    CLIENT_HEADERS,
    ApiKind,
    HttpCheck,
    RagEndpoints,
    Target,
)
from sustain.probes.measure.deployment import Deployment
from sustain.probes.measure.slo import SloThresholds


class EndpointFields(Protocol):
    """What a Target is made from: an `Endpoint` row or an `EndpointCreate`."""

    @property
    def base_url(self) -> Any: ...
    @property
    def api_kind(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def auth_secret_ref(self) -> str | None: ...
    @property
    def timeout_connect_s(self) -> float: ...
    @property
    def timeout_first_token_s(self) -> float: ...
    @property
    def timeout_total_s(self) -> float: ...
    @property
    def tls_verify(self) -> bool: ...
    @property
    def http2(self) -> bool: ...
    @property
    def http_check(self) -> HttpCheck | Mapping[str, Any] | None: ...
    @property
    def metrics_url(self) -> Any: ...
    @property
    def metrics_interval_s(self) -> float: ...
    @property
    def metrics_names(self) -> Sequence[str]: ...
    @property
    def deployment(self) -> Deployment | Mapping[str, Any] | None: ...


class SloFields(Protocol):
    """A probe's per-request SLO thresholds in ms (None: not judged)."""

    @property
    def slo_ttft_ms(self) -> float | None: ...
    @property
    def slo_tpot_ms(self) -> float | None: ...
    @property
    def slo_ttfo_ms(self) -> float | None: ...
    @property
    def slo_e2e_ms(self) -> float | None: ...


def target_of(endpoint: EndpointFields) -> Target:
    """The Target a probe of `endpoint` sends to; the secret stays a reference. Headers only
    the HTTP client may set (framing, Host, hop-by-hop), which an endpoint saved before they
    were refused may still hold, are left out: the client sets its own."""
    check = endpoint.http_check
    return Target(
        base_url=str(endpoint.base_url),
        api_kind=ApiKind(endpoint.api_kind),
        model=endpoint.model,
        headers={name: value for name, value in endpoint.headers.items()
                 if name.lower() not in CLIENT_HEADERS},
        auth_secret_ref=endpoint.auth_secret_ref,
        timeout_connect_s=endpoint.timeout_connect_s,
        timeout_first_token_s=endpoint.timeout_first_token_s,
        timeout_total_s=endpoint.timeout_total_s,
        tls_verify=endpoint.tls_verify,
        http2=endpoint.http2,
        http_check=None if check is None
        else check if isinstance(check, BaseModel) else HttpCheck.model_validate(check),
        metrics_url=None if endpoint.metrics_url is None else str(endpoint.metrics_url),
        metrics_interval_s=endpoint.metrics_interval_s,
        metrics_names=tuple(endpoint.metrics_names),
        deployment=None if (deployment := endpoint.deployment) is None
        else deployment if isinstance(deployment, Deployment)
        else Deployment.model_validate(deployment),
    )


def probe_target(endpoint: EndpointFields, embed: EndpointFields | None = None,
                 rerank: EndpointFields | None = None) -> Target:
    """The Target of a probe of `endpoint`; a RAG probe's embeddings and rerank endpoints
    (`embed`, `rerank`) ride along in its `rag`."""
    target = target_of(endpoint)
    if embed is None:
        return target
    return replace(target, rag=RagEndpoints(
        embed=target_of(embed), rerank=None if rerank is None else target_of(rerank)))


def slo_of(probe: SloFields) -> SloThresholds:
    """A probe's per-request thresholds."""
    return SloThresholds(ttft_ms=probe.slo_ttft_ms, tpot_ms=probe.slo_tpot_ms,
                         ttfo_ms=probe.slo_ttfo_ms, e2e_ms=probe.slo_e2e_ms)
