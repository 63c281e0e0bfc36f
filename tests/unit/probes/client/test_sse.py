from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sustain.probes.client.sse import MIB, EventTooLarge, SSEDecoder, SSEEvent, size_text
from sustain.probes.protocols.streaming import StreamState

VALID_STREAM = (
    ": keep-alive comment\r\n\r\n"
    'data: {"choices":[{"delta":{"role":"assistant"}}]}\r\n\r\n'
    "event: message\n"
    'data: {"choices":[{"delta":{"content":"héllo → 世界"}}]}\n\n'
    "data: line one\n"
    "data: line two\n\n"
    'data:{"no":"space"}\r\r'
    "data: [DONE]\n\n"
).encode()


def decode_all(chunks: list[bytes], decoder: SSEDecoder | None = None) -> list[SSEEvent]:
    decoder = decoder or SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.close()


def test_decodes_crlf_lf_and_cr_line_endings_comments_and_multiline_data() -> None:
    events = decode_all([VALID_STREAM])
    assert [e.data for e in events] == [
        '{"choices":[{"delta":{"role":"assistant"}}]}',
        '{"choices":[{"delta":{"content":"héllo → 世界"}}]}',
        "line one\nline two",
        '{"no":"space"}',
        "[DONE]",
    ]
    assert all(e.event == "message" for e in events)


def test_event_field_names_the_event() -> None:
    assert decode_all([b"event: error\ndata: {}\n\n"]) == [SSEEvent("error", "{}")]


def test_an_event_cut_off_by_the_end_of_the_stream_is_still_delivered() -> None:
    assert decode_all([b"data: complete\n\ndata: [DONE]"]) == [
        SSEEvent("message", "complete"), SSEEvent("message", "[DONE]")]
    assert decode_all([b"data: a\ndata: b\n"]) == [SSEEvent("message", "a\nb")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert decode_all([b"data: a\r", b"\n\r", b"\n"]) == [SSEEvent("message", "a")]


OPENAI_STREAM = "".join(
    f"data: {line}\r\n\r\n" if i % 2 else f"data: {line}\n\n" for i, line in enumerate([
        '{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
        ": keep-alive",
        '{"choices":[{"index":0,"delta":{"reasoning_content":"thinking…"}}]}',
        '{"choices":[{"index":0,"delta":{"content":"héllo"}}]}',
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1"}]}}]}',
        '{"choices":[{"index":0,"delta":{"content":" 世界"},"finish_reason":"stop"}]}',
        '{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4}}',
        "[DONE]",
    ])).replace("data: : keep-alive", ": keep-alive").encode()


def tokens_of(chunks: list[bytes]) -> tuple[int, int, bool]:
    state = StreamState()
    for n, event in enumerate(decode_all(chunks)):
        state.on_event(event, n)
    return state.output_tokens, state.output_events, state.complete


@given(st.data())
def test_any_rechunking_yields_the_same_events(data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(VALID_STREAM)), max_size=40)))
    bounds = [0, *cuts, len(VALID_STREAM)]
    chunks = [VALID_STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    assert decode_all(chunks) == decode_all([VALID_STREAM])


@given(st.data())
def test_any_rechunking_of_an_openai_stream_yields_the_same_token_count(
        data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(OPENAI_STREAM)), max_size=60)))
    bounds = [0, *cuts, len(OPENAI_STREAM)]
    chunks = [OPENAI_STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    assert tokens_of(chunks) == tokens_of([OPENAI_STREAM]) == (4, 4, True)


PLAIN_VALUE = st.text(st.characters(blacklist_characters="\r\n", codec="utf-8"), max_size=12)
BLOCK = st.one_of(
    PLAIN_VALUE.map(lambda v: f"data: {v}\n\n"),  # what OpenAI-style servers send
    PLAIN_VALUE.map(lambda v: f"data:{v}\n\n"),
    st.tuples(PLAIN_VALUE, PLAIN_VALUE).map(lambda vs: f"data: {vs[0]}\ndata: {vs[1]}\n\n"),
    PLAIN_VALUE.map(lambda v: f"event: delta\ndata: {v}\n\n"),
    PLAIN_VALUE.map(lambda v: f": {v}\n"),
    st.just("\n"),
    st.just("data: \\n\\ndata: x\n\n"),  # the separator's text, escaped, inside a value
)


def one_byte_at_a_time(stream: bytes) -> list[SSEEvent]:
    """The reference: each byte fed alone, so every line goes through the line-by-line
    scan (no chunk of one byte holds a blank line)."""
    return decode_all([stream[i:i + 1] for i in range(len(stream))])


@given(st.lists(BLOCK, max_size=30), st.data())
def test_data_only_events_split_at_once_decode_as_line_by_line(
        blocks: list[str], data: st.DataObject) -> None:
    stream = "".join(blocks).encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    bounds = [0, *cuts, len(stream)]
    chunks = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    assert decode_all(chunks) == decode_all([stream]) == one_byte_at_a_time(stream)


def test_a_chunk_of_plain_events_yields_each_value_and_keeps_its_open_tail() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a":1}\n\ndata: \n\ndata: [DONE]\n\ndata: par') == [
        SSEEvent("message", '{"a":1}'), SSEEvent("message", ""),
        SSEEvent("message", "[DONE]")]
    assert decoder.feed(b"t\n\n") == [SSEEvent("message", "part")]


def test_a_chunk_of_plain_events_with_a_stray_line_end_is_read_line_by_line() -> None:
    assert decode_all([b"data: a\n\n\ndata: b\n\n"]) == [
        SSEEvent("message", "a"), SSEEvent("message", "b")]
    assert decode_all([b"data: a\ndata: b\n\ndata: c\n\n"]) == [
        SSEEvent("message", "a\nb"), SSEEvent("message", "c")]


def test_a_plain_event_over_the_cap_is_refused_when_it_arrives_whole() -> None:
    with pytest.raises(EventTooLarge):
        SSEDecoder(64).feed(b"data: " + b"x" * 70 + b"\n\n")
    assert SSEDecoder(64).feed(b"data: " + b"x" * 58 + b"\n\n") == [
        SSEEvent("message", "x" * 58)]


def test_invalid_utf8_raises() -> None:
    decoder = SSEDecoder()
    try:
        decoder.feed(b"data: \xff\xfe\n\n")
    except UnicodeDecodeError:
        return
    raise AssertionError("invalid UTF-8 was accepted")


# --- linear cost and the cap on a line or an event ---------------------------------------------

KIB_64 = 64 * 1024


def bytes_fed_until_too_large(decoder: SSEDecoder, chunks: Iterable[bytes]) -> tuple[int, str]:
    """Feed `chunks` until the decoder gives up: the bytes fed by then, and its message."""
    fed = 0
    for piece in chunks:
        fed += len(piece)
        try:
            decoder.feed(piece)
        except EventTooLarge as exc:
            return fed, str(exc)
    raise AssertionError(f"{fed} bytes fed and the decoder never gave up")


def a_100_mb_line() -> Iterator[bytes]:
    yield b"data: "
    filler = b"x" * KIB_64
    for _ in range(100 * MIB // KIB_64):
        yield filler


def test_a_100_mb_line_ends_at_the_cap_after_about_1_mib_read() -> None:
    fed, message = bytes_fed_until_too_large(SSEDecoder(), a_100_mb_line())
    assert MIB < fed <= MIB + KIB_64 + 6
    assert message == "server-sent event line over 1 MiB"


def test_a_never_ending_line_of_carriage_return_free_text_ends_at_a_configured_cap() -> None:
    fed, message = bytes_fed_until_too_large(SSEDecoder(max_event_bytes=64 * 1024),
                                             itertools.repeat(b"data: " + b"y" * 1000))
    assert 64 * 1024 < fed <= 64 * 1024 + 1006
    assert message == "server-sent event line over 64 KiB"


def test_a_line_over_the_cap_is_refused_even_when_it_arrives_in_one_chunk() -> None:
    with pytest.raises(EventTooLarge, match="line over 1000 bytes"):
        SSEDecoder(max_event_bytes=1000).feed(b"data: " + b"z" * 995 + b"\n\n")


def test_the_cap_is_in_utf8_bytes_and_a_line_exactly_at_it_passes() -> None:
    line = "data: ééé".encode()  # 12 bytes, 9 characters
    assert SSEDecoder(max_event_bytes=12).feed(line + b"\n\n") == [SSEEvent("message", "ééé")]
    with pytest.raises(EventTooLarge, match="line over 11 bytes"):
        SSEDecoder(max_event_bytes=11).feed(line + b"\n\n")
    # a line still open is measured in bytes too: the byte that completes the last é crosses
    fed, message = bytes_fed_until_too_large(SSEDecoder(max_event_bytes=11),
                                             (bytes([byte]) for byte in line))
    assert (fed, message) == (12, "server-sent event line over 11 bytes")


def test_an_event_whose_data_lines_add_up_to_more_than_the_cap_is_refused() -> None:
    decoder = SSEDecoder(max_event_bytes=1024)
    line = b"data: " + b"d" * 100 + b"\n"
    # ten lines and their nine separators are 1009 bytes of data: within the cap
    assert decoder.feed(line * 10 + b"\n") == [SSEEvent("message", "\n".join(["d" * 100] * 10))]
    with pytest.raises(EventTooLarge, match=r"^server-sent event over 1 KiB$"):
        decoder.feed(line * 11)


def test_data_of_earlier_events_does_not_count_against_the_next_one() -> None:
    decoder = SSEDecoder(max_event_bytes=1024)
    event = b"data: " + b"e" * 1000 + b"\n\n"
    assert len([e for _ in range(1000) for e in decoder.feed(event)]) == 1000


def test_a_long_line_under_a_raised_cap_is_joined_exactly_from_its_pieces() -> None:
    body = bytes(range(32, 127)) * (8 * MIB // 95)
    stream = b"data: " + body + b"\r\n\r\n" + b"data: [DONE]\r\n\r\n"
    chunks = [stream[i:i + KIB_64] for i in range(0, len(stream), KIB_64)]
    events = decode_all(chunks, SSEDecoder(max_event_bytes=16 * MIB))
    assert events == [SSEEvent("message", body.decode()), SSEEvent("message", "[DONE]")]


def test_a_long_line_trickled_one_byte_a_read_is_joined_exactly() -> None:
    text = "".join(chr(0x20 + n % 0x3000) for n in range(30_000))  # 1-3 byte characters
    stream = f"data: {text}\n\n".encode()
    decoder = SSEDecoder()
    events = [event for i in range(len(stream)) for event in decoder.feed(stream[i:i + 1])]
    assert events == [SSEEvent("message", text)]


def many_events(count: int) -> tuple[bytes, list[SSEEvent]]:
    """`count` small events with every line ending, comments, event names and multi-byte
    characters, and the events they decode to."""
    ends = ("\n", "\r", "\r\n")
    parts: list[str] = []
    expected: list[SSEEvent] = []
    for n in range(count):
        end = ends[n % 3]
        name = "message" if n % 5 else "delta"
        text = f'{{"n":{n},"t":"héllo → 世界 {"🙂" * (n % 4)}"}}'
        if n % 7 == 0:
            parts.append(f": keep-alive {n}{end}")
        if name != "message":
            parts.append(f"event: {name}{end}")
        parts.append(f"data: {text}{end}")
        if n % 2:
            parts.append(f"data:second line{end}")
            text += "\nsecond line"
        parts.append(end)
        expected.append(SSEEvent(name, text))
    return "".join(parts).encode(), expected


def test_ten_thousand_small_events_fed_one_byte_at_a_time_decode_exactly() -> None:
    """Every split position at once: each CRLF and each multi-byte character is cut."""
    stream, expected = many_events(10_000)
    decoder = SSEDecoder()
    events = [event for i in range(len(stream)) for event in decoder.feed(stream[i:i + 1])]
    assert events + decoder.close() == expected


def test_a_thousand_small_events_decode_exactly_in_chunks_of_every_size_up_to_64() -> None:
    stream, expected = many_events(1000)
    for size in range(2, 65):
        chunks = [stream[i:i + size] for i in range(0, len(stream), size)]
        assert decode_all(chunks) == expected, f"chunks of {size} bytes"


def test_a_carriage_return_ends_a_line_at_once_without_waiting_for_the_next_chunk() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: now\r\r") == [SSEEvent("message", "now")]
    assert decoder.feed(b"\ndata: next\r\n\r\n") == [SSEEvent("message", "next")]


def test_a_cap_below_one_byte_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SSEDecoder(max_event_bytes=0)


def test_sizes_are_written_in_the_largest_whole_unit() -> None:
    assert [size_text(n) for n in (MIB, 3 * MIB, 64 * 1024, 1000, MIB + 1)] == [
        "1 MiB", "3 MiB", "64 KiB", "1000 bytes", "1048577 bytes"]
