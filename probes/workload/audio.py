"""Synthetic audio for transcription probes: a 16 kHz mono 16-bit PCM WAV of a given length,
a few tones under noise. The clip is made once per run (a 30 s clip takes numpy some 30 ms);
each request then gets a copy whose first SALT_SECONDS are fresh noise from a generator seeded
for it, so no two requests send the same samples and no cache of audio can answer one from
another. With the cache defeated (the default) the seed is new for every request; with the
cache allowed it is the workload's seed and the request's number, the same every run. A copy
and a salt cost well under a millisecond, before t_send (never within a request's time)."""

from __future__ import annotations

import io
import wave

import numpy as np

SAMPLE_RATE = 16_000
"""Hz: what speech models (Whisper and its kin) resample to anyway."""
MAX_AUDIO_SECONDS = 600.0
SALT_SECONDS = 0.05
WAV_HEADER_BYTES = 44
"""A plain PCM WAV's header (RIFF, fmt, data): its samples start right after it."""


def synthetic_wav(seconds: float, seed: int) -> bytes:
    """A WAV of `seconds` (rounded to whole samples): three tones between 200 and 1000 Hz
    under white noise, at about a quarter of full scale."""
    rng = np.random.default_rng(seed)
    count = max(1, round(seconds * SAMPLE_RATE))
    t = np.arange(count) / SAMPLE_RATE
    signal = sum(np.sin(2 * np.pi * f * t + phase) for f, phase in zip(
        rng.uniform(200, 1000, 3), rng.uniform(0, 2 * np.pi, 3), strict=True))
    signal = signal / 3 * 0.25 + rng.normal(0, 0.02, count)
    pcm = np.clip(signal * 32767, -32768, 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(pcm.tobytes())
    return out.getvalue()


class SaltedWav:
    """One clip of `seconds`, made once; `salted(seed)` is a copy with its start salted."""

    def __init__(self, seconds: float, seed: int = 0) -> None:
        self.wav = synthetic_wav(seconds, seed)
        self.seconds = wav_seconds(self.wav) or seconds

    def salted(self, seed: int) -> bytes:
        clip = bytearray(self.wav)
        count = min(round(SALT_SECONDS * SAMPLE_RATE), (len(clip) - WAV_HEADER_BYTES) // 2)
        noise = np.random.default_rng(seed).integers(-8192, 8192, count, dtype="<i2")
        clip[WAV_HEADER_BYTES:WAV_HEADER_BYTES + 2 * count] = noise.tobytes()
        return bytes(clip)


def wav_seconds(data: bytes) -> float | None:
    """The length of a WAV in seconds, or None when it is not one."""
    try:
        with wave.open(io.BytesIO(data), "rb") as wav:
            rate = wav.getframerate()
            return wav.getnframes() / rate if rate > 0 else None
    except (wave.Error, EOFError):
        return None
