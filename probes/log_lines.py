"""Log lines that stay one line: every control character (C0, DEL, C1, and the Unicode line
and paragraph separators) in a record, its arguments and its exception text is written as an
escape (`\\n`, `\\x1b`, `\\u2028`), so caller input in a message (a dataset path, a name, an
error text) can neither forge a log line nor send terminal escape sequences. Used by the
service's text format and by the measurement workers, which log on their own."""

from __future__ import annotations

import logging

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CONTROLS = [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]
_ESCAPES = str.maketrans({
    chr(code): _NAMED.get(chr(code), f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    for code in _CONTROLS})


def escape_controls(text: str) -> str:
    """`text` with every control character written as a visible escape."""
    return text.translate(_ESCAPES)


class OneLineFormatter(logging.Formatter):
    """The text format, one line per record whatever the message, arguments or exception
    hold."""

    def format(self, record: logging.LogRecord) -> str:
        return escape_controls(super().format(record))
