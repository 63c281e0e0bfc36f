"""Incremental decoder for `text/event-stream` (WHATWG server-sent events).

Bytes arrive in arbitrary chunks: a chunk may end inside a line, inside a CRLF pair or inside a
multi-byte UTF-8 character, so the decoder keeps state across `feed` calls.

It runs on the event loop that times every other request, so its cost must not depend on what
an endpoint sent before: each `feed` scans only the new bytes (a line still open is kept as a
list of pieces, joined when it ends), and a line or an event larger than
`max_event_bytes` raises EventTooLarge at once instead of being buffered. Without the cap one
endpoint streaming a 100 MB (or never-ending) line would hold memory and, with it, the loop.
"""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

_LINE_END = re.compile(r"\r\n|\r|\n")
_MAX_PIECES = 256
"""Pieces of an open line kept apart before they are joined into one: bounds the memory of a
line trickled a few bytes a read (a list entry per read) at a copy of at most 1/256 of the cap
per read."""
KIB = 1024
MIB = 1024 * KIB
MAX_EVENT_BYTES = MIB
"""The default cap on one line, and on one event's data (its `data` lines joined), in UTF-8
bytes. Chat and completion chunks are a few hundred bytes; 1 MiB leaves room for large tool-call
arguments or logprobs while a stray 100 MB line ends after about 1 MiB has been read."""


def size_text(size: int) -> str:
    """A byte count for a message: `1 MiB`, `64 KiB`, else `1000 bytes`."""
    if size >= MIB and size % MIB == 0:
        return f"{size // MIB} MiB"
    if size >= KIB and size % KIB == 0:
        return f"{size // KIB} KiB"
    return f"{size} bytes"


def utf8_size(text: str) -> int:
    """Bytes of `text` in UTF-8: O(1) for ASCII (CPython knows a str is ASCII), else encoded."""
    return len(text) if text.isascii() else len(text.encode())


class EventTooLarge(ValueError):
    """A line or an event went over the decoder's cap: the stream is a protocol error. The
    message says which and the cap, e.g. `server-sent event line over 1 MiB`."""


class SSEEvent(NamedTuple):
    """One event: its type (`message` unless an `event:` line named one) and its data lines
    joined. A named tuple: made once per event of every stream measured, it costs a tuple's
    allocation and no more (a frozen dataclass's constructor costs several times that)."""

    event: str
    data: str


_make_event = tuple.__new__
"""SSEEvent's constructor without the Python frame of a named tuple's own `__new__` (the
fields in order, as a tuple): half the cost, once per event of every stream measured."""


class SSEDecoder:
    """Feed bytes, get complete events. Invalid UTF-8 raises UnicodeDecodeError; a line or an
    event's data over `max_event_bytes` (UTF-8 bytes) raises EventTooLarge as soon as the bytes
    that cross the cap arrive. After either, the decoder is not to be fed again.

    Cost: linear in the bytes fed, whatever the chunking; memory: at most about
    `max_event_bytes` plus one chunk."""

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be at least 1")
        self._max = max_event_bytes
        self._always_fits = max_event_bytes // 4
        """A line of at most this many characters is within the cap whatever they are (UTF-8
        takes at most 4 bytes a character), so most lines are never measured in bytes."""
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._utf8_open = False
        """The UTF-8 decoder holds the first bytes of a character cut by a chunk's end."""
        self._pieces: list[str] = []
        """The line still open: the text after the last line end, one piece per feed."""
        self._pending = 0
        """UTF-8 bytes in `_pieces`."""
        self._after_cr = False
        """The text fed so far ended with CR: an LF first in the next text completes a CRLF."""
        self._data: list[str] = []
        self._data_bytes = 0
        """UTF-8 bytes of the event's data so far, `\\n` separators included."""
        self._event = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not self._utf8_open and chunk.isascii():
            text = chunk.decode("ascii")  # the common case: C, without the codec's Python
        else:
            text = self._utf8.decode(chunk)
            self._utf8_open = bool(self._utf8.getstate()[0])
        if not text:
            return []
        if self._after_cr or "\r" in text:
            return self._scan(text)
        if self._pieces or self._data or self._event:
            # An event begun in an earlier chunk (a read seldom ends at an event boundary):
            # line by line up to the first blank line, which ends it; plain from there on.
            cut = text.find("\n\n") + 2
            if cut < 2:
                return self._scan(text)
            events = self._scan(text[:cut])
            if cut < len(text):
                events.extend(self._plain(text[cut:]))
            return events
        return self._plain(text)

    def _plain(self, text: str) -> list[SSEEvent]:
        """CR-free `text` from an event boundary (no line open, no event begun): its
        complete part, when it is nothing but unnamed one-line `data: ` events (what OpenAI-
        style servers send), is split into their data by str.count and str.split, which run
        in C, with no work per line in Python; anything else (a comment, a field, a
        multi-line event, `data:` without its space) goes line by line through `_scan`.

        Why the counts prove the shape: the part starts with `data: ` and ends with a blank
        line; if splitting it at the separators `\\n\\ndata: ` gives k values and it holds
        2k line ends in all, the k-1 separators and the final blank line account for every
        line end, so each value is one line: exactly the data of the k events."""
        end = text.rfind("\n\n") + 2
        if end < 2 or end > self._always_fits or not text.startswith("data: "):
            return self._scan(text)
        if text.find("\n") == end - 2:  # one event (a chunk per token): its one line
            events = [_make_event(SSEEvent, ("message", text[6:end - 2]))]
        else:
            whole = text[:end] if end < len(text) else text
            values = whole[6:-2].split("\n\ndata: ")
            if whole.count("\n") != 2 * len(values):
                return self._scan(text)
            events = [_make_event(SSEEvent, ("message", value)) for value in values]
        if end < len(text):
            events.extend(self._scan(text[end:]))
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream. Unlike a browser, which drops an event not followed by a blank line,
        a trailing line and a pending event are delivered: some servers end with
        `data: [DONE]` and no blank line, and the data did arrive."""
        text = self._utf8.decode(b"", final=True)
        events = self._scan(text) if text else []
        if self._pieces:
            line = "".join(self._pieces)
            self._pieces, self._pending = [], 0
            self._line(line)
        if (last := self._line("")) is not None:
            events.append(last)
        return events

    def _scan(self, text: str) -> list[SSEEvent]:
        """Split newly decoded, non-empty `text` at its line ends: a CR is a line end at once
        (whether an LF follows is only known later, and then that LF is skipped)."""
        lines = text.split("\n") if "\r" not in text else _LINE_END.split(text)
        after_cr, self._after_cr = self._after_cr, text[-1] == "\r"
        tail = lines.pop()
        if after_cr and text[0] == "\n":
            del lines[0]  # the LF of a CRLF split across feeds: that line already ended
        events: list[SSEEvent] = []
        if lines:
            if self._pieces:
                self._pieces.append(lines[0])
                lines[0] = "".join(self._pieces)
                self._pieces, self._pending = [], 0
            # The per-line work of `_line`, inlined for the common lines (`data: ...` and the
            # blank line that ends an event): this loop runs once per line of every stream
            # measured, so it makes no call and no object beyond the event it returns.
            always_fits, cap = self._always_fits, self._max
            data, data_bytes = self._data, self._data_bytes
            for line in lines:
                if len(line) > always_fits and utf8_size(line) > cap:
                    raise EventTooLarge(f"server-sent event line over {size_text(cap)}")
                if line.startswith("data: "):
                    value = line[6:]
                    data_bytes += (len(value) if value.isascii() else len(value.encode())) \
                        + (1 if data else 0)
                    if data_bytes > cap:
                        raise EventTooLarge(f"server-sent event over {size_text(cap)}")
                    data.append(value)
                elif not line:
                    if data:
                        events.append(_make_event(SSEEvent, (
                            self._event or "message",
                            data[0] if len(data) == 1 else "\n".join(data))))
                        data = []
                        self._data = data
                        data_bytes = 0
                    self._event = ""
                else:
                    self._data_bytes = data_bytes
                    self._line(line)
                    data, data_bytes = self._data, self._data_bytes
            self._data_bytes = data_bytes
        if tail:
            self._pieces.append(tail)
            self._pending += utf8_size(tail)
            if self._pending > self._max:
                raise EventTooLarge(f"server-sent event line over {size_text(self._max)}")
            if len(self._pieces) > _MAX_PIECES:
                self._pieces = ["".join(self._pieces)]
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if line.startswith("data: "):
            self._add_data(line[6:])
            return None
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent(event=self._event or "message", data="\n".join(self._data))
            self._data, self._data_bytes, self._event = [], 0, ""
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._add_data(value)
        elif name == "event":
            self._event = value
        return None

    def _add_data(self, value: str) -> None:
        self._data_bytes += utf8_size(value) + (1 if self._data else 0)
        if self._data_bytes > self._max:
            raise EventTooLarge(f"server-sent event over {size_text(self._max)}")
        self._data.append(value)
