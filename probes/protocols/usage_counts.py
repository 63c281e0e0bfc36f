"""The token counts a server reports in its usage objects, taken only where they can be true:
an integer within MAX_TOKEN_COUNT, cached tokens no more than the prompt, reasoning tokens no
more than the output they are part of. Every protocol reads its usage through these."""

from __future__ import annotations

from typing import Any

MAX_TOKEN_COUNT = 2**31 - 1


def token_count(value: Any) -> int | None:
    """A usage figure as reported by the server, or None when absent or implausible."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_TOKEN_COUNT else None


def cached_token_count(usage: dict[str, Any]) -> int | None:
    """Prompt tokens served from the server's prefix cache
    (`usage.prompt_tokens_details.cached_tokens`, as OpenAI, vLLM and SGLang report them), or
    None when absent or implausible (more than the prompt)."""
    details = usage.get("prompt_tokens_details")
    cached = token_count(details.get("cached_tokens")) if isinstance(details, dict) else None
    prompt = token_count(usage.get("prompt_tokens"))
    if cached is None or (prompt is not None and cached > prompt):
        return None
    return cached


def reasoning_token_count(usage: Any, details_key: str) -> int | None:
    """Reasoning tokens of a usage object (`completion_tokens_details.reasoning_tokens` for
    chat, `output_tokens_details.reasoning_tokens` for Responses), or None when absent or
    implausible (`plausible_reasoning`: more than the output it details)."""
    details = usage.get(details_key) if isinstance(usage, dict) else None
    if not isinstance(details, dict):
        return None
    output = token_count(usage.get(details_key.removesuffix("_details")))
    return plausible_reasoning(token_count(details.get("reasoning_tokens")), output)


def plausible_reasoning(reasoning: int | None, output: int | None) -> int | None:
    """A server's count of reasoning tokens, or None when there is none or it cannot be true:
    reasoning tokens are part of the output, so never more than the output counted with
    them (`output`, where known)."""
    if reasoning is None or (output is not None and reasoning > output):
        return None
    return reasoning


def estimated_reasoning(estimate: int, output: int) -> int | None:
    """Reasoning tokens estimated (from reasoning deltas or words), at most the `output` they
    are part of: the server's output count is taken as given, so an estimate past it is
    not; None for no reasoning."""
    return min(estimate, max(output, 0)) or None
