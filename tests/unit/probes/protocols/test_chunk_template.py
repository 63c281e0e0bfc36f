"""The common chunk's template: learnt only where it is unambiguous, and a chunk that fits it
is exactly the learnt chunk with another content, whatever text a server puts there."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from sustain.probes.protocols.chunk_template import MAX_CHUNK_CHARS, ContentTemplate, learn

CHUNK = ('{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m",'
         '"choices":[{"index":0,"logprobs":null,"delta":{"content":"tok0 "},'
         '"finish_reason":null}]}')


def with_content(raw: str) -> str:
    """CHUNK with `raw` as the characters of its content string."""
    return CHUNK.replace('"tok0 "', f'"{raw}"')


def template() -> ContentTemplate:
    learnt = learn(CHUNK, "tok0 ")
    assert learnt is not None
    return learnt


def test_a_compact_chunk_teaches_its_text_around_the_content() -> None:
    learnt = template()
    assert learnt.prefix.endswith('"delta":{"content":"')
    assert learnt.suffix == '"},"finish_reason":null}]}'


def test_a_chunk_written_with_spaces_teaches_its_own_text() -> None:
    spaced = CHUNK.replace(",", ", ").replace('"content":"', '"content" :  "')
    learnt = learn(spaced, "tok0 ")
    assert learnt is not None
    assert learnt.prefix.endswith('"content" :  "')
    assert learnt.fits(spaced.replace("tok0 ", "tok1"))
    assert not learnt.fits(with_content("tok1"))  # the compact text is another template


def test_another_token_of_the_stream_fits() -> None:
    assert template().fits(with_content("tok1 "))
    assert template().fits(with_content("été ✓"))


def test_what_must_be_parsed_does_not_fit() -> None:
    t = template()
    assert not t.fits(with_content(""))  # no content: not an output event
    assert not t.fits(with_content("a\\nb"))  # an escape
    assert not t.fits(with_content('x","finish_reason":"stop'))  # the string ends early
    assert not t.fits(with_content("x\x01"))  # a raw control character: malformed JSON
    assert not t.fits(with_content("x\ud800"))  # a lone surrogate, which orjson refuses
    assert not t.fits(CHUNK.replace('"created":7', '"created":8'))
    assert not t.fits(CHUNK.replace('"finish_reason":null', '"finish_reason":"stop"'))
    assert not t.fits("[DONE]")


def test_an_ambiguous_chunk_teaches_nothing() -> None:
    assert learn(CHUNK, "") is None
    assert learn(with_content('say \\"hi\\"'), 'say "hi"') is None  # needs escapes
    twice = CHUNK.replace('"model":"m"', '"model":"m","x":{"content":"tok0 "}')
    assert learn(twice, "tok0 ") is None  # "content" twice: which one was read?
    assert learn(CHUNK, "other") is None  # not the chunk's content
    escaped_key = CHUNK.replace('"finish_reason":null', '"cont\\u0065nt":"t","finish_reason":null')
    assert learn(escaped_key, "tok0 ") is None  # the key spelt another way: the parser's pick?


def test_a_huge_chunk_teaches_nothing_that_its_stream_would_hold() -> None:
    padded = CHUNK.replace('"model":"m"', f'"model":"{"m" * MAX_CHUNK_CHARS}"')
    assert learn(padded, "tok0 ") is None
    assert learn(CHUNK.replace('"model":"m"', '"model":"mm"'), "tok0 ") is not None


@given(st.text(max_size=12))
def test_a_chunk_that_fits_parses_as_the_learnt_one_with_its_own_content(raw: str) -> None:
    """Whatever characters stand where the content was, if the chunk fits, a parser reads
    the learnt chunk with exactly those characters as its content."""
    data = with_content(raw)
    if template().fits(data):
        parsed: dict[str, Any] = orjson.loads(data)
        expected: dict[str, Any] = orjson.loads(CHUNK)
        expected["choices"][0]["delta"]["content"] = raw
        assert parsed == expected
        assert raw


@given(st.text(alphabet=st.characters(blacklist_characters='"\\',
                                      blacklist_categories=("Cc", "Cs")), min_size=1))
def test_every_content_that_needs_no_escape_fits(raw: str) -> None:
    assert template().fits(with_content(raw))
