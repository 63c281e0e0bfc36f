"""Prompt length in the server's tokens (pure): the fit that sizes synthetic prompts, how a
run sized them, and what it asked for against what the server counted
(docs/metrics.md#prompt-tokens).

Synthetic prompts are words from a small vocabulary. A server counts them in its own tokens
(a BPE tokenizer splits many words in two) and adds a fixed part of its own (the chat
template; with it, in every request, the cache-defeating salt). Two requests
of known word counts, before a run's measured part, give that line:
`served = overhead_tokens + tokens_per_word * words`; a request for N tokens then carries
(N - overhead_tokens) / tokens_per_word words."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from sustain.probes.measure.finite import mean, ratio
from sustain.probes.measure.sample import Outcome, Sample

MIN_TOKENS_PER_WORD = 0.05
MAX_TOKENS_PER_WORD = 50.0
"""A fitted slope outside these bounds is no tokenizer's: the fit is refused."""


@dataclass(frozen=True, slots=True)
class PromptFit:
    """served prompt tokens = overhead_tokens + tokens_per_word * words."""

    tokens_per_word: float
    overhead_tokens: float

    def words_for(self, tokens: float) -> int:
        """The words that the server counts as `tokens` tokens (the overhead apart); at
        least one."""
        return max(1, round(tokens / self.tokens_per_word))

    def tokens_of(self, words: int) -> int:
        """What the server counts for `words` words (the overhead apart)."""
        return round(words * self.tokens_per_word)


def fit_prompt_tokens(points: Sequence[tuple[int, int]]) -> PromptFit | None:
    """The least-squares line through (words sent, prompt tokens served) points; None when
    they cannot give one that a tokenizer would: fewer than two distinct word counts, a
    value that is not finite, or a slope outside [MIN_TOKENS_PER_WORD,
    MAX_TOKENS_PER_WORD]."""
    if len({words for words, _ in points}) < 2:
        return None
    mean_words = math.fsum(w for w, _ in points) / len(points)
    mean_served = math.fsum(s for _, s in points) / len(points)
    spread = math.fsum((w - mean_words) ** 2 for w, _ in points)
    slope = math.fsum((w - mean_words) * (s - mean_served) for w, s in points) / spread
    overhead = mean_served - slope * mean_words
    if not (math.isfinite(slope) and math.isfinite(overhead)) or \
            not MIN_TOKENS_PER_WORD <= slope <= MAX_TOKENS_PER_WORD:
        return None
    return PromptFit(tokens_per_word=slope, overhead_tokens=overhead)


class PromptCalibration(BaseModel):
    """How a run sized its synthetic prompts."""

    method: Literal["server", "tokenizer", "words"]
    """server: word counts fitted to the server's `usage.prompt_tokens` before the run;
    tokenizer: counted with the workload's tokenizer file (the server's own additions, such
    as its chat template, not included); words: one whitespace-separated word per token
    (uncalibrated; `note` says why)."""
    tokens_per_word: float | None = None
    """The fit's slope: prompt tokens the server counts per synthetic word."""
    overhead_tokens: float | None = None
    """The fit's intercept: tokens every request carries besides its words (the chat
    template, the cache-defeating salt)."""
    reused: bool = False
    """The fit (or the failure to fit: words, with its note) came from an earlier run against
    the same endpoint, model and request shape in this process (nothing was sent for it)."""
    note: str | None = None
    """Why prompts are not calibrated, or what keeps them from their requested length."""

    @classmethod
    def of(cls, fit: PromptFit) -> PromptCalibration:
        return cls(method="server", tokens_per_word=fit.tokens_per_word,
                   overhead_tokens=fit.overhead_tokens)

    @property
    def fit(self) -> PromptFit | None:
        """The fit to size prompts with; None unless the method is `server`."""
        if self.method != "server" or self.tokens_per_word is None or \
                self.overhead_tokens is None:
            return None
        return PromptFit(self.tokens_per_word, self.overhead_tokens)


@dataclass(frozen=True, slots=True)
class PromptTokenFigures:
    requested: float | None
    """Mean prompt length asked for, over the successful requests that asked for one."""
    served: float | None
    """Mean `usage.prompt_tokens` over those of them whose server reported it."""
    ratio: float | None
    """Served over requested, over the requests with both."""


def prompt_token_figures(samples: Sequence[Sample]) -> PromptTokenFigures:
    """Requested against served prompt tokens over the successful `samples` that asked for a
    length (synthetic prompts and trace replays); all None when none did."""
    asked: list[float] = []
    pairs: list[tuple[float, float]] = []
    for sample in samples:
        m = sample.measurement
        if sample.outcome is not Outcome.SUCCESS or m.prompt_tokens_requested is None:
            continue
        asked.append(m.prompt_tokens_requested)
        if m.input_tokens is not None:
            pairs.append((m.prompt_tokens_requested, m.input_tokens))
    if not pairs:
        return PromptTokenFigures(mean(asked), None, None)
    return PromptTokenFigures(
        mean(asked), mean([served for _, served in pairs]),
        ratio(math.fsum(s for _, s in pairs), math.fsum(r for r, _ in pairs)))
