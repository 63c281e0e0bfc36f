"""Prefix caching as serving engines do it (vLLM's automatic prefix caching, SGLang's radix
cache): a prompt is cut into blocks of BLOCK_TOKENS tokens, each block cached together with
everything before it, so a new prompt reuses the longest run of leading blocks that an
earlier prompt had, and its prefill costs only the rest. Least recently used blocks go first.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

BLOCK_TOKENS = 16


class PrefixCache:
    def __init__(self, max_blocks: int = 100_000, block_tokens: int = BLOCK_TOKENS) -> None:
        self.max_blocks = max_blocks
        self.block_tokens = block_tokens
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def admit(self, tokens: Sequence[str]) -> int:
        """Prompt tokens served from the cache (whole leading blocks seen before); the
        prompt's own full blocks are cached from now on."""
        cached = 0
        hit = True
        chain = hashlib.blake2b(digest_size=16)
        full = len(tokens) - len(tokens) % self.block_tokens
        for start in range(0, full, self.block_tokens):
            chain.update("\x1f".join(tokens[start:start + self.block_tokens]).encode())
            chain.update(b"\x1e")
            key = chain.digest()
            if hit and key in self._blocks:
                cached += self.block_tokens
                self._blocks.move_to_end(key)
                continue
            hit = False
            self._blocks[key] = None
            if len(self._blocks) > self.max_blocks:
                self._blocks.popitem(last=False)
        return cached
