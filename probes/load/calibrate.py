"""Sizing a run's synthetic prompts in the server's tokens (docs/metrics.md#prompt-tokens).

Before a run's measured part, two requests of known word counts, each asking for one output
token, give the server's count of the words (probes/measure/prompt_tokens.py: tokens per
word, and the overhead every request carries: the chat template, the salt); the
run's request builder then sizes every prompt by that fit. These requests are not samples:
nothing of them is measured, stored, or counted against the run's request budget, and they
go out before the server's metrics are first read, each with an `x-request-id` of
`sustain-calibration-<random hex>` so that server logs tell them apart. The outcome is kept
per endpoint, model and request shape for FIT_TTL_S in this process, so repeated runs do not
pay for it again.

A server that reports no prompt count, or a calibration request that fails, leaves the
prompts in whitespace words (as without calibration), and the run's summary says why. What
the server's answers said is kept like a fit (for FIT_TTL_S): a server without usage, or
whose counts fit no tokenizer, is not sent the two requests again every run. A request that
failed (a refused connection, an error status, a timeout) may not fail next time, so the
next run tries again. With a tokenizer file the prompts are counted with it and nothing
is sent.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping

from sustain.probes.client.target import Target
from sustain.probes.load.drivers import Prepare, Request
from sustain.probes.measure.prompt_tokens import PromptCalibration, fit_prompt_tokens
from sustain.probes.measure.sample import Measurement
from sustain.probes.protocols.streaming import encode_request
from sustain.probes.workload.lengths import FixedLength, UniformLength
from sustain.probes.workload.requests import RequestBuilder, fitted
from sustain.probes.workload.sessions import Dialogue
from sustain.probes.workload.spec import Workload
from sustain.probes.workload.tokenizer import VOCABULARY

CALIBRATION_WORDS = (len(VOCABULARY), 8 * len(VOCABULARY))
"""Word counts of the calibration requests: whole rounds of the vocabulary (cycled_words),
so the fitted tokens per word are the vocabulary's mean, as random draws from it have."""
CALIBRATION_TIMEOUT_S = 30.0
"""A calibration request that takes longer is given up (the prompts stay in words)."""
FIT_TTL_S = 3600.0
"""How long a calibration (a fit, or a failure to fit) is reused by the runs of this process
(a server may change its model, or start reporting usage)."""
MAX_FITS = 256
REQUEST_ID_PREFIX = "sustain-calibration-"
"""The start of a calibration request's `x-request-id` (then 16 random hex digits)."""

Transport = Callable[..., Awaitable[Measurement]]
"""transport(encoded, stream, t_send_ns): one request to the run's target."""


class FitCache:
    """Calibrations by key (fits, and failures to fit), each for `ttl_s` seconds, the `size`
    most recently stored."""

    def __init__(self, ttl_s: float = FIT_TTL_S, size: int = MAX_FITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self.clock = clock
        self._fits: OrderedDict[str, tuple[float, PromptCalibration]] = OrderedDict()

    def get(self, key: str) -> PromptCalibration | None:
        """The calibration stored under `key`, marked reused; None when none is, or it
        expired. A fit's note is made again for the run's lengths (`noted`); a failure keeps
        its note, which says why the prompts are in words."""
        held = self._fits.get(key)
        if held is None:
            return None
        stored, calibration = held
        if self.clock() - stored > self.ttl_s:
            del self._fits[key]
            return None
        if calibration.fit is None:
            return calibration.model_copy(update={"reused": True})
        return calibration.model_copy(update={"reused": True, "note": None})

    def put(self, key: str, calibration: PromptCalibration) -> None:
        """Keep what the server's answers came to: a fit, or that they cannot give one
        (`lasting`); not a failed request's words, tried again next run, nor a tokenizer's
        counting (the workload's, not the server's)."""
        if calibration.fit is None and not lasting(calibration):
            return
        self._fits[key] = (self.clock(), calibration)
        self._fits.move_to_end(key)
        while len(self._fits) > self.size:
            self._fits.popitem(last=False)

    def clear(self) -> None:
        self._fits.clear()


FITS = FitCache()
"""This process's fits."""


def calibration_key(target: Target, workload: Workload) -> str:
    """What a fit holds for: the endpoint, its model and API kind, and what each request's
    text carries besides its words (a salt or none) or the server may count by (the extra
    body)."""
    return json.dumps([target.base_url, target.model, str(target.api_kind), workload.cache,
                       workload.extra_body], sort_keys=True, default=str)


def known_fit(target: Target, workload: Workload) -> PromptCalibration | None:
    """The fit this process holds for a run's prompts, if they are fitted and it has one."""
    if not fitted(workload, target.api_kind):
        return None
    return FITS.get(calibration_key(target, workload))


def typical_length(workload: Workload) -> int:
    """The shortest length a synthetic workload usually asks for (a normal distribution's
    mean), for the note on prompts too short for the overhead."""
    length = workload.input_length
    if length is None:
        return workload.input_tokens
    if isinstance(length, FixedLength):
        return length.tokens
    if isinstance(length, UniformLength):
        return length.min
    return round(length.mean)


def noted(calibration: PromptCalibration, workload: Workload) -> PromptCalibration:
    """`calibration`, with a note when the workload asks for prompts shorter than what the
    server adds to every one of them (its words cannot be fewer than one)."""
    fit = calibration.fit
    if fit is None or workload.in_sessions:
        return calibration
    floor = fit.overhead_tokens + workload.shared_prefix_tokens + fit.tokens_per_word
    if typical_length(workload) >= floor:
        return calibration
    return calibration.model_copy(update={"note": (
        f"prompts shorter than {floor:.0f} tokens are served longer than asked: the server "
        f"counts {fit.overhead_tokens:.0f} tokens besides the words of each (its chat "
        "template, the salt)")})


NO_USAGE = "the server reported no prompt token count (usage): prompts are counted in words"
NO_FIT = "fit no tokenizer: prompts are counted in words"
"""The end of the note of counts that fit no tokenizer."""


def words_only(note: str) -> PromptCalibration:
    return PromptCalibration(method="words", note=note)


def lasting(calibration: PromptCalibration) -> bool:
    """Whether a calibration in words is what the server's answers said (no usage, counts
    that fit no tokenizer), which the next run would only hear again; not a failed request."""
    note = calibration.note or ""
    return calibration.method == "words" and (note == NO_USAGE or note.endswith(NO_FIT))


class SizedPrompts:
    """The `prepare` of a run of synthetic prompts on a generation kind: `calibrate()` once
    before the run, then each call builds request `seq` as the sender's `prepare` does."""

    def __init__(self, prepare: Prepare, builder: RequestBuilder, transport: Transport,
                 headers: Mapping[str, str], target: Target) -> None:
        self._prepare = prepare
        self.builder = builder
        self.transport = transport
        self.headers = headers
        self.key = calibration_key(target, builder.workload)
        self.calibration: PromptCalibration | None = None
        """How the prompts are sized, once calibrate() has run."""

    def __call__(self, seq: int, dialogue: Dialogue | None = None, /) -> Request:
        return self._prepare(seq, dialogue)

    async def calibrate(self, known: PromptCalibration | None = None) -> PromptCalibration:
        """Size the prompts: by the tokenizer file, by `known` (another worker's fit for this
        run), by this process's fit for the same endpoint and shape, or by a new fit of the
        server's count; failing that, in words."""
        if not self.builder.calibratable:
            calibration = PromptCalibration(method="tokenizer")
        elif known is not None:
            calibration = known
        elif (held := FITS.get(self.key)) is not None:
            calibration = held
        else:
            calibration = await self.measure()
            FITS.put(self.key, calibration)
        if (fit := calibration.fit) is not None:
            self.builder.calibrate(fit)
        self.calibration = calibration if self.builder.replay is not None \
            else noted(calibration, self.builder.workload)  # a trace has lengths of its own
        return self.calibration

    async def measure(self) -> PromptCalibration:
        """Send the calibration requests, one after another, and fit their counts."""
        points: list[tuple[int, int]] = []
        for words in CALIBRATION_WORDS:
            encoded = encode_request(self.builder.calibration_body(words), {
                **self.headers, "x-request-id": REQUEST_ID_PREFIX + secrets.token_hex(8)})
            try:
                async with asyncio.timeout(CALIBRATION_TIMEOUT_S):
                    m = await self.transport(encoded, self.builder.workload.stream,
                                             time.perf_counter_ns())
            except TimeoutError:
                return words_only(f"a calibration request took over "
                                  f"{CALIBRATION_TIMEOUT_S:g} s: prompts are counted in words")
            if m.error_class is not None:
                return words_only(f"a calibration request failed ({m.error_class}): prompts "
                                  "are counted in words")
            if m.input_tokens is None:
                return words_only(NO_USAGE)
            points.append((words, m.input_tokens))
        fit = fit_prompt_tokens(points)
        if fit is None:
            counts = ", ".join(f"{served} for {words} words" for words, served in points)
            return words_only(f"the server's prompt token counts ({counts}) {NO_FIT}")
        return PromptCalibration.of(fit)
