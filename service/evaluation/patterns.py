"""Regular expressions of label matchers, compiled with RE2 (probes/regex.py): matching takes
time linear in the input whatever the pattern (Alertmanager's Go regexps are RE2 too, so a
silence means the same in both). Python's backtracking `re` let `(a+)+$` against a
26-character label hold the event loop for seconds. Pure."""

from __future__ import annotations

from sustain.probes.regex import MAX_PATTERN_LENGTH, Compiled, PatternError, compiled

__all__ = ["MAX_PATTERN_LENGTH", "PatternError", "anchored", "full_match"]


def anchored(pattern: str) -> Compiled:
    """`pattern` compiled (once) to match a whole string with fullmatch, as Alertmanager
    anchors it; PatternError when RE2 refuses it."""
    return compiled(pattern)


def full_match(pattern: str, text: str) -> bool:
    """Whether all of `text` matches `pattern`, in time linear in len(text)."""
    return anchored(pattern).fullmatch(text) is not None
