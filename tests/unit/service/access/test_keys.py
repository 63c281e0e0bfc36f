"""The bootstrap admin key must look random: a key of repeated, cyclic or sequential characters
is refused at start, naming the rule and never the key; every generated key passes."""

from __future__ import annotations

import secrets

import pytest
from pydantic import SecretStr, ValidationError

from sustain.service.access.keys import (
    KEY_PREFIX,
    MIN_KEY_BITS,
    estimated_bits,
    generate_key,
    weak_key_reason,
)
from sustain.service.config import Settings

WEAK = ["a" * 32, "ab" * 16, "0123456789" * 4, "abcdefghijklmnopqrstuvwxyzABCDEF",
        "k" * 43, "0a1b" * 10, "zyxwvutsrqponmlkjihgfedcbaZYXWVU"]


def test_every_generated_key_passes() -> None:
    for _ in range(20_000):
        key = generate_key()
        assert weak_key_reason(key) is None
        assert estimated_bits(key[len(KEY_PREFIX):]) > MIN_KEY_BITS + 60


def test_random_keys_of_the_minimum_length_pass() -> None:
    """32 random base64 characters (`openssl rand -base64 24`) are accepted too."""
    for _ in range(5_000):
        assert weak_key_reason(KEY_PREFIX + secrets.token_urlsafe(24)) is None


@pytest.mark.parametrize("rest", WEAK)
def test_a_predictable_key_is_refused_without_being_named(rest: str) -> None:
    key = KEY_PREFIX + rest
    reason = weak_key_reason(key)
    assert reason is not None
    assert "too predictable" in reason
    assert rest not in reason


@pytest.mark.parametrize(("text", "bits"), [("", 0.0), ("a", 0.0), ("a" * 32, 0.0),
                                             ("ab" * 16, 32.0)])
def test_the_estimate_is_length_times_the_poorer_entropy(text: str, bits: float) -> None:
    assert estimated_bits(text) == pytest.approx(bits, abs=0.1)


def test_runs_are_caught_by_the_steps_between_characters() -> None:
    """'0123456789' * 4 has ten equally frequent characters (133 bits by their frequencies
    alone) but almost every step is +1."""
    assert estimated_bits("0123456789" * 4) < 20


@pytest.mark.parametrize("rest", WEAK)
def test_sustain_admin_key_with_too_little_entropy_stops_the_service(rest: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(admin_key=SecretStr(KEY_PREFIX + rest))
    text = str(caught.value)
    assert "admin_key" in text
    assert "too predictable" in text
    assert rest not in text


def test_short_or_unprintable_keys_are_still_refused() -> None:
    assert "at least 32" in (weak_key_reason(KEY_PREFIX + "Ab3" * 5) or "")
    assert "printable ASCII" in (weak_key_reason(generate_key() + " x") or "")
    assert "at least 32" in (weak_key_reason("sk_other_" + secrets.token_urlsafe(32)) or "")
