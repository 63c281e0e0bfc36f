"""What a sessions run measured beyond its requests: how many conversations completed, how
each turn index fared (later turns carry longer histories), and MLPerf Endpoints'
interactivity: output tokens per second of the endpoint's own turn time, with think and tool
time between turns left out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel

from sustain.probes.measure.finite import mean, ratio, total
from sustain.probes.measure.percentiles import Distribution, distribution
from sustain.probes.measure.sample import Outcome, Sample

MAX_TURN_ROWS = 100
"""Turn indexes reported one by one (later ones are in the run's totals)."""


class SessionCounts(BaseModel):
    conversations: int
    """Conversations with a measured turn (each stage of a sweep plays its own)."""
    completed: int
    """Conversations whose every turn succeeded, the last one measured here."""
    turns: int
    failed_turns: int


class TurnFigures(BaseModel):
    """One turn index over every conversation: its latency as the history grows."""

    turn: int
    count: int
    input_tokens_mean: float | None
    """Mean prompt tokens (history included) of its successful turns, as the server counted."""
    ttft_ms: Distribution
    e2e_ms: Distribution


def session_counts(samples: Sequence[Sample]) -> SessionCounts | None:
    """Conversation and turn counts over a sessions run's samples; None outside sessions."""
    turns = [s for s in samples if s.conversation is not None]
    if not turns:
        return None
    # Every stage plays its conversations anew: a conversation is one per stage.
    failed = {(s.stage, s.conversation) for s in turns if s.outcome is Outcome.FAILURE}
    ended = {(s.stage, s.conversation) for s in turns
             if s.session_end and s.outcome is Outcome.SUCCESS}
    return SessionCounts(conversations=len({(s.stage, s.conversation) for s in turns}),
                         completed=len(ended - failed), turns=len(turns),
                         failed_turns=sum(1 for s in turns if s.outcome is Outcome.FAILURE))


def turns_by_index(samples: Sequence[Sample]) -> list[TurnFigures] | None:
    """Per turn index (the first MAX_TURN_ROWS), its count and the latency of its successful
    turns; None outside sessions."""
    by_turn: dict[int, list[Sample]] = defaultdict(list)
    for sample in samples:
        if sample.turn is not None and sample.turn < MAX_TURN_ROWS:
            by_turn[sample.turn].append(sample)
    if not by_turn:
        return None
    rows = []
    for turn in sorted(by_turn):
        group = by_turn[turn]
        ok = [s for s in group if s.outcome is Outcome.SUCCESS]
        inputs = [n for s in ok if (n := s.measurement.input_tokens) is not None]
        rows.append(TurnFigures(
            turn=turn, count=len(group),
            input_tokens_mean=mean(inputs),
            ttft_ms=distribution([v for s in ok if (v := s.ttft_ms) is not None]),
            e2e_ms=distribution([s.e2e_ms for s in ok])))
    return rows


def e2e_interactivity(samples: Sequence[Sample]) -> float | None:
    """Output tokens per second of turn time (sum over successful turns of output tokens
    over sum of their end-to-end times): think and tool time are not turn time. None
    outside sessions, without a successful turn, or when those turns took no time (every
    one an E2E of 0 ms: a rate over no time is undefined)."""
    ok = [s for s in samples if s.conversation is not None and s.outcome is Outcome.SUCCESS]
    if not ok:
        return None
    seconds = total([s.e2e_ms for s in ok]) / 1000.0
    return ratio(sum(s.measurement.output_tokens for s in ok), seconds)
