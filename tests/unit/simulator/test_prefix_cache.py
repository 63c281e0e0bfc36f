"""The simulator's prefix cache reuses whole leading blocks, as serving engines do."""

from __future__ import annotations

from sustain.simulator.prefix_cache import PrefixCache


def test_a_repeated_prompt_reuses_its_whole_blocks() -> None:
    cache = PrefixCache(block_tokens=4)
    prompt = [f"w{i}" for i in range(10)]
    assert cache.admit(prompt) == 0
    assert cache.admit(prompt) == 8
    assert cache.admit([*prompt[:6], "x", "y"]) == 4


def test_a_different_first_token_reuses_nothing() -> None:
    cache = PrefixCache(block_tokens=4)
    shared = [f"w{i}" for i in range(12)]
    cache.admit(shared)
    assert cache.admit(["salt", *shared]) == 0


def test_the_least_recently_used_blocks_go_first() -> None:
    cache = PrefixCache(max_blocks=2, block_tokens=1)
    cache.admit(["a"])
    cache.admit(["b"])
    cache.admit(["c"])
    assert cache.admit(["a"]) == 0
    assert cache.admit(["c"]) == 1
