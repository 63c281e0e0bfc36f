"""The simulator's ASGI app: /v1/models, the generation protocols (/v1/chat/completions,
/v1/completions, /v1/responses as OpenAI's Responses API, /v1/messages as Anthropic's), the
item kinds (/v1/embeddings, /v1/rerank), transcriptions (/v1/audio/transcriptions), the media
kinds (speech, /v1/audio/speech: speech.py; images, /v1/images/generations:
image_generation.py; video jobs, /v1/videos and /v1/videos/{id}[/content]: videos.py), plus
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
from collections.abc import Callable
from typing import Any

from sustain.simulator.asgi import (
    Receive,
    Scope,
    Send,
    hang,
    header,
    json_body,
    read_body,
    send_error,
    send_json,
    send_raw,
    sleep_until,
)
from sustain.simulator.completion import (
    HISTORY_PROBLEM,
    Completion,
    StreamEvents,
    message_text,
    prompt_token_count,
    prompt_words,
    stream_plan,
    tool_call,
    wants_tool,
)
from sustain.simulator.config import AT_ONCE, FAULT_HEADER, Fault, SimulatorConfig
from sustain.simulator.gpu_power import GpuPowerCollector
from sustain.simulator.images import image_tokens
from sustain.simulator.items import embeddings, rerank
from sustain.simulator.media_routes import MediaRoutes
from sustain.simulator.messages import MessagesEvents
from sustain.simulator.metrics import EngineMetrics
from sustain.simulator.prefix_cache import PrefixCache
from sustain.simulator.responses import ResponsesEvents
from sustain.simulator.transcriptions import TranscriptionEvents, read_form
from sustain.simulator.videos import VideoJobs, video_route

FAULT_PATH = "/sim/fault"
MESSAGES_PATH = "/v1/messages"
GENERATE = {"/v1/chat/completions": "chat", "/v1/completions": "completions",
            "/v1/responses": "responses", MESSAGES_PATH: "messages",
            "/v1/audio/transcriptions": "transcriptions"}
"""Generation paths -> the protocol their answers speak."""
CHAT_SHAPED = frozenset({"chat", "responses", "messages"})
"""Protocols whose prompt is messages, which a chat template wraps."""
ITEMS = {"/v1/embeddings": "embeddings", "/v1/rerank": "rerank"}
"""Paths of the item kinds -> their answers (items.py)."""
SPEECH_PATH = "/v1/audio/speech"
IMAGES_PATH = "/v1/images/generations"
VIDEOS_PATH = "/v1/videos"
MEDIA = {SPEECH_PATH: "speech", IMAGES_PATH: "images", VIDEOS_PATH: "videos"}
"""Paths of the media kinds -> what they make (speech.py)."""
EVENTS: dict[str, Callable[[Completion], StreamEvents]] = {
    "chat": lambda completion: completion, "completions": lambda completion: completion,
    "responses": ResponsesEvents, "messages": MessagesEvents}
"""A protocol -> its events for a completion (completion.py's StreamEvents)."""
STATUS_FAULTS = {Fault.HTTP_400: 400, Fault.HTTP_429: 429, Fault.HTTP_500: 500}
TEXT_ONLY = frozenset({Fault.OVERLONG, Fault.INSTANT})
"""Faults that answer in text even when a tool is offered (a call's arguments cannot be
stretched past their length, nor are they one text)."""


class SimulatorApp(MediaRoutes):
    """ASGI app for one SimulatorConfig; jitter and faults drawn from a seeded generator."""

    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)
        self._generations = 0
        self._slots = None if config.max_batch is None else asyncio.Semaphore(config.max_batch)
        self._cache = PrefixCache() if config.prefix_cache else None
        self.metrics = EngineMetrics(config.model, config.max_batch)
        if config.gpu_power_w is not None:
            self.metrics.registry.register(GpuPowerCollector(config.gpu_power_w, config.gpus))
        self._videos = VideoJobs()
        self._truth = None if config.truth_log is None else open(  # noqa: SIM115
            config.truth_log, "a", encoding="utf-8", buffering=1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        arrival = time.perf_counter()
        method, path = scope["method"], scope["path"]
        if path != "/metrics" and not self._authorized(scope, path):  # as vLLM's --api-key
            await send_error(send, 401, "invalid API key")
        elif path == MESSAGES_PATH and not header(scope, b"anthropic-version"):
            await send_error(send, 400, "anthropic-version: header is required")
        elif path == "/health" and method in ("GET", "HEAD"):
            await send_json(send, 200, {"status": "ok"})
        elif path == "/metrics" and method == "GET":
            body, media = self.metrics.exposition()
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
        elif path == "/v1/models" and method == "GET":
            await send_json(send, 200, {"object": "list", "data": [
                {"id": self.config.model, "object": "model", "owned_by": "sustain-simulator"}]})
        elif path in GENERATE and method == "POST":
            await self._generate(scope, receive, send, arrival, kind=GENERATE[path])
        elif path in ITEMS and method == "POST":
            await self._items(scope, receive, send, arrival, kind=ITEMS[path])
        elif path == SPEECH_PATH and method == "POST":
            await self._speech(scope, receive, send, arrival)
        elif path == IMAGES_PATH and method == "POST":
            await self._images(scope, receive, send, arrival)
        elif path == VIDEOS_PATH and method == "POST":
            await self._create_video(scope, receive, send)
        elif (route := video_route(path, VIDEOS_PATH)) is not None and \
                method in ("GET", "DELETE"):
            await self._video(send, arrival, *route, delete=method == "DELETE")
        elif path == FAULT_PATH and method == "GET":
            await send_json(send, 200, self._fault_state())
        elif path == FAULT_PATH and method == "PUT":
            await self._switch_fault(receive, send)
        elif path in ("/v1/models", *GENERATE, *ITEMS, *MEDIA, FAULT_PATH) or \
                video_route(path, VIDEOS_PATH) is not None:
            await send_error(send, 405, "method not allowed")
        else:
            await send_error(send, 404, f"no route {path}")

    def _fault_state(self) -> dict[str, Any]:
        return {"fault": self.config.fault.value, "fault_rate": self.config.fault_rate,
                "max_batch": self.config.max_batch}

    async def _switch_fault(self, receive: Receive, send: Send) -> None:
        body = await read_body(receive)
        if body is None:
            return
        try:
            wanted = json.loads(body)
            fault = Fault(wanted.get("fault", self.config.fault.value))
            rate = float(wanted.get("fault_rate", self.config.fault_rate))
            batch = wanted.get("max_batch", self.config.max_batch)
        except (ValueError, TypeError, AttributeError) as exc:
            await send_error(send, 422, f"bad fault switch: {exc}")
            return
        if not 0.0 <= rate <= 1.0:
            await send_error(send, 422, "fault_rate: must be within [0, 1]")
            return
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                                  or not 1 <= batch <= 1_000_000):
            await send_error(send, 422, "max_batch: must be an integer from 1, or null")
            return
        if batch != self.config.max_batch:  # requests in flight keep their old slots
            self._slots = None if batch is None else asyncio.Semaphore(batch)
            self.metrics.max_batch = batch
        self.config = dataclasses.replace(self.config, fault=fault, fault_rate=rate,
                                          max_batch=batch)
        await send_json(send, 200, self._fault_state())

    def _authorized(self, scope: Scope, path: str) -> bool:
        """A bearer token (as vLLM --api-key); on /v1/messages, as Anthropic takes it, the
        key in `x-api-key`."""
        if self.config.api_key is None:
            return True
        if path == MESSAGES_PATH:
            return header(scope, b"x-api-key") == self.config.api_key.encode()
        return header(scope, b"authorization") == f"Bearer {self.config.api_key}".encode()

    def _unknown_model(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """vLLM's 404 body for a request naming another model than this one's, when the
        simulator is strict about it (`strict_model`); None to serve the request."""
        named = body.get("model")
        if not self.config.strict_model or named is None or named == self.config.model:
            return None
        return {"object": "error", "message": f"The model `{named}` does not exist.",
                "type": "NotFoundError", "param": None, "code": 404}

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

    async def _accepted(self, receive: Receive, send: Send, fault: Fault,
                        form: str | None = None) -> dict[str, Any] | None:
        """The request's JSON body (its multipart form, given the form's content type), once
        any fault that answers before it (a status, a hang) has passed; None when the request
        was answered (or the client left) already."""
        raw = await read_body(receive)
        if raw is None:
            return None
        body = json_body(raw) if form is None else read_form(form, raw)
        if isinstance(body, str):
            await send_error(send, 400, body)
            return None
        if (unknown := self._unknown_model(body)) is not None:
            await send_json(send, 404, unknown)
            return None
        if fault is Fault.HTTP_429:
            await send_json(send, 429, {"error": {"message": "injected http_429", "code": 429}},
                        headers=[(b"retry-after", str(self.config.retry_after_s).encode())])
            return None
        if fault in STATUS_FAULTS:
            await send_error(send, STATUS_FAULTS[fault], f"injected {fault}")
            return None
        if fault is Fault.HANG and not await hang(receive, self.config.hang_s):
            return None
        return body

    async def _items(self, scope: Scope, receive: Receive, send: Send, arrival: float,
                     *, kind: str) -> None:
        """An embeddings or rerank answer, whole, due ttft + prefill per word + item_ms per
        input or document after it starts (FIFO behind max_batch like a generation)."""
        config = self.config
        fault = self._fault(scope)
        body = await self._accepted(receive, send, fault)
        if body is None:
            return
        answer = embeddings(body, config.model, config.embedding_dimensions, fault) \
            if kind == "embeddings" else rerank(body, config.model, fault)
        if isinstance(answer, str):
            await send_error(send, 400, answer)
            return
        payload, items, words = answer
        self.metrics.admitted(words, None)
        slots = self._slots
        if slots is not None:
            with self.metrics.waiting():
                await slots.acquire()
        try:
            with self.metrics.running():
                start = time.perf_counter()
                due = start + self._jitter(config.ttft_ms, config.ttft_sigma) + (
                    config.prefill_ms_per_token * words + config.item_ms * items) / 1000.0
                await sleep_until(due)
                if fault is Fault.MALFORMED:
                    await send_raw(send, b'{"data": [{"embedding": [0.1,')
                else:
                    await send_json(send, 200, payload)
                done = time.perf_counter()
        finally:
            if slots is not None:
                slots.release()
        self._log_truth(scope, str(payload.get("id", kind)), arrival=arrival, start=start,
                        first_byte=done, first_token_due=due, first_token=None, last_byte=done)

    async def _generate(self, scope: Scope, receive: Receive, send: Send, arrival: float,
                        *, kind: str) -> None:
        config = self.config
        fault = self._fault(scope)
        form = None
        if kind == "transcriptions":
            form = (header(scope, b"content-type") or b"").decode("latin-1")
        body = await self._accepted(receive, send, fault, form)
        if body is None:
            return
        check = HISTORY_PROBLEM.get(kind)
        if check is not None and (problem := check(body.get("messages", body.get("input")))
                                  ) is not None:
            await send_error(send, 400, problem)
            return
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or \
            body.get("max_output_tokens")
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
        words = prompt_words(body)
        cached_words = None if self._cache is None else self._cache.admit(words)
        per_token = config.prompt_chars_per_token
        prompt = prompt_token_count(words, per_token) + (
            config.chat_template_tokens if kind in CHAT_SHAPED else 0)
        cached = None if cached_words is None else \
            prompt_token_count(words[:cached_words], per_token)
        self.metrics.admitted(prompt, cached)  # images are not prefix-cached
        tool = tool_call(body["tools"], tokens) if kind != "completions" and \
            config.tool_calls and fault not in TEXT_ONLY and wants_tool(body) else None
        pictures = image_tokens(body)
        completion = Completion(kind != "completions", str(body.get("model", config.model)),
                                tokens, prompt + pictures, cached, tool,
                                reasoning=config.reasoning_tokens if kind in CHAT_SHAPED
                                else 0)
        if tool is not None and completion.tokens:
            finish = "tool_calls"
        if self._cache is not None and kind in HISTORY_PROBLEM and completion.tokens:
            # The reply's KV stays cached too (as in vLLM): a conversation's next turn, which
            # sends it back as history, finds it.
            reply = completion.whole(finish)["choices"][0]["message"]
            self._cache.admit(words + message_text(reply).split())
        slots = self._slots  # a switch of max_batch meanwhile leaves this request's own
        if slots is not None:  # semaphore to it: its slot goes back where it came from
            with self.metrics.waiting():
                await slots.acquire()
        events = TranscriptionEvents(completion, body["audio_s"]) if form is not None \
            else EVENTS[kind](completion)
        extra_ms = config.audio_ms_per_s * body["audio_s"] if form is not None else 0.0
        try:
            with self.metrics.running():
                await self._respond(scope, send, body, events, arrival, fault, finish,
                                    extra_ms)
        finally:
            if slots is not None:
                slots.release()
        self.metrics.generated(completion.tokens)

    async def _respond(self, scope: Scope, send: Send, body: dict[str, Any],
                       events: StreamEvents, arrival: float, fault: Fault,
                       finish: str, extra_ms: float = 0.0) -> None:
        """`extra_ms`: added to the first token's time (a transcription's audio)."""
        config = self.config
        completion = events.completion
        start = time.perf_counter()
        prefill = completion.prompt_tokens - (completion.cached_tokens or 0)
        first = start + self._jitter(config.ttft_ms, config.ttft_sigma) + \
            (config.prefill_ms_per_token * prefill + extra_ms) / 1000.0
        token_times = [first]
        for _ in range(max(completion.tokens - 1, 0)):
            gap = 0.0 if fault in AT_ONCE else self._jitter(config.itl_ms, config.itl_sigma)
            token_times.append(token_times[-1] + gap)
        if not body.get("stream") or config.ignore_stream:
            await sleep_until(token_times[-1])
            whole = events.whole(finish)
            if fault is Fault.USAGE_ONLY:
                for key in ("choices", "output", "content"):  # each protocol's output
                    if key in whole:
                        whole[key] = []
            await send_json(send, 200, whole)
            done = time.perf_counter()
            self._log_truth(scope, completion.id, arrival=arrival, start=start, first_byte=done,
                            first_token_due=first, first_token=None, last_byte=done)
            return
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        media = b"text/plain" if fault is Fault.WRONG_CONTENT_TYPE else b"text/event-stream"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", media), (b"cache-control", b"no-cache")]})
        marks: dict[str, float] = {}
        plan = stream_plan(events, config, token_times, fault, finish, include_usage)
        waited = False
        deadlines = 0  # the deadlines waited for so far: token k's is the (k + 1)th
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
            if deadlines > completion.reasoning:
                marks.setdefault("first_answer", now)

        for part in plan:
            if isinstance(part, float):
                if part > time.perf_counter():  # events already due go out in one write
                    await flush()
                    await sleep_until(part)
                waited = True
                deadlines += 1
                continue
            pending.append(part)
            if fault is Fault.IDENTICAL_TIMESTAMPS:  # one write per event, none coalesced
                await flush()
        await flush()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        self._log_truth(scope, completion.id, arrival=arrival, start=start,
                        first_byte=marks.get("first_byte"), first_token_due=first,
                        first_token=marks.get("first_token"),
                        first_answer=marks.get("first_answer"),
                        reasoning_tokens=completion.reasoning,
                        last_byte=marks.get("last_byte"))

    def _log_truth(self, scope: Scope, answer_id: str, **marks: float | None) -> None:
        """One line of the truth log (when kept): the request's x-request-id and W3C
        traceparent, and when this server handed each part of its answer to the kernel
        (perf_counter s). A whole (non-streamed) answer has no first token; its first and
        last byte are one write."""
        if self._truth is None:
            return
        request_id = next((v.decode("latin-1") for n, v in scope["headers"]
                           if n == b"x-request-id"), None)
        traceparent = next((v.decode("latin-1") for n, v in scope["headers"]
                            if n == b"traceparent"), None)
        self._truth.write(json.dumps({"id": answer_id, "request_id": request_id,
                                      "traceparent": traceparent, **marks}) + "\n")

    async def _trickle(self, send: Send, data: bytes) -> None:
        step = max(1, self.config.trickle_bytes)
        for i in range(0, len(data), step):
            await send({"type": "http.response.body", "body": data[i:i + step],
                        "more_body": True})
            await asyncio.sleep(self.config.trickle_ms / 1000.0)


def create_app(config: SimulatorConfig) -> SimulatorApp:
    return SimulatorApp(config)
