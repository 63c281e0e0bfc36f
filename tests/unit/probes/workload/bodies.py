"""What the request-builder tests share: a builder of a workload's fields, and the words of a
request body's prompt."""

from __future__ import annotations

import re

from sustain.probes.client.target import ApiKind
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload

SALT = re.compile(r"^s[0-9a-f]{16}$")
"""A request's salt: `s` and 16 hex digits."""


def builder(api: ApiKind = ApiKind.OPENAI_CHAT, **fields: object) -> RequestBuilder:
    return RequestBuilder(Workload.model_validate(fields), api, "m",
                          DatasetPolicy.unrestricted())


def words(body: dict[str, object]) -> list[str]:
    if "prompt" in body:
        return str(body["prompt"]).split()
    return str(body["messages"][-1]["content"]).split()  # type: ignore[index]
