"""Regular expressions (ECMA 262 and Python alike) for the OpenAPI document: what a field's
validator accepts, spelled as a `pattern` so that a client built from the document sends only
what passes. Each is built from the same bounds the validator uses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from sustain.service.history.windows import DAY_S, HOUR_S

DURATION_UNITS_S = {"s": 1, "m": 60, "h": HOUR_S, "d": DAY_S, "w": 7 * DAY_S}
"""The units of a duration (service/history/windows.py parse_duration), in seconds."""
DURATION_MAX_NUMBER = 9_999_999
"""parse_duration reads at most seven digits."""


def _digits(low: int, high: int) -> str:
    """One digit from `low` to `high`."""
    return str(low) if low == high else f"[{low}-{high}]"


def _same_length(low: str, high: str) -> list[str]:
    """Alternatives matching the numbers from `low` to `high`, both of the same length (no
    leading zeros beyond what they have)."""
    if low == high:
        return [low]
    if len(low) == 1:
        return [_digits(int(low), int(high))]
    first_low, first_high = int(low[0]), int(high[0])
    rest = len(low) - 1
    if low[1:] == "0" * rest and high[1:] == "9" * rest:
        return [_digits(first_low, first_high) + _any_digits(rest)]
    # split on the first digit: [low, low's prefix then 9s], the whole middle, [high's prefix
    # then 0s, high]
    if first_low == first_high:
        return [low[0] + _group(_same_length(low[1:], high[1:]))]
    out = [low[0] + _group(_same_length(low[1:], "9" * rest))]
    if first_high - first_low > 1:
        out.append(_digits(first_low + 1, first_high - 1) + _any_digits(rest))
    out.append(high[0] + _group(_same_length("0" * rest, high[1:])))
    return out


def _any_digits(count: int) -> str:
    return "[0-9]" if count == 1 else f"[0-9]{{{count}}}"


def _group(alternatives: list[str]) -> str:
    return alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"


def whole_numbers(low: int, high: int) -> str:
    """A regex (unanchored, one group) of the whole numbers from `low` to `high` (0 <= low <=
    high), written without leading zeros."""
    if not 0 <= low <= high:
        raise ValueError(f"no whole numbers from {low} to {high}")
    alternatives: list[str] = []
    start = low
    while start <= high:
        top = min(high, 10 ** len(str(start)) - 1)
        alternatives += _same_length(str(start), str(top))
        start = top + 1
    return _group(alternatives)


def duration_pattern(max_s: int) -> str:
    """A duration (`30s`, `5m`, `1h`, `28d`, `2w`) of more than 0 and at most `max_s` seconds,
    as parse_duration reads it (written without leading zeros or spaces)."""
    units = [f"{whole_numbers(1, min(DURATION_MAX_NUMBER, max_s // unit_s))}{unit}"
             for unit, unit_s in DURATION_UNITS_S.items() if max_s >= unit_s]
    return f"^(?:{'|'.join(units)})$"


def _ascending(low: int, high: int) -> list[str]:
    """Alternatives matching the ranges `a-b`, low <= a <= b <= high <= 99, grouped by the
    tens digit so that the pattern stays small: a one-digit a with a one-digit b from a on, or
    with any two-digit b; a two-digit a with a b of the same tens digit from a's units on, or
    of a higher tens digit."""
    alternatives = []
    top = min(high, 9)
    for a in range(low, top + 1):
        alternatives.append(f"{a}-{whole_numbers(a, top)}")
    if high >= 10:
        if low <= 9:
            alternatives.append(f"{_digits(low, top)}-{whole_numbers(10, high)}")
        last_tens = high // 10
        for tens in range(max(1, low // 10), last_tens + 1):
            first_unit = low % 10 if tens == low // 10 else 0
            last_unit = high % 10 if tens == last_tens else 9
            alternatives.append(f"{tens}" + _group([
                f"{unit}-{tens}{_digits(unit, last_unit)}"
                for unit in range(first_unit, last_unit + 1)]))
            if tens < last_tens:
                alternatives.append(f"{tens}{_digits(first_unit, last_unit)}-"
                                    f"{whole_numbers((tens + 1) * 10, high)}")
    return alternatives


def _cron_field(low: int, high: int, names: tuple[str, ...] = ()) -> str:
    """One field of a crontab expression: a comma-separated list of `*`, `*/step` (a step
    within the field's span), a value, or an ascending range `a-b` (values from `low` to
    `high`, or `names` for the values from `low` on)."""
    value = _group([whole_numbers(low, high), *names])
    ranges = _ascending(low, high)
    ranges += [f"{name}-{_group(list(names[i:]))}" for i, name in enumerate(names[:-1])]
    item = _group([f"\\*(?:/{whole_numbers(1, high - low)})?", *ranges, value])
    return f"{item}(?:,{item})*"


WEEKDAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
CRON_PATTERN = "^" + " ".join([
    _cron_field(0, 59), _cron_field(0, 23), _cron_field(1, 31), _cron_field(1, 12),
    _cron_field(0, 7, WEEKDAY_NAMES)]) + "$"
"""A five-field crontab expression (minute hour day month weekday, 0 and 7 are Sunday),
fields one space apart: lists of `*`, `*/step`, values and ascending ranges. What a validator
still refuses beyond it: an expression that never fires (the 31st of February)."""


SPECIAL = frozenset("\\^$.|?*+()[]{}/")
"""Characters escaped in a pattern (only these: ECMA 262's unicode mode refuses escapes of
others, such as an escaped hyphen)."""


def literal(text: str) -> str:
    """`text` as a literal in a pattern."""
    return "".join(f"\\{c}" if c in SPECIAL else c for c in text)


def caseless(word: str) -> str:
    """`word` matched in any case (JSON Schema patterns take no flags)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha()
                   else f"\\{c}" if c in SPECIAL else c for c in word)


def none_of(words: Iterable[str], how: Literal["is", "contains", "starts"]) -> str:
    """A lookahead refusing a value that is, contains or starts with one of `words`, in any
    case."""
    alternatives = "|".join(caseless(w) for w in sorted(words))
    return {"is": f"(?!(?:{alternatives})$)", "contains": f"(?!.*(?:{alternatives}))",
            "starts": f"(?!(?:{alternatives}))"}[how]


def zoned_time(first_year: int, last_year: int) -> str:
    """An RFC 3339 time with its offset (`2026-12-03T10:00:00Z`), in the years from
    `first_year` to `last_year` (four digits each)."""
    return (f"^{whole_numbers(first_year, last_year)}-[0-9]{{2}}-[0-9]{{2}}T[0-9]{{2}}:[0-9]{{2}}"
            r":[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$")
