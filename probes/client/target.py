"""Where and how a probe sends its requests: the endpoint as plain data."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class ApiKind(enum.StrEnum):
    OPENAI_CHAT = "openai-chat"
    OPENAI_COMPLETIONS = "openai-completions"
    HTTP = "http"


@dataclass(frozen=True, slots=True)
class Target:
    """An endpoint to measure. The auth secret is a reference, resolved at request time."""

    base_url: str
    api_kind: ApiKind
    model: str
    headers: Mapping[str, str] = field(default_factory=dict)
    auth_secret_ref: str | None = None
    timeout_connect_s: float = 5.0
    timeout_first_token_s: float = 30.0
    timeout_total_s: float = 120.0
    tls_verify: bool = True
