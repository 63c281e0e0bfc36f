"""Counting input length in tokens: the built-in whitespace tokenizer (one word, one token),
or a Hugging Face tokenizer file the user names (optional `tokenizers` package, extra `hf`)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Protocol

VOCABULARY = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
    "sigma tau upsilon phi chi psi omega river stone cloud lamp harbor garden signal engine"
).split()


class PromptTokenizer(Protocol):
    def prompt(self, tokens: int, rng: random.Random) -> str:
        """A text of exactly `tokens` tokens."""
        ...

    def count(self, text: str) -> int: ...


class WhitespaceTokenizer:
    """The documented default: words drawn from a small vocabulary, one word per token."""

    def prompt(self, tokens: int, rng: random.Random) -> str:
        return " ".join(rng.choice(VOCABULARY) for _ in range(tokens))

    def count(self, text: str) -> int:
        return len(text.split())


class HFTokenizer:
    """A local tokenizer.json. Prompts are cut at exactly N token ids, then decoded."""

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ValueError("a Hugging Face tokenizer needs the 'tokenizers' package "
                             "(pip install 'sustain[hf]')") from None
        try:
            self._tokenizer: Any = Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 (tokenizers raises plain Exception)
            raise ValueError(f"cannot load tokenizer {path}: {exc}") from None

    def prompt(self, tokens: int, rng: random.Random) -> str:
        """Cut at `tokens` ids and decode; a decode that re-encodes to another length (token
        merges across the cut) is corrected by moving the cut, a few times at most."""
        words = WhitespaceTokenizer().prompt(max(tokens, 1) * 2, rng)
        ids = self._tokenizer.encode(words, add_special_tokens=False).ids
        while len(ids) < tokens * 2:
            words += " " + WhitespaceTokenizer().prompt(tokens, rng)
            ids = self._tokenizer.encode(words, add_special_tokens=False).ids
        cut = tokens
        best = str(self._tokenizer.decode(ids[:cut]))
        for _ in range(8):
            text = str(self._tokenizer.decode(ids[:cut]))
            got = self.count(text)
            if abs(got - tokens) < abs(self.count(best) - tokens):
                best = text
            if got == tokens:
                return text
            cut = max(1, cut + tokens - got)
        return best

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
