"""The default prompt words: exactly the tokens asked for, the same words for the same seed,
and every vocabulary word equally likely."""

from __future__ import annotations

import random
from collections import Counter

from sustain.probes.workload.tokenizer import VOCABULARY, WhitespaceTokenizer


def test_a_prompt_has_the_tokens_asked_for_from_the_vocabulary() -> None:
    tokenizer = WhitespaceTokenizer()
    for tokens in (0, 1, 16, 1_000):
        text = tokenizer.prompt(tokens, random.Random(tokens))
        assert tokenizer.count(text) == tokens
        assert set(text.split()) <= set(VOCABULARY)
    assert tokenizer.prompt(-3, random.Random(0)) == ""


def test_the_same_seed_gives_the_same_words_and_another_seed_others() -> None:
    tokenizer = WhitespaceTokenizer()
    assert tokenizer.prompt(50, random.Random(7)) == tokenizer.prompt(50, random.Random(7))
    assert tokenizer.prompt(50, random.Random(7)) != tokenizer.prompt(50, random.Random(8))


def test_every_word_is_equally_likely() -> None:
    """64,000 draws over 32 words: 2,000 expected each; a word drawn from a byte table that
    favoured it by one slot in 256 would stand near 2,250 (an 8-sigma departure)."""
    counts = Counter(WhitespaceTokenizer().prompt(64_000, random.Random(1)).split())
    assert set(counts) == set(VOCABULARY)
    assert all(1_780 <= n <= 2_220 for n in counts.values()), counts
