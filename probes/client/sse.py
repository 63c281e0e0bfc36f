"""Incremental decoder for `text/event-stream` (WHATWG server-sent events).

Bytes arrive in arbitrary chunks: a chunk may end inside a line, inside a CRLF pair or inside a
multi-byte UTF-8 character, so the decoder keeps state across `feed` calls.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str


class SSEDecoder:
    """Feed bytes, get complete events. Invalid UTF-8 raises UnicodeDecodeError."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._buffer = ""
        self._data: list[str] = []
        self._event = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buffer += self._utf8.decode(chunk)
        return self._drain(final=False)

    def close(self) -> list[SSEEvent]:
        """End of stream. Unlike a browser, which drops an event not followed by a blank line,
        a trailing line and a pending event are delivered: some servers end with
        `data: [DONE]` and no blank line, and the data did arrive."""
        self._buffer += self._utf8.decode(b"", final=True)
        events = self._drain(final=True)
        if self._buffer:
            self._line(self._buffer)
            self._buffer = ""
        if (last := self._line("")) is not None:
            events.append(last)
        return events

    def _drain(self, *, final: bool) -> list[SSEEvent]:
        if "\r" not in self._buffer:  # the common case, split in C
            lines = self._buffer.split("\n")
            self._buffer = lines.pop()
            return [event for line in lines if (event := self._line(line)) is not None]
        events: list[SSEEvent] = []
        pos = 0
        while (match := _LINE_END.search(self._buffer, pos)) is not None:
            if match.group() == "\r" and match.end() == len(self._buffer) and not final:
                break  # may be the first half of a CRLF split across chunks
            event = self._line(self._buffer[pos : match.start()])
            if event is not None:
                events.append(event)
            pos = match.end()
        self._buffer = self._buffer[pos:]
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if line.startswith("data: "):
            self._data.append(line[6:])
            return None
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent(event=self._event or "message", data="\n".join(self._data))
            self._data, self._event = [], ""
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None
