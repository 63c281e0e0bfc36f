"""Building request `seq` of a run: its words deterministically from the workload's seed, and
(by default) a fresh random salt in front of them, so that no request reuses another's cached
prompt prefix. A fixed seed alone made every run of a probe send the same prompts: against a
prefix-caching server (llama.cpp, vLLM, SGLang) every run after the first measured the
cached prefill, ~90x faster than a new user's."""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.expect import Expect
from sustain.probes.measure.prompt_tokens import PromptFit
from sustain.probes.protocols.registry import protocol_of
from sustain.probes.workload.audio import SaltedWav
from sustain.probes.workload.dataset import DatasetEntry, DatasetPolicy
from sustain.probes.workload.dataset_images import DatasetImages, load_dataset_images
from sustain.probes.workload.images import ImageMaker
from sustain.probes.workload.lengths import sample_length
from sustain.probes.workload.media import MediaHeld, MediaLimitError, media_problem
from sustain.probes.workload.sessions import Dialogue
from sustain.probes.workload.spec import Workload
from sustain.probes.workload.tokenizer import (
    FittedWordTokenizer,
    HFTokenizer,
    PromptTokenizer,
    WhitespaceTokenizer,
    cycled_words,
)
from sustain.probes.workload.traces import MOONCAKE_BLOCK_TOKENS, Replay, TraceRequest

MAX_CACHED_BLOCKS = 4096
"""Trace prefix blocks kept built (a block is built again once more are in use)."""
OUTPUT_LENGTH_KEYS = frozenset({"min_tokens", "max_completion_tokens", "max_output_tokens"})
"""Extra body keys a calibration request leaves out: it asks for one output token."""


class RequestBuilder:
    """Loads the dataset (where `datasets` allows; by default nowhere) and tokenizer once
    (raising DatasetError or ValueError before any request is sent), then builds bodies
    without I/O."""

    def __init__(self, workload: Workload, api_kind: ApiKind, model: str,
                 datasets: DatasetPolicy | None = None, replay: Replay | None = None) -> None:
        self.workload = workload
        self.replay = replay
        """A trace to replay: request `seq` has the prompt and output lengths of its
        `seq`-th request, and its prefix blocks (hash ids) as the trace shares them."""
        self._blocks: dict[tuple[int, int], str] = {}
        self.api_kind = api_kind
        self.protocol = protocol_of(api_kind)
        """How the kind's requests are built (probes/protocols)."""
        self.model = model
        self.tokenizer: PromptTokenizer = (
            HFTokenizer(workload.tokenizer, datasets or DatasetPolicy()) if workload.tokenizer
            else WhitespaceTokenizer())
        self.dataset: list[DatasetEntry] | None = None
        self._order: list[int] = []
        self.fit: PromptFit | None = None
        """The server's count of the synthetic words, once fitted (`calibrate`)."""
        self.prefix = self._shared_prefix()
        """The stable shared prefix: the same in every request and every run."""
        self._wav = SaltedWav(workload.audio_s, workload.seed) \
            if self.protocol.form == "audio" else None
        """A transcription probe's clip, made once before any request (audio.py)."""
        self.images = None if workload.images is None or not self.protocol.conversation \
            else ImageMaker(workload.images)
        """Synthetic images for each request's user message (chat kinds only)."""
        self.dataset_images: DatasetImages | None = None
        """The dataset's own images, read and decoded before any request."""
        if workload.dataset is not None:
            policy = datasets or DatasetPolicy()
            self.dataset = policy.load(workload.dataset)
            self._order = list(range(len(self.dataset)))
            random.Random(workload.seed).shuffle(self._order)
            if self.protocol.conversation:
                self.dataset_images = load_dataset_images(
                    self.dataset, workload.dataset, policy, salted=workload.cache == "defeat")
        self.media = self._media()
        """The media this builder holds, and the most one request carries (media.py)."""
        policy = datasets or DatasetPolicy()
        problem = media_problem(self.media, policy.run_users, policy.run_workers,
                                policy.media_max_bytes)
        if problem is not None:
            raise MediaLimitError(problem)

    def _media(self) -> MediaHeld:
        """Bytes of the decoded media shared by every request (the clip, the synthetic
        images' template, the dataset's images) and the most one request's body carries."""
        shared = per_request = 0
        if self._wav is not None:
            shared += len(self._wav.wav)
            per_request = len(self._wav.wav)
        if self.images is not None:
            shared += self.images.template.held_bytes
            per_request = max(per_request, self.images.request_bytes)
        if self.dataset_images is not None and self.dataset is not None:
            shared += self.dataset_images.held_bytes
            per_request = max(per_request, self.dataset_images.request_bytes(self.dataset))
        return MediaHeld(shared, per_request)

    def _shared_prefix(self) -> str:
        w = self.workload
        return "" if not w.shared_prefix_tokens else self.tokenizer.prompt(
            w.shared_prefix_tokens, random.Random(f"shared-prefix:{w.seed}"))

    @property
    def synthetic(self) -> bool:
        """Whether prompts are sized to a length in tokens (synthetic_prompts)."""
        return synthetic_prompts(self.workload, self.api_kind)

    @property
    def calibratable(self) -> bool:
        """Whether the prompts' length is to be fitted to the server's count (fitted)."""
        return fitted(self.workload, self.api_kind)

    def calibrate(self, fit: PromptFit) -> None:
        """Size every prompt from now on by `fit`, the server's count of the words: its
        tokens per word scale the words, its overhead comes off each request's length."""
        self.fit = fit
        self.tokenizer = FittedWordTokenizer(fit)
        self._blocks.clear()
        self.prefix = self._shared_prefix()

    def calibration_body(self, words: int) -> dict[str, Any]:
        """A request of `words` words in the vocabulary's order (cycled_words) behind a salt
        as the run's requests have one, asking for one output token: the server's count of
        it is a point of the fit. It is shaped as the run's requests are (protocol, extra
        body but for its output lengths, which one token could not meet), so the fit's
        overhead holds the server's template and the salt; but it attaches no images: a
        prompt's length is its text's, the images come on top."""
        body: dict[str, Any] = {key: value for key, value in self.workload.extra_body.items()
                                if key not in OUTPUT_LENGTH_KEYS}
        self._set_prompt(body, joined(self.salt(), cycled_words(words)))
        return self.finish(body, 1, 0, images=[])

    def requested_tokens(self, seq: int) -> int | None:
        """The prompt length request `seq` asks for, to set against the server's count: a
        synthetic prompt's, a trace request's; None for prompts of given text, for
        conversations (whose prompt is their history) and for requests with images (whose
        tokens the server counts with the text's)."""
        if not self.synthetic or self.workload.in_sessions or self.images is not None:
            return None
        if self.replay is not None:
            return self.replay.requests[seq % len(self.replay.requests)].input_tokens
        return self.prompt_tokens(seq)

    @property
    def order(self) -> list[int]:
        """The dataset's lines in the run's seeded order (request `seq` takes line
        `order[seq % len(order)]`)."""
        return self._order

    def _rng(self, seq: int) -> random.Random:
        return random.Random(self.workload.seed * 1_000_003 + seq)

    def prompt_tokens(self, seq: int) -> int:
        """The synthetic input length of request `seq`."""
        w = self.workload
        if w.input_length is None:
            return w.input_tokens
        return sample_length(w.input_length, self._rng(seq))

    def salt(self) -> str:
        """A fresh 64-bit salt (one word: one token of the default tokenizer); empty when
        the workload allows the cache."""
        return "" if self.workload.cache == "allow" else f"s{secrets.token_hex(8)}"

    def _lead(self, salt: str) -> str:
        """What goes in front of a request's own text: the shared prefix, then the salt."""
        return " ".join(part for part in (self.prefix, salt) if part)

    def body(self, seq: int) -> dict[str, Any]:
        """The JSON body of request `seq`; streaming asks for usage so tokens are
        server-counted."""
        if self.protocol.form == "items":
            return self._items_body(seq)
        w = self.workload
        body: dict[str, Any] = dict(w.extra_body)
        max_tokens = w.max_tokens
        if self.replay is not None:
            request = self.replay.requests[seq % len(self.replay.requests)]
            max_tokens = request.output_tokens
            self._set_prompt(body, self._traced(seq, request))
        elif self.dataset is not None:
            salt = self.salt()
            lead = self._lead(salt)
            entry = self.entry(seq)
            max_tokens = entry.max_tokens or max_tokens
            if self.protocol.conversation and entry.messages is not None:
                body["messages"] = led_messages(entry.messages, lead)
            else:
                self._set_prompt(body, joined(lead, entry.text()))
            if entry.images and self.dataset_images is not None:
                return self.finish(body, max_tokens, seq, self.dataset_images.data_uris(
                    entry, self._image_rng(seq)))
        elif w.prompt is not None:
            self._set_prompt(body, joined(self._lead(self.salt()), w.prompt))
        else:
            salt = self.salt()
            self._set_prompt(body, self._synthetic(seq, self._lead(salt), salt))
        return self.finish(body, max_tokens, seq)

    def _items_body(self, seq: int) -> dict[str, Any]:
        """An embeddings request (`batch_size` inputs) or a rerank request (a query of
        `query_tokens` and `documents` documents), each text salted on its own."""
        w = self.workload
        body: dict[str, Any] = dict(w.extra_body)
        self.protocol.item_body(
            body, self.model, w, lambda count: self._texts(seq, count),
            lambda: joined(self.salt(), self.tokenizer.prompt(
                w.query_tokens, random.Random(f"query:{w.seed}:{seq}"))))
        return body

    def _texts(self, seq: int, count: int) -> list[str]:
        """The `count` texts of request `seq`, each behind its own salt: the dataset's lines
        in their seeded order, the fixed prompt, or synthetic words of the input length."""
        texts = []
        for k in range(count):
            item = seq * count + k
            salt = self.salt()
            lead = self._lead(salt)
            if self.dataset is not None:
                entry = self.dataset[self._order[item % len(self._order)]]
                texts.append(joined(lead, entry.text()))
            elif self.workload.prompt is not None:
                texts.append(joined(lead, self.workload.prompt))
            else:
                texts.append(self._synthetic(item, lead, salt))
        return texts

    def audio(self, seq: int) -> tuple[dict[str, Any], bytes, float]:
        """Request `seq` of a transcription probe: its form fields (model, response_format,
        stream, and the workload's extra_body as further fields), its WAV, and the WAV's
        length in seconds."""
        w = self.workload
        assert self._wav is not None, "a transcription probe's builder"
        seed = secrets.randbits(63) if w.cache == "defeat" else w.seed * 1_000_003 + seq
        wav = self._wav.salted(seed)
        fields: dict[str, Any] = {str(k): v if isinstance(v, str) else json.dumps(v)
                                  for k, v in w.extra_body.items()}
        fields.update(model=self.model, response_format="json")
        if w.stream:
            fields["stream"] = "true"
        return fields, wav, self._wav.seconds

    def expected_items(self, body: dict[str, Any]) -> ExpectedItems:
        """What the answer to an item kind's `body` must hold (probes/client/expected.py)."""
        return self.protocol.expected_items(body, self.workload)

    def expectation(self, seq: int) -> Expect | None:
        """What request `seq`'s reply must meet, when its dataset line is a quality canary."""
        if self.dataset is None or self.replay is not None:
            return None
        return self.dataset[self._order[seq % len(self._order)]].expect

    def turn_body(self, seq: int, dialogue: Dialogue) -> dict[str, Any]:
        """The body of request `seq`, the next turn of `dialogue` (whose history grows by
        the turn's messages): history and the turn's messages, its tools and output cap. A
        synthetic turn's user message is `prompt_tokens(seq)` long; a shared prefix is the
        conversation's system prompt."""
        if self.prefix and not dialogue.history:
            dialogue.history.append({"role": "system", "content": self.prefix})
        turn = dialogue.request(
            lambda: self.tokenizer.prompt(self.prompt_tokens(seq), self._rng(seq)))
        body: dict[str, Any] = dict(self.workload.extra_body)
        body["messages"] = list(turn.messages)
        if turn.tools:
            body["tools"] = list(turn.tools)
        return self.finish(body, turn.max_tokens or self.workload.max_tokens, seq)

    def entry(self, seq: int) -> DatasetEntry:
        """Request `seq`'s dataset line."""
        assert self.dataset is not None
        return self.dataset[self._order[seq % len(self._order)]]

    def image_size(self, seq: int) -> str | None:
        """The size of the images request `seq` attaches (body()), as reported by TTFT per
        image size: its dataset line's, else the synthetic ones'; None without images."""
        if not self.protocol.conversation or self.replay is not None:
            return None
        if self.dataset is not None and self.dataset_images is not None:
            size = self.dataset_images.size(self.entry(seq))
            if size is not None:
                return size
        return None if self.images is None else self.images.spec.size

    def _image_rng(self, seq: int) -> np.random.Generator:
        """The salt of request `seq`'s images: fresh unless the cache is allowed."""
        w = self.workload
        return np.random.default_rng(secrets.randbits(63) if w.cache == "defeat"
                                     else [w.seed, seq])

    def finish(self, body: dict[str, Any], max_tokens: int, seq: int,
               images: list[str] | None = None) -> dict[str, Any]:
        """What every body carries: model, output cap, streaming (asking for usage, so
        tokens are server-counted) and sampling; then in the shape of the target's protocol
        (its `shape`, probes/protocols/shapes.py), with the workload's settings of its own
        kind (its `body_for`: a speech request's voice, an image request's size)."""
        w = self.workload
        body.update(model=self.model, max_tokens=max_tokens, stream=w.stream)
        if w.stream:
            body["stream_options"] = {"include_usage": True}
        if w.temperature is not None:
            body["temperature"] = w.temperature
        if w.top_p is not None:
            body["top_p"] = w.top_p
        if w.reasoning_effort is not None:
            body["reasoning_effort"] = w.reasoning_effort
        if w.thinking_budget_tokens is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": w.thinking_budget_tokens}
        if images is None and self.images is not None:
            images = self.images.data_uris(self._image_rng(seq))
        if images:
            attach_images(body, images)
        return self.protocol.body_for(body, w)

    def _traced(self, seq: int, request: TraceRequest) -> str:
        """A trace request's prompt: the run's salt, then its prefix blocks by hash id (the
        same text for the same id, so requests share exactly the blocks the trace says they
        share), or, without hash ids, words of its own; `input_tokens` long."""
        assert self.replay is not None
        parts = [self.replay.salt] if self.replay.salt else []
        left = request.input_tokens - self._fixed_tokens(self.replay.salt)
        for hash_id in request.hash_ids:
            if left <= 0:
                break
            size = min(MOONCAKE_BLOCK_TOKENS, left)
            block = self._blocks.get((hash_id, size))
            if block is None:
                block = self.tokenizer.prompt(size, random.Random(
                    f"block:{self.workload.seed}:{hash_id}"))
                if len(self._blocks) < MAX_CACHED_BLOCKS:
                    self._blocks[(hash_id, size)] = block
            parts.append(block)
            left -= size
        if left > 0:
            parts.append(self.tokenizer.prompt(left, self._rng(seq)))
        return " ".join(parts)

    def _synthetic(self, seq: int, lead: str, salt: str) -> str:
        """Request `seq`'s synthetic prompt after `lead`, the whole of it `prompt_tokens(seq)`
        long. A subword tokenizer may count the request's words differently once they follow
        the lead (a word after a space is another token), so the length is checked on the
        whole text and the words' share corrected, a few times at most."""
        target = self.prompt_tokens(seq)
        own = target - self.workload.shared_prefix_tokens - self._fixed_tokens(salt)
        text = joined(lead, self.tokenizer.prompt(max(1, own), self._rng(seq)))
        if isinstance(self.tokenizer, WhitespaceTokenizer) or not lead:
            return text
        for _ in range(4):
            got = self.tokenizer.count(text)
            if got == target or own + target - got < 1:
                break
            own += target - got
            text = joined(lead, self.tokenizer.prompt(own, self._rng(seq)))
        return text

    def _fixed_tokens(self, salt: str) -> int:
        """What every request's prompt holds besides its words: with a fit, its overhead
        (the server's template, the salt), else the salt's tokens."""
        if self.fit is not None:
            return round(self.fit.overhead_tokens)
        return self.tokenizer.count(salt) if salt else 0

    def _set_prompt(self, body: dict[str, Any], text: str) -> None:
        self.protocol.set_prompt(body, text)


def synthetic_prompts(workload: Workload, api_kind: ApiKind) -> bool:
    """Whether a run's prompts are made of the vocabulary's words, sized to a length in
    tokens (synthetic prompts and turns, trace replays), on a generation kind."""
    w = workload
    return (protocol_of(api_kind).counts_prompt and w.prompt is None and w.dataset is None
            and w.sessions is None and w.rag is None)


def fitted(workload: Workload, api_kind: ApiKind) -> bool:
    """Whether a run's prompts are sized by a fit of the server's count (calibrate): they
    are synthetic and no tokenizer file counts them."""
    return synthetic_prompts(workload, api_kind) and workload.tokenizer is None


def joined(lead: str, text: str) -> str:
    return f"{lead} {text}" if lead else text


def attach_images(body: dict[str, Any], uris: list[str]) -> None:
    """Images (data URIs) after the text of the body's last user message, as OpenAI chat
    content parts (probes/protocols/shapes.py converts them for the other protocols)."""
    messages = body.get("messages") or []
    user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    if user is None:
        return
    content = user.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) \
        else list(content or [])
    parts += [{"type": "image_url", "image_url": {"url": uri}} for uri in uris]
    user["content"] = parts


def led_messages(messages: Sequence[dict[str, Any]], lead: str) -> list[dict[str, Any]]:
    """A dataset's chat messages with `lead` (shared prefix and salt) at the start of the
    first message that is not the system prompt: a system prompt stays a stable prefix, as
    MLPerf allows, and everything after it is the request's own."""
    out = [dict(message) for message in messages]
    if not lead:
        return out
    for message in out:
        if message.get("role") == "system":
            continue
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = joined(lead, content)
        elif isinstance(content, list):
            message["content"] = [{"type": "text", "text": lead}, *content]
        else:
            continue
        break
    return out
