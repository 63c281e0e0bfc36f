"""A hostile speech server: trickled, lying or impossible WAV heads and audio types, floods of
tiny pieces, one huge delta. Each is classified and bounded, through both transports."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.base import raw_reader
from sustain.probes.protocols.openai_speech import (
    WAV_HEADER_LIMIT,
    SpeechStream,
)
from sustain.probes.workload.spec import Workload
from tests.hostile.media_servers import (
    RSS_GROWTH,
    SOCKET_SLACK,
    TRANSPORTS,
    Conn,
    Handler,
    MiB,
    cut_off,
    hostile,
    one,
    rss,
)

# --- speech ----------------------------------------------------------------------------------


@TRANSPORTS
async def test_a_speech_stream_trickled_a_byte_at_a_time_ends_at_the_total_timeout(
        http2: bool) -> None:
    async def trickle(conn: Conn) -> None:
        conn.head(b"audio/pcm")
        for _ in range(200):  # the load loop's bound: 10 s
            await conn.send(b"\0")
            await asyncio.sleep(0.05)
        await conn.end()

    async with hostile(trickle) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH, Workload(prompt="speak"), http2,
                      timeout_total_s=1.0)
        assert await cut_off(server) == 1  # the probe went away before the server's bound
    assert (m.error_class, m.error_detail) == (ErrorClass.TIMEOUT_TOTAL, "deadline exceeded")
    assert m.ttft_ms is not None  # its first byte came: the total deadline, not the first
    assert server.sent < 200


def wav(rate: int, channels: int, bits: int, *, fmt_size: int = 16,
        data_size: int = 0xFFFFFFFF) -> bytes:
    """A WAV head whose `fmt ` chunk claims `rate`, `channels` and `bits`."""
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * channels * bits // 8 & 0xFFFFFFFF,
                      channels * bits // 8 & 0xFFFF, bits)
    return (b"RIFF\xff\xff\xff\xffWAVE" + b"fmt " + struct.pack("<I", fmt_size) + fmt
            + b"data" + struct.pack("<I", data_size))


def speaks(head: bytes, audio: bytes, content_type: bytes = b"audio/wav") -> Handler:
    async def answer(conn: Conn) -> None:
        conn.head(content_type)
        if head:
            await conn.send(head)
        await conn.send(audio)
        await conn.end()
    return answer


@pytest.mark.parametrize(("rate", "channels", "bits", "fmt_size"), [
    (0, 1, 16, 16), (24_000, 0, 16, 16), (24_000, 1, 0, 16),
    (0xFFFFFFFF, 0xFFFF, 0xFFFF, 16), (24_000, 1, 16, 2)],
    ids=["no-rate", "no-channels", "no-bits", "absurd", "short-fmt"])
async def test_a_wav_head_claiming_an_impossible_format_is_protocol(
        rate: int, channels: int, bits: int, fmt_size: int) -> None:
    async with hostile(speaks(wav(rate, channels, bits, fmt_size=fmt_size),
                              bytes(48_000))) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH,
                      Workload(prompt="speak", audio_format="wav"), False)
    assert m.error_class is ErrorClass.PROTOCOL
    assert str(m.error_detail).startswith("WAV fmt chunk")
    assert m.audio_s is None
    assert m.rtf is None


@pytest.mark.parametrize(("rate", "channels", "bits", "data_size"), [
    (24_000, 1, 16, 10), (24_000, 1, 16, 0), (8_000, 2, 24, 1 << 31), (192_000, 8, 32, 0)])
async def test_a_wav_head_that_lies_about_its_data_size_is_read_by_its_body(
        rate: int, channels: int, bits: int, data_size: int) -> None:
    per_s = rate * channels * bits // 8
    async with hostile(speaks(wav(rate, channels, bits, data_size=data_size),
                              bytes(per_s // 2))) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH,
                      Workload(prompt="speak", audio_format="wav"), False)
    assert m.error_class is None
    assert m.audio_s == pytest.approx(0.5)


def test_a_wav_head_is_read_once_and_held_within_its_bound_however_it_arrives() -> None:
    """A head of 4 KiB of empty chunks: a byte a read, each chunk header is read once (a
    re-scan from the start at every read costs the loop quadratic time); in one read of
    1 MiB, no more than the bound is held or scanned."""
    junk = b"RIFF\0\0\0\0WAVE" + b"JUNK\0\0\0\0" * (WAV_HEADER_LIMIT // 8)
    trickled = SpeechStream(request=b'{"response_format":"wav"}')
    assert raw_reader(trickled, "audio/wav") is trickled
    baseline = SpeechStream(request=b'{"response_format":"pcm"}')
    assert raw_reader(baseline, "audio/pcm") is baseline
    cpu_s = []
    for state in (baseline, trickled):
        started = time.thread_time()
        for k in range(len(junk)):
            state.on_bytes(junk[k:k + 1], k)
        cpu_s.append(time.thread_time() - started)
    assert trickled.failure is ErrorClass.PROTOCOL
    # as much work a byte as counting pcm, within a wide margin (a re-scan is ~500 times it)
    assert cpu_s[1] < 25 * max(cpu_s[0], 1e-4)
    whole = SpeechStream(request=b'{"response_format":"wav"}')
    assert raw_reader(whole, "audio/wav") is whole
    whole.on_bytes(junk + b"JUNK\0\0\0\0" * (MiB // 8), 1)
    assert (whole.failure, whole.detail) == (ErrorClass.PROTOCOL,
                                             "no WAV data chunk in the first 4 KiB")
    assert whole.wav is None  # what it held is let go with the answer's failure


@TRANSPORTS
@pytest.mark.parametrize("content_type", [
    b"audio/L16; rate=0", b"audio/L16; rate=-8000", b"audio/L16; rate=8k",
    b"audio/L16; rate=\xb2", b"audio/L16; rate=" + b"9" * 400,
    b"audio/L16; rate=" + b"9" * 5000, b"audio/pcm; channels=" + b"9" * 400,
    b"audio/pcm; rate=24000; channels=0"],
    ids=["zero", "negative", "not-a-number", "superscript-digit", "overflows-a-float",
         "past-int-digits", "channels-overflow", "no-channels"])
async def test_a_pcm_type_whose_rate_or_channels_is_no_number_is_protocol(
        content_type: bytes, http2: bool) -> None:
    async with hostile(speaks(b"", bytes(4_800), content_type)) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH, Workload(prompt="speak"), http2)
    assert m.error_class is ErrorClass.PROTOCOL
    assert "audio/" in str(m.error_detail)
    assert m.audio_s is None


@TRANSPORTS
async def test_a_pcm_type_with_a_real_rate_and_channels_is_read_by_them(http2: bool) -> None:
    async with hostile(speaks(b"", bytes(6_400),
                              b"audio/L16; rate=16000; channels=2")) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH, Workload(prompt="speak"), http2)
    assert m.error_class is None
    assert m.audio_s == pytest.approx(0.1)


@TRANSPORTS
async def test_a_100_mb_speech_delta_is_refused_at_the_event_cap_without_being_held(
        http2: bool) -> None:
    async def huge_delta(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        await conn.send(b'data: {"type":"speech.audio.delta","audio":"')
        for _ in range(100):  # the load loop's bound: 100 MiB
            await conn.send(b"A" * MiB)
        await conn.send(b'"}\n\n')
        await conn.end()

    async with hostile(huge_delta) as server:
        before = rss()
        m = await one(server, ApiKind.OPENAI_SPEECH,
                      Workload(prompt="speak", stream_format="sse"), http2)
        grown = rss() - before
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "server-sent event line over 1 MiB")
    assert server.sent <= MiB + SOCKET_SLACK
    assert grown < RSS_GROWTH


def delta_events(count: int) -> bytes:
    return b'data: {"type":"speech.audio.delta","audio":"AAAA"}\n\n' * count


@TRANSPORTS
async def test_a_speech_stream_of_a_million_tiny_deltas_ends_at_the_piece_bound(
        http2: bool) -> None:
    async def tiny_deltas(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        for _ in range(250):  # the load loop's bound: a million deltas
            await conn.send(delta_events(4096))
        await conn.send(b'data: {"type":"speech.audio.done"}\n\n')
        await conn.end()

    async with hostile(tiny_deltas) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH,
                      Workload(prompt="speak", stream_format="sse"), http2)
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "speech stream in over 131072 pieces"
    assert len(m.itl_ms) < 131_072


@TRANSPORTS
async def test_raw_speech_in_a_million_one_byte_chunks_ends_at_the_piece_bound(
        http2: bool) -> None:
    """Each chunk is a piece of audio, an ITL gap held: past the bound on pieces, the answer is
    `protocol`, so the ITL list, the probe's memory, is bounded."""
    pieces = 1 << 21

    async def crumbs(conn: Conn) -> None:
        conn.head(b"audio/pcm")
        crumb = b"1\r\n\0\r\n" * 65_536
        for _ in range(pieces // 65_536):
            conn.writer.write(crumb)
            conn.server.sent += 65_536
            await conn.writer.drain()
        await conn.end()

    async with hostile(crumbs) as server:
        before = rss()
        m = await one(server, ApiKind.OPENAI_SPEECH, Workload(prompt="speak"), http2)
        grown = rss() - before
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "speech stream in over 131072 pieces")
    assert len(m.itl_ms) < 131_072
    assert m.audio_s == pytest.approx(131_072 / 48_000)  # counted up to the bound
    assert grown < RSS_GROWTH
