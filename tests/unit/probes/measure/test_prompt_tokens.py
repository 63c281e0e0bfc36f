"""The fit of the server's prompt token count to synthetic words, and a run's requested
against served prompt tokens (pure)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from sustain.probes.measure.prompt_tokens import (
    PromptCalibration,
    PromptFit,
    fit_prompt_tokens,
    prompt_token_figures,
)
from sustain.probes.measure.sample import ErrorClass, Sample
from sustain.probes.measure.summary import summarise
from tests.unit.probes.samples import sample


def asked(requested: int | None, served: int | None, *,
          error: ErrorClass | None = None) -> Sample:
    s = sample(error=error)
    return replace(s, measurement=replace(s.measurement, prompt_tokens_requested=requested,
                                          input_tokens=served))


def test_two_prompts_give_the_server_s_tokens_per_word_and_its_fixed_overhead() -> None:
    # A BPE server: 1.6 tokens a word, and 27 more (chat template and salt) in every request.
    fit = fit_prompt_tokens([(32, 27 + 51), (256, 27 + 410)])
    assert fit is not None
    assert fit.tokens_per_word == pytest.approx((410 - 51) / 224)
    assert fit.overhead_tokens == pytest.approx(78 - 32 * fit.tokens_per_word)


def test_more_points_are_fitted_by_least_squares() -> None:
    fit = fit_prompt_tokens([(10, 21), (20, 39), (30, 61), (40, 79)])
    assert fit is not None
    assert fit.tokens_per_word == pytest.approx(1.96)
    assert fit.overhead_tokens == pytest.approx(1.0)


def test_a_server_that_counts_words_fits_one_token_a_word_exactly() -> None:
    assert fit_prompt_tokens([(32, 33), (256, 257)]) == PromptFit(1.0, 1.0)


@pytest.mark.parametrize("points", [
    [], [(32, 40)], [(32, 40), (32, 41)],  # fewer than two word counts
    [(32, 40), (256, 40)],  # a count that does not grow with the words
    [(32, 400), (256, 40)],  # one that shrinks
    [(1, 1), (2, 1000)],  # a thousand tokens a word
])
def test_points_no_tokenizer_would_give_fit_nothing(points: list[tuple[int, int]]) -> None:
    assert fit_prompt_tokens(points) is None


def test_a_length_takes_the_nearest_word_count_and_never_none() -> None:
    fit = PromptFit(tokens_per_word=1.6, overhead_tokens=27.0)
    assert fit.words_for(330 - 27) == 189  # 303 / 1.6 = 189.4
    assert fit.words_for(0) == 1
    assert fit.words_for(-5) == 1
    assert fit.tokens_of(189) == 302


def test_a_calibration_hands_out_its_fit_only_when_fitted_to_the_server() -> None:
    fitted = PromptCalibration.of(PromptFit(1.6, 27.0))
    assert fitted.method == "server"
    assert fitted.fit == PromptFit(1.6, 27.0)
    assert PromptCalibration(method="words", note="no usage").fit is None
    assert PromptCalibration(method="tokenizer").fit is None


def test_requested_against_served_over_the_successful_requests_that_asked() -> None:
    figures = prompt_token_figures([
        asked(330, 320), asked(330, 340), asked(100, 105),
        asked(330, 1, error=ErrorClass.HTTP_5XX),  # failed: left out
        asked(None, 77),  # a prompt of given text: left out
    ])
    assert figures.requested == pytest.approx(760 / 3)
    assert figures.served == pytest.approx(765 / 3)
    assert figures.ratio == pytest.approx(765 / 760)


def test_a_server_without_usage_leaves_the_requested_length_alone() -> None:
    figures = prompt_token_figures([asked(330, None), asked(330, None)])
    assert (figures.requested, figures.served, figures.ratio) == (330, None, None)


def test_without_requested_lengths_there_are_no_figures() -> None:
    figures = prompt_token_figures([asked(None, 50)])
    assert (figures.requested, figures.served, figures.ratio) == (None, None, None)


def test_a_summary_reports_requested_and_served_prompt_tokens() -> None:
    summary = summarise([asked(330, 330), asked(330, 346)], duration_s=1.0)
    assert summary.prompt_tokens_requested == 330
    assert summary.prompt_tokens_served == 338
    assert summary.prompt_tokens_ratio is not None
    assert math.isclose(summary.prompt_tokens_ratio, 676 / 660)
    assert summary.prompt_calibration is None  # the run's, set by the runner
