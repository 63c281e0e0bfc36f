"""Cache-honest prompts: by default every request starts with a fresh 64-bit salt
after an optional stable shared prefix, so a prefix-caching server serves nothing from cache
that the workload did not mean it to; `cache: allow` sends the same prompts every run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from sustain.probes.client.target import ApiKind
from sustain.probes.workload.spec import Workload
from tests.unit.probes.workload.bodies import SALT, builder, words


def test_every_request_starts_with_a_fresh_salt_within_its_input_length() -> None:
    first, second = builder(input_tokens=50), builder(input_tokens=50)
    seen = set()
    for b in (first, second):  # two runs of the same probe
        for seq in range(20):
            prompt = words(b.body(seq))
            assert len(prompt) == 50
            assert SALT.match(prompt[0])
            seen.add(prompt[0])
    assert len(seen) == 40
    assert words(first.body(3))[1:] == words(second.body(3))[1:]  # the seeded words remain


def test_allowing_the_cache_sends_the_same_prompt_every_run() -> None:
    one = builder(input_tokens=50, cache="allow")
    two = builder(input_tokens=50, cache="allow")
    assert [one.body(s)["messages"] for s in range(5)] == [two.body(s)["messages"]
                                                           for s in range(5)]
    assert not SALT.match(words(one.body(0))[0])


def test_a_shared_prefix_comes_before_the_salt_and_is_the_same_everywhere() -> None:
    runs = [builder(input_tokens=100, shared_prefix_tokens=64, seed=4) for _ in range(2)]
    prompts = [words(b.body(seq)) for b in runs for seq in range(10)]
    assert all(len(p) == 100 for p in prompts)
    assert len({tuple(p[:64]) for p in prompts}) == 1
    assert all(SALT.match(p[64]) for p in prompts)
    assert len({p[64] for p in prompts}) == len(prompts)


def test_a_fixed_prompt_and_a_dataset_get_the_salt_and_a_system_prompt_stays_first(
        tmp_path: Path) -> None:
    fixed = builder(ApiKind.OPENAI_COMPLETIONS, prompt="Say hi").body(0)
    assert SALT.match(str(fixed["prompt"]).split()[0])
    assert str(fixed["prompt"]).endswith(" Say hi")
    path = tmp_path / "chats.jsonl"
    path.write_text(json.dumps({"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"}]}) + "\n")
    messages = builder(dataset=str(path)).body(0)["messages"]
    assert messages[0] == {"role": "system", "content": "be brief"}
    salt, rest = messages[1]["content"].split(" ", 1)
    assert SALT.match(salt)
    assert rest == "hello"


def test_a_shared_prefix_must_leave_room_for_the_request_s_own_words() -> None:
    with pytest.raises(ValidationError, match="shared_prefix_tokens"):
        Workload(input_tokens=32, shared_prefix_tokens=32)
