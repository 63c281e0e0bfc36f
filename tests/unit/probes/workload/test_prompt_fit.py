"""A request builder sized by a fit of the server's prompt count: the words scaled by its
tokens per word, its overhead taken off every request's length."""

from __future__ import annotations

from sustain.probes.client.target import ApiKind
from sustain.probes.measure.prompt_tokens import PromptFit
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload
from sustain.probes.workload.tokenizer import VOCABULARY, cycled_words
from sustain.probes.workload.traces import Replay, TraceRequest
from tests.unit.probes.workload.bodies import SALT, builder, words

BPE = PromptFit(tokens_per_word=1.6, overhead_tokens=27.0)


def test_a_fitted_prompt_has_the_words_the_server_counts_as_the_length_asked() -> None:
    b = builder(input_tokens=330)
    assert len(words(b.body(0))) == 330  # unfitted: a word a token, the salt one of them
    b.calibrate(BPE)
    prompt = words(b.body(0))
    assert SALT.match(prompt[0])
    assert len(prompt[1:]) == round((330 - 27) / 1.6)  # the salt is in the overhead
    assert b.requested_tokens(0) == 330


def test_a_fitted_shared_prefix_is_scaled_and_stays_the_same_in_every_request() -> None:
    b = builder(input_tokens=330, shared_prefix_tokens=160)
    b.calibrate(BPE)
    first, second = words(b.body(0)), words(b.body(1))
    assert first[:100] == second[:100]  # 160 tokens: 100 words
    assert SALT.match(first[100])
    assert len(first) - 101 == round((330 - 160 - 27) / 1.6)


def test_a_length_below_the_overhead_still_sends_one_word() -> None:
    b = builder(input_tokens=8, cache="allow")
    b.calibrate(BPE)
    assert len(words(b.body(0))) == 1


def test_a_calibration_request_is_shaped_as_the_run_s_and_asks_for_one_token() -> None:
    b = builder(api=ApiKind.OPENAI_COMPLETIONS,
                extra_body={"ignore_eos": True, "min_tokens": 64})
    body = b.calibration_body(len(VOCABULARY))
    assert body["max_tokens"] == 1
    assert body["ignore_eos"] is True
    assert "min_tokens" not in body  # one token could not meet it
    assert body["stream_options"] == {"include_usage": True}
    prompt = words(body)
    assert SALT.match(prompt[0])
    assert " ".join(prompt[1:]) == cycled_words(len(VOCABULARY)) == " ".join(VOCABULARY)
    unsalted = builder(cache="allow").calibration_body(3)
    assert words(unsalted) == VOCABULARY[:3]


def test_only_synthetic_prompts_of_generation_kinds_ask_for_a_length() -> None:
    assert builder(input_tokens=40).requested_tokens(5) == 40
    uniform = builder(input_length={"kind": "uniform", "min": 10, "max": 90})
    assert uniform.requested_tokens(3) == uniform.prompt_tokens(3)
    assert uniform.calibratable
    fixed = builder(prompt="a fixed prompt")
    assert fixed.requested_tokens(0) is None
    assert not fixed.synthetic
    turns = builder(turns=3)
    assert turns.requested_tokens(0) is None  # a turn's prompt is its whole history
    assert turns.calibratable  # its new messages are sized all the same
    embeddings = builder(api=ApiKind.OPENAI_EMBEDDINGS)
    assert embeddings.requested_tokens(0) is None
    assert not embeddings.calibratable


def test_images_come_on_top_of_the_length_and_no_calibration_request_attaches_them() -> None:
    b = builder(input_tokens=64, images={"count": 2, "width": 64, "height": 64})
    assert isinstance(b.body(0)["messages"][0]["content"], list)  # text, then the images
    assert b.calibration_body(32)["messages"][0]["content"].split()[1:] \
        == cycled_words(32).split()
    assert b.requested_tokens(0) is None  # the server counts the images with the text
    assert b.calibratable


def test_a_fitted_trace_request_is_sized_to_its_own_length_with_shared_blocks() -> None:
    replay = Replay((TraceRequest(0.0, 1100, 4, (7, 8)), TraceRequest(0.1, 700, 4, (7,))),
                    "s0123456789abcdef")
    b = RequestBuilder(Workload(), ApiKind.OPENAI_COMPLETIONS, "m", replay=replay)
    b.calibrate(PromptFit(tokens_per_word=2.0, overhead_tokens=7.0))
    first, second = words(b.body(0)), words(b.body(1))
    assert (b.requested_tokens(0), b.requested_tokens(1)) == (1100, 700)
    assert first[0] == second[0] == "s0123456789abcdef"
    assert first[1:257] == second[1:257]  # block 7: 512 tokens, 256 words, in both
    assert len(first) - 1 == round((1100 - 7) / 2.0)  # two blocks of 256 words, the rest
    assert len(second) - 1 == 256 + round((700 - 7 - 512) / 2.0)
