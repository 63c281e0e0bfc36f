"""Calibrating a run's synthetic prompts against the server's prompt count, with a stand-in
transport: what is sent, what is fitted, what is kept for the next run, and what a server
without usage leaves."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.calibrate import (
    CALIBRATION_WORDS,
    FITS,
    NO_USAGE,
    REQUEST_ID_PREFIX,
    FitCache,
    SizedPrompts,
    calibration_key,
)
from sustain.probes.load.drivers import Request
from sustain.probes.measure.prompt_tokens import PromptCalibration, PromptFit
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.streaming import EncodedRequest
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.images import ImageSpec
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.sessions import Dialogue
from sustain.probes.workload.spec import Workload

TARGET = Target(base_url="http://h/v1", api_kind=ApiKind.OPENAI_CHAT, model="m")


@pytest.fixture(autouse=True)
def no_fits() -> Iterator[None]:
    FITS.clear()
    yield
    FITS.clear()


class Server:
    """Counts a prompt's words as `per_word` tokens each, plus `overhead`; answers what
    `answer` says (usage, or a failure)."""

    def __init__(self, per_word: float = 1.6, overhead: int = 20, *,
                 usage: bool = True, error: ErrorClass | None = None) -> None:
        self.per_word, self.overhead, self.usage, self.error = per_word, overhead, usage, error
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    async def __call__(self, encoded: EncodedRequest, stream: bool, t_send_ns: int
                       ) -> Measurement:
        payload, headers = encoded
        assert stream  # as the workload's requests are
        assert t_send_ns > 0
        body = json.loads(payload)
        self.bodies.append(body)
        self.headers.append(headers)
        words = str(body["messages"][-1]["content"]).split()
        served = self.overhead + round(len(words) * self.per_word)
        return Measurement(ttft_ms=1.0, itl_ms=(), e2e_ms=1.0, output_tokens=1,
                           tokens_server_counted=True,
                           input_tokens=served if self.usage else None,
                           http_status=200 if self.error is None else 500,
                           error_class=self.error)


def unused(_seq: int, _dialogue: Dialogue | None = None, /) -> Request:
    raise AssertionError("calibrating builds no request of the run")


def sized(server: Server, **fields: object) -> SizedPrompts:
    builder = RequestBuilder(Workload.model_validate(fields), TARGET.api_kind, TARGET.model,
                             DatasetPolicy.unrestricted())
    return SizedPrompts(unused, builder, server, {"authorization": "Bearer k"}, TARGET)


async def test_two_requests_of_known_words_fit_the_server_s_count() -> None:
    server = Server(per_word=1.6, overhead=20)
    prompts = sized(server, input_tokens=330)
    calibration = await prompts.calibrate()
    assert [len(str(b["messages"][0]["content"]).split()) - 1 for b in server.bodies] \
        == list(CALIBRATION_WORDS)  # behind the salt
    assert all(b["max_tokens"] == 1 for b in server.bodies)
    assert all(h["x-request-id"].startswith(REQUEST_ID_PREFIX) for h in server.headers)
    assert all(h["authorization"] == "Bearer k" for h in server.headers)
    assert calibration.method == "server"
    assert calibration.tokens_per_word == pytest.approx(1.6, abs=0.01)
    assert calibration.overhead_tokens == pytest.approx(21.6, abs=1)  # the salt is a word
    assert not calibration.reused
    assert prompts.builder.fit == calibration.fit
    words = str(prompts.builder.body(0)["messages"][0]["content"]).split()
    assert 20 + round(len(words) * 1.6) == pytest.approx(330, rel=0.01)


async def test_the_next_run_to_the_same_endpoint_reuses_the_fit_sending_nothing() -> None:
    first = Server()
    await sized(first, input_tokens=100).calibrate()
    again = Server()
    calibration = await sized(again, input_tokens=500).calibrate()
    assert again.bodies == []
    assert calibration.reused
    other_shape = Server()
    await sized(other_shape, input_tokens=100, extra_body={"x": 1}).calibrate()
    assert len(other_shape.bodies) == 2


async def test_a_fit_another_worker_made_is_used_as_given() -> None:
    server = Server()
    known = PromptCalibration.of(PromptFit(2.0, 10.0))
    prompts = sized(server)
    assert (await prompts.calibrate(known)).fit == PromptFit(2.0, 10.0)
    assert server.bodies == []


async def test_a_server_without_usage_leaves_prompts_in_words_and_says_so() -> None:
    server = Server(usage=False)
    prompts = sized(server, input_tokens=50)
    calibration = await prompts.calibrate()
    assert calibration.method == "words"
    assert calibration.note is not None
    assert "no prompt token count" in calibration.note
    assert len(server.bodies) == 1  # nothing more to learn after the first
    assert len(str(prompts.builder.body(0)["messages"][0]["content"]).split()) == 50


async def test_a_server_without_usage_is_sent_no_calibration_in_the_next_run() -> None:
    await sized(Server(usage=False), input_tokens=50).calibrate()
    again = Server(usage=False)
    calibration = await sized(again, input_tokens=80).calibrate()
    assert again.bodies == []
    assert calibration.method == "words"
    assert calibration.reused
    assert calibration.note is not None
    assert "no prompt token count" in calibration.note


async def test_a_failed_calibration_request_is_tried_again_next_run() -> None:
    await sized(Server(error=ErrorClass.HTTP_5XX)).calibrate()
    again = Server()
    calibration = await sized(again).calibrate()
    assert len(again.bodies) == 2
    assert calibration.method == "server"


async def test_a_failed_calibration_request_names_its_error_class() -> None:
    calibration = await sized(Server(error=ErrorClass.HTTP_5XX)).calibrate()
    assert calibration.method == "words"
    assert calibration.note is not None
    assert "http_5xx" in calibration.note


async def test_prompts_shorter_than_the_overhead_get_a_note() -> None:
    calibration = await sized(Server(overhead=40), input_tokens=32).calibrate()
    assert calibration.method == "server"
    assert calibration.note is not None
    assert "served longer than asked" in calibration.note


async def test_a_tokenizer_file_counts_the_prompts_and_nothing_is_sent(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(["alpha beta gamma delta"] * 10,
                                  trainers.BpeTrainer(vocab_size=60))
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    server = Server()
    calibration = await sized(server, tokenizer=str(path)).calibrate()
    assert calibration == PromptCalibration(method="tokenizer")
    assert server.bodies == []


def test_fits_expire_and_the_oldest_go_first() -> None:
    now = [0.0]
    cache = FitCache(ttl_s=10.0, size=2, clock=lambda: now[0])
    fit = PromptCalibration.of(PromptFit(1.5, 3.0))
    cache.put("a", fit)
    cache.put("b", fit)
    cache.put("c", fit)
    assert cache.get("a") is None
    held = cache.get("b")
    assert held is not None
    assert held.reused
    now[0] = 10.5
    assert cache.get("c") is None
    cache.put("w", PromptCalibration(method="words", note=NO_USAGE))
    failed = cache.get("w")
    assert failed == PromptCalibration(method="words", note=NO_USAGE, reused=True)
    now[0] = 21.0
    assert cache.get("w") is None  # a failure expires as a fit does
    cache.put("f", PromptCalibration(method="words", note="a calibration request failed"))
    assert cache.get("f") is None  # a failed request is tried again
    cache.put("t", PromptCalibration(method="tokenizer"))
    assert cache.get("t") is None  # the workload's tokenizer, not the server's count


def test_the_key_tells_endpoints_models_and_request_shapes_apart() -> None:
    base = calibration_key(TARGET, Workload())
    assert base == calibration_key(TARGET, Workload(input_tokens=900, max_tokens=5))
    assert base != calibration_key(TARGET, Workload(cache="allow"))
    assert base != calibration_key(Target(base_url="http://h/v1", api_kind=ApiKind.OPENAI_CHAT,
                                          model="other"), Workload())
    assert base == calibration_key(TARGET, Workload(images=ImageSpec(count=1)))  # on top
