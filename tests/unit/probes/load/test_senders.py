"""One dispatch from a target to its sender: API kind first, then the transport."""

from __future__ import annotations

import json
from functools import partial

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.senders import (
    SESSION_HEADER,
    api_over_http1,
    api_over_httpx,
    http_check_over_httpx,
    sender_for,
    turn_request,
)
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.sessions import Conversation, SessionTurn, dialogue
from sustain.probes.workload.spec import Workload


@pytest.mark.parametrize("kind", [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_COMPLETIONS])
def test_openai_targets_take_the_lean_transport_unless_http2_is_offered(kind: ApiKind) -> None:
    assert sender_for(Target(base_url="http://h/v1", api_kind=kind, model="m")) \
        is api_over_http1
    assert sender_for(Target(base_url="http://h/v1", api_kind=kind, model="m", http2=True)) \
        is api_over_httpx


@pytest.mark.parametrize("http2", [False, True])
def test_http_targets_are_plain_checks_over_httpx(http2: bool) -> None:
    target = Target(base_url="http://h", api_kind=ApiKind.HTTP, model="n/a", http2=http2)
    assert sender_for(target) is http_check_over_httpx


async def test_a_bound_sender_builds_one_request_per_seq() -> None:
    openai = Target(base_url="http://h/v1", api_kind=ApiKind.OPENAI_CHAT, model="m")
    check = Target(base_url="http://h", api_kind=ApiKind.HTTP, model="n/a")
    async with HttpClients() as clients:
        prepare = sender_for(openai)(clients, openai, Workload(), {}, DatasetPolicy(), None)
        assert prepare(0) is not prepare(1)
        checks = sender_for(check)(clients, check, Workload(), {}, DatasetPolicy(), None)
        first, second = checks(0), checks(1)
        assert isinstance(first, partial)
        assert isinstance(second, partial)
        # the same check, each with a traceparent of its own
        assert first.args[:3] == second.args[:3]
        assert first.args[3]["traceparent"] != second.args[3]["traceparent"]


def test_a_turn_carries_its_history_tools_and_the_session_header() -> None:
    tools = ({"type": "function", "function": {"name": "f"}},)
    conversation = Conversation("c7", (SessionTurn(({"role": "user", "content": "hi"},),
                                                   tools=tools, max_tokens=9),))
    builder = RequestBuilder(Workload(turns=1), ApiKind.OPENAI_CHAT, "m")
    with_header = dialogue(conversation, allow_cache=True, header=True)
    payload, headers = turn_request(builder, 0, with_header, {"x-extra": "1"})
    body = json.loads(payload)
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["tools"] == list(tools)
    assert body["max_tokens"] == 9
    assert headers[SESSION_HEADER] == with_header.session_id
    assert headers["x-extra"] == "1"
    assert with_header.session_id is not None
    assert with_header.session_id.startswith("c7-")
    _, plain = turn_request(builder, 1, dialogue(conversation, allow_cache=True, header=False),
                            {})
    assert SESSION_HEADER not in plain
