"""Building request `seq` of a run, deterministically from the workload's seed."""

from __future__ import annotations

import random
from typing import Any

from sustain.probes.client.target import ApiKind
from sustain.probes.workload.dataset import DatasetEntry, DatasetPolicy
from sustain.probes.workload.lengths import sample_length
from sustain.probes.workload.spec import Workload
from sustain.probes.workload.tokenizer import HFTokenizer, PromptTokenizer, WhitespaceTokenizer


class RequestBuilder:
    """Loads the dataset (where `datasets` allows; by default nowhere) and tokenizer once
    (raising DatasetError or ValueError before any request is sent), then builds bodies
    without I/O."""

    def __init__(self, workload: Workload, api_kind: ApiKind, model: str,
                 datasets: DatasetPolicy | None = None) -> None:
        self.workload = workload
        self.api_kind = api_kind
        self.model = model
        self.tokenizer: PromptTokenizer = (
            HFTokenizer(workload.tokenizer) if workload.tokenizer else WhitespaceTokenizer())
        self.dataset: list[DatasetEntry] | None = None
        self._order: list[int] = []
        if workload.dataset is not None:
            self.dataset = (datasets or DatasetPolicy()).load(workload.dataset)
            self._order = list(range(len(self.dataset)))
            random.Random(workload.seed).shuffle(self._order)

    def _rng(self, seq: int) -> random.Random:
        return random.Random(self.workload.seed * 1_000_003 + seq)

    def prompt_tokens(self, seq: int) -> int:
        """The synthetic input length of request `seq`."""
        w = self.workload
        if w.input_length is None:
            return w.input_tokens
        return sample_length(w.input_length, self._rng(seq))

    def body(self, seq: int) -> dict[str, Any]:
        """The JSON body of request `seq`; streaming asks for usage so tokens are
        server-counted."""
        w = self.workload
        body: dict[str, Any] = dict(w.extra_body)
        max_tokens = w.max_tokens
        if self.dataset is not None:
            entry = self.dataset[self._order[seq % len(self._order)]]
            max_tokens = entry.max_tokens or max_tokens
            if self.api_kind is ApiKind.OPENAI_CHAT and entry.messages is not None:
                body["messages"] = list(entry.messages)
            else:
                self._set_prompt(body, entry.text())
        elif w.prompt is not None:
            self._set_prompt(body, w.prompt)
        else:
            rng = self._rng(seq)
            self._set_prompt(body, self.tokenizer.prompt(self.prompt_tokens(seq), rng))
        body.update(model=self.model, max_tokens=max_tokens, stream=w.stream)
        if w.stream:
            body["stream_options"] = {"include_usage": True}
        if w.temperature is not None:
            body["temperature"] = w.temperature
        if w.top_p is not None:
            body["top_p"] = w.top_p
        return body

    def _set_prompt(self, body: dict[str, Any], text: str) -> None:
        if self.api_kind is ApiKind.OPENAI_CHAT:
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
