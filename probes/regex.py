"""Regular expressions compiled with RE2: matching takes time linear in the input whatever the
pattern, so a pattern from a caller (an alert matcher, a quality canary's `regex`) can never
hold a loop (Python's backtracking `re` let `(a+)+$` against a 26-character text run for
seconds). Pure."""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import re2

MAX_PATTERN_LENGTH = 1000
"""Longer patterns are refused (they are matchers, not programs)."""
MAX_PATTERN_MEMORY_BYTES = 256 * 1024
r"""Memory RE2 may spend on one pattern (its program and match-time caches). RE2's default
is 8 MiB: thirty-two 150-character patterns such as `(?:\pL|\pN){150}` held 4 MB each, and
the cache below keeps up to CACHED of them, so a caller could make the process hold
gigabytes with requests that were refused anyway. A pattern that needs more is refused."""
CACHED = 256
"""Compiled patterns kept (at most CACHED x MAX_PATTERN_MEMORY_BYTES = 64 MiB)."""


class Compiled(Protocol):
    """What a compiled RE2 pattern offers here."""

    def fullmatch(self, text: str) -> object | None: ...
    def search(self, text: str) -> object | None: ...


class PatternError(ValueError):
    """A pattern RE2 does not accept; the message says why, never echoing the input."""


@lru_cache(maxsize=CACHED)
def compiled(pattern: str) -> Compiled:
    """`pattern` compiled by RE2; PatternError when it is too long or not RE2 syntax."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"is longer than {MAX_PATTERN_LENGTH} characters")
    options = re2.Options()
    options.log_errors = False  # a bad pattern is the caller's 4xx, not a log line
    options.max_mem = MAX_PATTERN_MEMORY_BYTES
    try:
        result: Compiled = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid"
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise PatternError(f"is not a valid RE2 regular expression ({text.split(':')[0]})"
                           ) from None
    return result
