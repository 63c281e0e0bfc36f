"""JSONL prompt datasets: one request per line, `{"prompt": "..."}` or `{"messages": [...]}`,
optionally with its own `max_tokens`. Read once before a run; errors name the line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_LINES = 1_000_000


class DatasetError(ValueError):
    """The file cannot be used; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class DatasetEntry:
    messages: tuple[dict[str, Any], ...] | None
    prompt: str | None
    max_tokens: int | None

    def text(self) -> str:
        """The prompt as plain text (a completions API gets the messages joined)."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(str(m.get("content", "")) for m in self.messages or ())


def _entry(record: Any, where: str) -> DatasetEntry:
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    prompt, messages = record.get("prompt"), record.get("messages")
    if (prompt is None) == (messages is None):
        raise DatasetError(f"{where}: needs exactly one of 'prompt' and 'messages'")
    if prompt is not None and (not isinstance(prompt, str) or not prompt):
        raise DatasetError(f"{where}: 'prompt' must be a non-empty string")
    if messages is not None and (
            not isinstance(messages, list) or not messages
            or not all(isinstance(m, dict) and isinstance(m.get("role"), str)
                       and isinstance(m.get("content"), str) for m in messages)):
        raise DatasetError(f"{where}: 'messages' must be a list of {{role, content}} objects")
    max_tokens = record.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                   or not 1 <= max_tokens <= 1_000_000):
        raise DatasetError(f"{where}: 'max_tokens' must be an integer from 1 to 1000000")
    return DatasetEntry(messages=None if messages is None else tuple(messages), prompt=prompt,
                        max_tokens=max_tokens)


def load_jsonl(path: str | Path) -> list[DatasetEntry]:
    file = Path(path)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{file}: cannot read ({exc})") from None
    entries: list[DatasetEntry] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(entries) >= MAX_LINES:
            raise DatasetError(f"{file}: more than {MAX_LINES} prompts")
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{file}:{number}: invalid JSON ({exc.args[0]})") from None
        entries.append(_entry(record, f"{file}:{number}"))
    if not entries:
        raise DatasetError(f"{file}: no prompts")
    return entries
