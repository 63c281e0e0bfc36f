"""Regular expressions of label matchers, compiled with RE2: matching takes time linear in the
input whatever the pattern (Alertmanager's Go regexps are RE2 too, so a silence means the same
in both). Python's backtracking `re` let `(a+)+$` against a 26-character label hold the event
loop for seconds. Pure."""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import re2

MAX_PATTERN_LENGTH = 1000
"""Longer patterns are refused (they are label matchers, not programs)."""


class Compiled(Protocol):
    """What a compiled RE2 pattern offers here."""

    def fullmatch(self, text: str) -> object | None: ...


class PatternError(ValueError):
    """A pattern RE2 does not accept; the message says why, never echoing the input."""


@lru_cache(maxsize=1024)
def anchored(pattern: str) -> Compiled:
    """`pattern` compiled to match a whole string (fullmatch), as Alertmanager anchors it."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"is longer than {MAX_PATTERN_LENGTH} characters")
    options = re2.Options()
    options.log_errors = False  # a bad pattern is the caller's 422, not a log line
    try:
        compiled: Compiled = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid"
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise PatternError(f"is not a valid RE2 regular expression ({text.split(':')[0]})"
                           ) from None
    return compiled


def full_match(pattern: str, text: str) -> bool:
    """Whether all of `text` matches `pattern`, in time linear in len(text)."""
    return anchored(pattern).fullmatch(text) is not None
