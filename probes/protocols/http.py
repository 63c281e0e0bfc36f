"""Plain `http` checks: not an LLM API, one request the endpoint's HttpCheck describes (method,
path, body, expected status and text), timed end to end by client/http_check.py. Its object
says so to the rest of the probes: the `check` form, no path of its own (the check's path
is), nothing streamed, no first token, no workload fields."""

from __future__ import annotations

from typing import ClassVar

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import Measurement
from sustain.probes.protocols.base import ApiProtocol, RequestForm


class HttpCheckKind(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.HTTP
    path: ClassVar[str] = ""
    """None of its own: a check's path is HttpCheck.path."""
    form: ClassVar[RequestForm] = "check"
    first_token: ClassVar[bool] = False

    @property
    def simulator_path(self) -> str:
        """Any route (the simulator's /health, say): a check needs nothing of it."""
        return ""

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        """A check is measured against its HttpCheck, by client/http_check.send_http."""
        raise NotImplementedError("an http check is measured by client/http_check.py")


HTTP = HttpCheckKind()
