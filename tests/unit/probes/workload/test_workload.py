"""Workloads: seeded synthetic prompts with length distributions, JSONL datasets, a local
Hugging Face tokenizer, and bodies that pass vendor parameters through."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from pydantic import ValidationError

from sustain.probes.client.target import ApiKind
from sustain.probes.workload.dataset import DatasetError, DatasetPolicy
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import MAX_EXTRA_BODY_BYTES, Workload


def builder(api: ApiKind = ApiKind.OPENAI_CHAT, **fields: object) -> RequestBuilder:
    """A builder that may read datasets anywhere (where they may be read from is
    test_dataset_policy.py's subject)."""
    return RequestBuilder(Workload.model_validate(fields), api, "llama",
                          DatasetPolicy.unrestricted())


def prompt_of(body: dict[str, object]) -> str:
    if "prompt" in body:
        return str(body["prompt"])
    return str(body["messages"][0]["content"])  # type: ignore[index]


def test_synthetic_prompts_have_the_input_length_and_are_seeded() -> None:
    b = builder(input_tokens=40, seed=3)
    assert len(prompt_of(b.body(0)).split()) == 40
    allowed = builder(input_tokens=40, seed=3, cache="allow")
    assert prompt_of(allowed.body(5)) == prompt_of(
        builder(input_tokens=40, seed=3, cache="allow").body(5))
    assert prompt_of(b.body(5)) != prompt_of(b.body(6))


@pytest.mark.parametrize(
    ("length", "check"),
    [
        ({"kind": "fixed", "tokens": 17}, lambda xs: set(xs) == {17}),
        ({"kind": "uniform", "min": 10, "max": 20},
         lambda xs: min(xs) == 10 and max(xs) == 20 and 14 < statistics.mean(xs) < 16),
        ({"kind": "normal", "mean": 100, "stddev": 10},
         lambda xs: 98 < statistics.mean(xs) < 102 and 9 < statistics.stdev(xs) < 11),
    ],
)
def test_input_length_distributions(length: dict[str, object], check: object) -> None:
    b = builder(input_length=length, seed=1)
    lengths = [len(prompt_of(b.body(seq)).split()) for seq in range(2000)]
    assert check(lengths)  # type: ignore[operator]


def test_streaming_chat_body_asks_for_usage_and_passes_extra_body_through() -> None:
    body = builder(max_tokens=16, temperature=0.0, top_p=0.9,
                   extra_body={"ignore_eos": True, "min_tokens": 16}).body(0)
    assert body["model"] == "llama"
    assert body["max_tokens"] == 16
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True
    assert body["min_tokens"] == 16
    assert body["temperature"] == 0.0
    assert body["top_p"] == 0.9
    assert body["messages"][0]["role"] == "user"


def test_completions_body_uses_prompt_and_non_streaming_omits_stream_options() -> None:
    body = builder(ApiKind.OPENAI_COMPLETIONS, stream=False, prompt="Hello",
                   cache="allow").body(0)
    assert body["prompt"] == "Hello"
    assert "messages" not in body
    assert "stream_options" not in body


def test_jsonl_dataset_of_prompts_and_chats_is_cycled_in_a_seeded_order(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    lines = [{"prompt": "first"},
             {"messages": [{"role": "system", "content": "be brief"},
                           {"role": "user", "content": "second"}], "max_tokens": 5},
             {"prompt": "third"}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    b = builder(dataset=str(path), seed=2, cache="allow")
    bodies = [b.body(seq) for seq in range(6)]
    texts = [json.dumps(body.get("messages") or body.get("prompt")) for body in bodies]
    assert texts[:3] == texts[3:]
    assert len(set(texts[:3])) == 3
    chat = next(body for body in bodies if len(body["messages"]) == 2)
    assert chat["max_tokens"] == 5
    as_completion = builder(ApiKind.OPENAI_COMPLETIONS, dataset=str(path)).body(0)
    assert isinstance(as_completion["prompt"], str)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "ok"}\n{not json}\n', "prompts.jsonl:2: invalid JSON"),
        ('{"prompt": ""}\n', "prompts.jsonl:1: 'prompt' must be"),
        ('{"prompt": "a", "messages": []}\n', "exactly one"),
        ('{"messages": [{"content": "x"}]}\n', "'messages' must be"),
        ("\n\n", "no prompts"),
    ],
)
def test_bad_datasets_name_the_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        builder(dataset=str(path))


def test_prompt_and_dataset_are_exclusive() -> None:
    with pytest.raises(ValidationError, match="prompt or dataset"):
        Workload(prompt="x", dataset="/tmp/p.jsonl")


def test_a_local_hugging_face_tokenizer_counts_input_tokens(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())  # byte-level BPE, as GPT-2 style tokenizers are
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    corpus = ["alpha beta gamma delta epsilon zeta eta theta iota kappa lambda river stone"] * 50
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    b = builder(tokenizer=str(path), input_tokens=25, seed=9)
    for seq in range(5):
        text = prompt_of(b.body(seq))
        assert len(tokenizer.encode(text, add_special_tokens=False).ids) == 25


def test_extra_body_is_bounded_in_size() -> None:
    Workload(extra_body={"stop": ["x" * (MAX_EXTRA_BODY_BYTES - 100)]})
    with pytest.raises(ValidationError) as caught:
        Workload(extra_body={"stop": ["x" * MAX_EXTRA_BODY_BYTES]})
    assert caught.value.errors()[0]["loc"] == ("extra_body",)
    assert caught.value.errors()[0]["msg"] == f"at most {MAX_EXTRA_BODY_BYTES} bytes as JSON"


def test_a_batch_whose_tokens_exceed_the_bound_is_refused_naming_its_field() -> None:
    for field in ("batch_size", "documents"):
        with pytest.raises(ValidationError) as caught:
            Workload.model_validate({field: 100, "input_tokens": 10_001})
        assert caught.value.errors()[0]["ctx"]["field"] == field
        assert Workload.model_validate({field: 100, "input_tokens": 10_000}) is not None
