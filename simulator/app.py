"""The simulator's ASGI app: /v1/models, /v1/chat/completions and /v1/completions, plus
/sim/fault, which reads (GET) or switches (PUT {"fault": "http_500", "fault_rate": 0.5}) the
injected fault at run time, and the batch limit (`max_batch`: a noisy neighbour taking half
the capacity), so a test can break and heal a live endpoint.

A bare ASGI callable rather than a web framework, so the simulator adds as little latency of
its own as possible and is never the bottleneck of a benchmark. Token times are absolute
deadlines from the request's arrival (first token at arrival + ttft, token k at arrival +
ttft + k * itl), so sleep overshoot never accumulates over a stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from sustain.simulator.config import FAULT_HEADER, Fault, SimulatorConfig
from sustain.simulator.metrics import EngineMetrics
from sustain.simulator.prefix_cache import PrefixCache

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

FAULT_PATH = "/sim/fault"
STATUS_FAULTS = {Fault.HTTP_400: 400, Fault.HTTP_429: 429, Fault.HTTP_500: 500}
AT_ONCE = frozenset({Fault.ONE_WRITE, Fault.USAGE_ONLY, Fault.IDENTICAL_TIMESTAMPS,
                     Fault.INSTANT})
"""Faults whose tokens are all due with the first one (TTFT after the start): no ITL."""
TEXT_ONLY = frozenset({Fault.OVERLONG, Fault.INSTANT})
"""Faults that answer in text even when a tool is offered (a call's arguments cannot be
stretched past their length, nor are they one text)."""


def _sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


async def _sleep_until(deadline: float) -> None:
    """Return once perf_counter() has reached `deadline` (s), never before: the event loop may
    wake a timer a little early, and a later deadline equal to this one must find itself due
    (so the events after it join the same write)."""
    while (delay := deadline - time.perf_counter()) > 0:  # noqa: ASYNC110 (a clock, no event)
        await asyncio.sleep(delay)


@dataclasses.dataclass(frozen=True, slots=True)
class _ToolCall:
    """A simulated function call: its arguments stream one piece per token."""

    id: str
    name: str
    pieces: tuple[str, ...]


def _tool_call(tools: list[Any], tokens: int) -> _ToolCall | None:
    """A call to the first function of `tools`, its arguments filling the function's
    required string properties (or `{}`), in at most `tokens` pieces."""
    function = next((t.get("function") for t in tools if isinstance(t, dict)
                     and isinstance(t.get("function"), dict)), None)
    if function is None or not isinstance(function.get("name"), str):
        return None
    parameters = function.get("parameters")
    required = parameters.get("required") if isinstance(parameters, dict) else None
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    arguments = json.dumps({name: f"value of {name}" for name in names})
    count = max(1, min(tokens, len(arguments)))
    size = -(-len(arguments) // count)
    pieces = tuple(arguments[i:i + size] for i in range(0, len(arguments), size))
    return _ToolCall("call_" + uuid.uuid4().hex[:12], function["name"], pieces)


class _Completion:
    """One simulated generation, chat or text completion, shaped like vLLM's responses."""

    def __init__(self, chat: bool, model: str, tokens: int, prompt_tokens: int,
                 cached_tokens: int | None = None, tool: _ToolCall | None = None) -> None:
        self.chat = chat
        self.model = model
        self.tool = tool
        self.tokens = len(tool.pieces) if tool is not None and tokens else tokens
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = cached_tokens
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]
        self.created = int(time.time())

    @staticmethod
    def token(k: int) -> str:
        return f"tok{k} "

    def text(self) -> str:
        """Every token's text, concatenated."""
        return "".join(self.token(k) for k in range(self.tokens))

    def output(self, k: int) -> dict[str, Any]:
        """Token `k` as a chunk: a word, or the next piece of the tool call's arguments
        (the first piece names the call)."""
        if self.tool is None:
            return self.delta(self.token(k), None)
        piece: dict[str, Any] = {"index": 0, "function": {"arguments": self.tool.pieces[k]}}
        if k == 0:
            piece.update(id=self.tool.id, type="function")
            piece["function"]["name"] = self.tool.name
        return self.chunk({"delta": {"tool_calls": [piece]}, "finish_reason": None})

    def chunk(self, choice: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [] if choice is None else [{"index": 0, "logprobs": None, **choice}],
        }

    def delta(self, text: str | None, finish: str | None) -> dict[str, Any]:
        if self.chat:
            delta = {} if text is None else {"content": text}
            return self.chunk({"delta": delta, "finish_reason": finish})
        return self.chunk({"text": text or "", "finish_reason": finish})

    def usage(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.tokens,
            "total_tokens": self.prompt_tokens + self.tokens,
        }
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage

    def whole(self, finish: str) -> dict[str, Any]:
        text = self.text()
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
        if self.chat and self.tool is not None and self.tokens:
            choice["message"] = {"role": "assistant", "content": None, "tool_calls": [{
                "id": self.tool.id, "type": "function", "function": {
                    "name": self.tool.name, "arguments": "".join(self.tool.pieces)}}]}
        elif self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(),
        }


def _message_text(message: dict[str, Any]) -> str:
    """A chat message's text: its content (a string or text parts) and, for an assistant's
    tool calls, their names and arguments (a server's template renders them too)."""
    content = message.get("content")
    parts = [content] if isinstance(content, str) else [
        p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
    ] if isinstance(content, list) else []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts += [str(function.get("name", "")), str(function.get("arguments", ""))]
    return " ".join(parts)


def _prompt_words(body: dict[str, Any]) -> list[str]:
    """The prompt's tokens: one per whitespace-separated word, over every message (the whole
    history of a multi-turn request)."""
    messages = body.get("messages")
    if isinstance(messages, list):
        text = " ".join(_message_text(m) for m in messages if isinstance(m, dict))
    else:
        text = str(body.get("prompt", ""))
    return text.split()


def _history_problem(messages: Any) -> str | None:
    """Why a chat history is not one a server accepts, or None: an assistant's tool calls
    must be answered, each by one tool message, before anything else is said (as OpenAI
    and vLLM's stricter templates require), and every tool result must answer such a call."""
    if not isinstance(messages, list):
        return "messages must be a list"
    pending: set[str] = set()
    for message in messages:
        if not isinstance(message, dict):
            return "each message must be an object"
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return (f"tool message answers no pending tool call "
                        f"({message.get('tool_call_id')!r})")
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            return f"tool calls {sorted(pending)} were not answered"
        if role == "assistant":
            pending = {call["id"] for call in message.get("tool_calls") or []
                       if isinstance(call, dict) and isinstance(call.get("id"), str)}
    if pending:
        return f"tool calls {sorted(pending)} were not answered"
    return None


def _wants_tool(body: dict[str, Any]) -> bool:
    """Whether the model 'decides' to call a tool: tools were offered, tool_choice allows,
    and the last message is not already a tool's result (then it answers in text)."""
    tools, messages = body.get("tools"), body.get("messages")
    if not (isinstance(tools, list) and tools and isinstance(messages, list) and messages):
        return False
    last = messages[-1]
    return body.get("tool_choice") != "none" and not (
        isinstance(last, dict) and last.get("role") == "tool")


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client disconnected first."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def _json(send: Send, status: int, payload: dict[str, Any],
                headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, status: int, message: str) -> None:
    await _json(send, status, {"error": {"message": message, "code": status}})


class SimulatorApp:
    """ASGI app for one SimulatorConfig; jitter and faults drawn from a seeded generator."""

    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)
        self._generations = 0
        self._slots = None if config.max_batch is None else asyncio.Semaphore(config.max_batch)
        self._cache = PrefixCache() if config.prefix_cache else None
        self.metrics = EngineMetrics(config.model, config.max_batch)
        self._truth = None if config.truth_log is None else open(  # noqa: SIM115
            config.truth_log, "a", encoding="utf-8", buffering=1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        arrival = time.perf_counter()
        method, path = scope["method"], scope["path"]
        if path != "/metrics" and not self._authorized(scope):  # as vLLM's --api-key
            await _error(send, 401, "invalid API key")
        elif path == "/health" and method in ("GET", "HEAD"):
            await _json(send, 200, {"status": "ok"})
        elif path == "/metrics" and method == "GET":
            body, media = self.metrics.exposition()
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
        elif path == "/v1/models" and method == "GET":
            await _json(send, 200, {"object": "list", "data": [
                {"id": self.config.model, "object": "model", "owned_by": "sustain-simulator"}]})
        elif path in ("/v1/chat/completions", "/v1/completions") and method == "POST":
            chat = path == "/v1/chat/completions"
            await self._generate(scope, receive, send, arrival, chat=chat)
        elif path == FAULT_PATH and method == "GET":
            await _json(send, 200, self._fault_state())
        elif path == FAULT_PATH and method == "PUT":
            await self._switch_fault(receive, send)
        elif path in ("/v1/models", "/v1/chat/completions", "/v1/completions", FAULT_PATH):
            await _error(send, 405, "method not allowed")
        else:
            await _error(send, 404, f"no route {path}")

    def _fault_state(self) -> dict[str, Any]:
        return {"fault": self.config.fault.value, "fault_rate": self.config.fault_rate,
                "max_batch": self.config.max_batch}

    async def _switch_fault(self, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        if body is None:
            return
        try:
            wanted = json.loads(body)
            fault = Fault(wanted.get("fault", self.config.fault.value))
            rate = float(wanted.get("fault_rate", self.config.fault_rate))
            batch = wanted.get("max_batch", self.config.max_batch)
        except (ValueError, TypeError, AttributeError) as exc:
            await _error(send, 422, f"bad fault switch: {exc}")
            return
        if not 0.0 <= rate <= 1.0:
            await _error(send, 422, "fault_rate: must be within [0, 1]")
            return
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                                  or not 1 <= batch <= 1_000_000):
            await _error(send, 422, "max_batch: must be an integer from 1, or null")
            return
        if batch != self.config.max_batch:  # requests in flight keep their old slots
            self._slots = None if batch is None else asyncio.Semaphore(batch)
            self.metrics.max_batch = batch
        self.config = dataclasses.replace(self.config, fault=fault, fault_rate=rate,
                                          max_batch=batch)
        await _json(send, 200, self._fault_state())

    def _authorized(self, scope: Scope) -> bool:
        if self.config.api_key is None:
            return True
        expected = f"Bearer {self.config.api_key}".encode()
        return any(name == b"authorization" and value == expected
                   for name, value in scope["headers"])

    def _fault(self, scope: Scope) -> Fault:
        self._generations += 1
        for name, value in scope["headers"]:
            if name == FAULT_HEADER.encode():
                try:
                    return Fault(value.decode("latin-1"))
                except ValueError:
                    return Fault.NONE
        every = self.config.error_every
        if every > 0 and self._generations % every == 0:
            return Fault.HTTP_500
        if self.config.fault is not Fault.NONE and self._rng.random() < self.config.fault_rate:
            return self.config.fault
        return Fault.NONE

    def _jitter(self, median_ms: float, sigma: float) -> float:
        """Seconds: the median, times a lognormal factor when sigma > 0."""
        factor = self._rng.lognormvariate(0.0, sigma) if sigma > 0 else 1.0
        return median_ms * factor / 1000.0

    async def _generate(self, scope: Scope, receive: Receive, send: Send, arrival: float,
                        *, chat: bool) -> None:
        config = self.config
        fault = self._fault(scope)
        raw = await _read_body(receive)
        if raw is None:
            return
        try:
            body = json.loads(raw)
        except ValueError:
            await _error(send, 400, "invalid JSON")
            return
        if not isinstance(body, dict):
            await _error(send, 400, "body must be a JSON object")
            return
        if fault is Fault.HTTP_429:
            await _json(send, 429, {"error": {"message": "injected http_429", "code": 429}},
                        headers=[(b"retry-after", str(config.retry_after_s).encode())])
            return
        if fault in STATUS_FAULTS:
            await _error(send, STATUS_FAULTS[fault], f"injected {fault}")
            return
        if fault is Fault.HANG and not await _hang(receive, config.hang_s):
            return
        if chat and (problem := _history_problem(body.get("messages"))) is not None:
            await _error(send, 400, problem)
            return
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        limit = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None
        tokens = config.output_tokens if limit is None else min(limit, config.output_tokens)
        finish = "length" if limit is not None and limit <= config.output_tokens else "stop"
        if fault is Fault.EMPTY:
            tokens = 0
        elif fault is Fault.SINGLE_TOKEN:
            tokens, finish = 1, "stop"
        elif fault is Fault.ZERO_TOKENS:
            tokens, finish = 0, "stop"
        elif fault is Fault.OVERLONG:
            tokens, finish = 2 * (limit or config.output_tokens) + 3, "length"
        words = _prompt_words(body)
        cached = None if self._cache is None else self._cache.admit(words)
        self.metrics.admitted(len(words), cached)
        tool = _tool_call(body["tools"], tokens) if chat and config.tool_calls and \
            fault not in TEXT_ONLY and _wants_tool(body) else None
        completion = _Completion(chat, str(body.get("model", config.model)), tokens,
                                 len(words), cached, tool)
        if tool is not None and completion.tokens:
            finish = "tool_calls"
        if self._cache is not None and chat and completion.tokens:
            # The reply's KV stays cached too (as in vLLM): a conversation's next turn, which
            # sends it back as history, finds it.
            reply = completion.whole(finish)["choices"][0]["message"]
            self._cache.admit(words + _message_text(reply).split())
        slots = self._slots  # a switch of max_batch meanwhile leaves this request's own
        if slots is not None:  # semaphore to it: its slot goes back where it came from
            with self.metrics.waiting():
                await slots.acquire()
        try:
            with self.metrics.running():
                await self._respond(scope, send, body, completion, arrival, fault, finish)
        finally:
            if slots is not None:
                slots.release()
        self.metrics.generated(completion.tokens)

    async def _respond(self, scope: Scope, send: Send, body: dict[str, Any],
                       completion: _Completion, arrival: float, fault: Fault,
                       finish: str) -> None:
        config = self.config
        start = time.perf_counter()
        prefill = completion.prompt_tokens - (completion.cached_tokens or 0)
        first = start + self._jitter(config.ttft_ms, config.ttft_sigma) + \
            config.prefill_ms_per_token * prefill / 1000.0
        token_times = [first]
        for _ in range(max(completion.tokens - 1, 0)):
            gap = 0.0 if fault in AT_ONCE else self._jitter(config.itl_ms, config.itl_sigma)
            token_times.append(token_times[-1] + gap)
        if not body.get("stream"):
            await _sleep_until(token_times[-1])
            whole = completion.whole(finish)
            if fault is Fault.USAGE_ONLY:
                whole["choices"] = []
            await _json(send, 200, whole)
            return
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        media = b"text/plain" if fault is Fault.WRONG_CONTENT_TYPE else b"text/event-stream"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", media), (b"cache-control", b"no-cache")]})
        marks: dict[str, float] = {}
        plan = _stream(completion, config, token_times, fault, finish, include_usage)
        waited = False
        pending: list[bytes] = []

        async def flush() -> None:
            if not pending:
                return
            data = b"".join(pending)
            pending.clear()
            if fault is Fault.TRICKLE:
                await self._trickle(send, data)
            else:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            now = time.perf_counter()
            marks.setdefault("first_byte", now)
            marks["last_byte"] = now
            if waited:
                marks.setdefault("first_token", now)

        for part in plan:
            if isinstance(part, float):
                if part > time.perf_counter():  # events already due go out in one write
                    await flush()
                    await _sleep_until(part)
                waited = True
                continue
            pending.append(part)
            if fault is Fault.IDENTICAL_TIMESTAMPS:  # one write per event, none coalesced
                await flush()
        await flush()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        if self._truth is not None:
            request_id = next((v.decode("latin-1") for n, v in scope["headers"]
                               if n == b"x-request-id"), None)
            self._truth.write(json.dumps({
                "id": completion.id, "request_id": request_id, "arrival": arrival,
                "start": start, "first_byte": marks.get("first_byte"),
                "first_token_due": first, "first_token": marks.get("first_token"),
                "last_byte": marks.get("last_byte")}) + "\n")

    async def _trickle(self, send: Send, data: bytes) -> None:
        step = max(1, self.config.trickle_bytes)
        for i in range(0, len(data), step):
            await send({"type": "http.response.body", "body": data[i:i + step],
                        "more_body": True})
            await asyncio.sleep(self.config.trickle_ms / 1000.0)


async def _hang(receive: Receive, seconds: float) -> bool:
    """Hold the request open; False when the client gave up first."""
    try:
        message = await asyncio.wait_for(receive(), timeout=seconds)
    except TimeoutError:
        return True
    return bool(message["type"] != "http.disconnect")


def _stream(completion: _Completion, config: SimulatorConfig, token_times: list[float],
            fault: Fault, finish: str, include_usage: bool) -> list[bytes | float]:
    """The stream as a plan: bytes to send, and floats that are deadlines to wait for. The
    bytes due by a deadline already past join the write of those before them."""
    usage = _sse({**completion.chunk(None), "usage": completion.usage()})
    if fault is Fault.USAGE_ONLY:
        return [token_times[0], usage, _sse("[DONE]")]
    plan: list[bytes | float] = []
    if fault in (Fault.ONE_WRITE, Fault.INSTANT):  # the role chunk waits for the rest
        plan.append(token_times[0])
    if completion.chat and fault is not Fault.ZERO_TOKENS:
        plan.append(_sse(completion.chunk({"delta": {"role": "assistant", "content": ""},
                                           "finish_reason": None})))
    if fault is Fault.INSTANT:
        plan.append(_sse(completion.delta(completion.text(), None)))
    middle = completion.tokens // 2
    for k in range(0 if fault is Fault.INSTANT else completion.tokens):
        plan.append(token_times[k])
        if fault is Fault.TRUNCATE and k >= middle:
            return plan
        if fault is Fault.MALFORMED and k == middle:
            plan.append(b'data: {"choices": [\n\n')
        elif fault is Fault.ERROR_EVENT and k == middle:
            plan.append(_sse({"error": {"message": "injected engine error", "code": 500}}))
            return plan
        elif fault is Fault.HUGE_CHUNK and k == middle:
            plan.append(_sse(completion.delta("x" * config.huge_chunk_bytes, None)))
        else:
            plan.append(_sse(completion.output(k)))
    if fault is Fault.TRUNCATE:
        return plan
    if not completion.tokens:
        plan.append(token_times[0])
    plan.append(_sse(completion.delta(None if completion.chat else "", finish)))
    if include_usage or fault is Fault.ZERO_TOKENS:
        plan.append(usage)
    plan.append(_sse("[DONE]"))
    return plan


def create_app(config: SimulatorConfig) -> SimulatorApp:
    return SimulatorApp(config)
