"""Counting input length in tokens: the built-in whitespace tokenizer (one word, one token),
the same words scaled to the server's count (FittedWordTokenizer, once a run has fitted
it: probes/measure/prompt_tokens.py), or a Hugging Face tokenizer.json file the user names
(optional `tokenizers` package, extra `hf`). The file is read as a dataset is: only where
the DatasetPolicy allows (under SUSTAIN_DATASET_DIR, links resolved), a regular file up to
its size cap, checked when the run reads it; a file that cannot be used fails the run with a
TokenizerError saying why."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Protocol

from sustain.probes.measure.prompt_tokens import PromptFit
from sustain.probes.workload.dataset import DatasetError, DatasetPolicy

VOCABULARY = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
    "sigma tau upsilon phi chi psi omega river stone cloud lamp harbor garden signal engine"
).split()
_WORD_OF_BYTE = [VOCABULARY[byte % len(VOCABULARY)] for byte in range(256)]
"""Each vocabulary word 256 / 32 = 8 times: a random byte picks a word uniformly."""


class PromptTokenizer(Protocol):
    def prompt(self, tokens: int, rng: random.Random) -> str:
        """A text of exactly `tokens` tokens."""
        ...

    def count(self, text: str) -> int: ...


class WhitespaceTokenizer:
    """The documented default: words drawn from a small vocabulary, one word per token."""

    def prompt(self, tokens: int, rng: random.Random) -> str:
        """`tokens` words, each drawn from one random byte (`_WORD_OF_BYTE`): one call into
        C for the whole prompt, not a draw in Python per word: a 1,000-token prompt in 28 µs
        rather than 185 µs (seeding included), on the loop that times other requests."""
        return " ".join(map(_WORD_OF_BYTE.__getitem__, rng.randbytes(max(tokens, 0))))

    def count(self, text: str) -> int:
        return len(text.split())


class FittedWordTokenizer(WhitespaceTokenizer):
    """The vocabulary's words, as many as the server counts as the tokens asked for: `fit`,
    fitted to what it reported for whole rounds of the vocabulary (its overhead apart: the
    request builder takes that off each request's length). A prompt is rounds of the whole
    vocabulary, each in its own shuffled order, so its count is the fit's up to the last,
    partial round, whatever the words' own counts (drawn one by one, a 300-token prompt's
    count would stray by some 2 %)."""

    def __init__(self, fit: PromptFit) -> None:
        self.fit = fit

    def prompt(self, tokens: int, rng: random.Random) -> str:
        words = self.fit.words_for(tokens)
        drawn: list[str] = []
        while len(drawn) < words:
            round_ = list(VOCABULARY)
            rng.shuffle(round_)
            drawn += round_
        return " ".join(drawn[:words])

    def count(self, text: str) -> int:
        return self.fit.tokens_of(len(text.split()))


def cycled_words(words: int) -> str:
    """`words` words of the vocabulary in order, round and round: a text whose tokens per
    word are the vocabulary's mean (as the mean of random draws from it is), for fitting."""
    return " ".join(VOCABULARY[k % len(VOCABULARY)] for k in range(words))


MAX_REASON_CHARS = 200
"""How much of the tokenizers library's own explanation a TokenizerError quotes."""


class TokenizerError(DatasetError):
    """The tokenizer file may not be read, or is not a tokenizer: `tokenizer PATH: why`. A
    DatasetError, so a run fails with this message as it does for a dataset."""


class HFTokenizer:
    """A local tokenizer.json. Prompts are cut at exactly N token ids, then decoded."""

    def __init__(self, path: str | Path, files: DatasetPolicy) -> None:
        """Read `path` where `files` allows, up to its size cap (read once, then parsed from
        memory, so the file checked is the file parsed); TokenizerError otherwise."""
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise TokenizerError(f"tokenizer {path}: a Hugging Face tokenizer needs the "
                                 "'tokenizers' package (pip install 'sustain[hf]')") from None
        try:
            text = files.read(str(path)).decode("utf-8")
        except DatasetError as exc:
            raise TokenizerError(f"tokenizer {exc}") from None
        except UnicodeDecodeError:
            raise TokenizerError(f"tokenizer {path}: not a tokenizer file (not UTF-8 "
                                 "text)") from None
        try:
            self._tokenizer: Any = Tokenizer.from_str(text)
        except Exception as exc:  # noqa: BLE001 (tokenizers raises plain Exception)
            reason = " ".join(str(exc).split())[:MAX_REASON_CHARS] or type(exc).__name__
            raise TokenizerError(f"tokenizer {path}: not a tokenizer file ({reason})") from None

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
