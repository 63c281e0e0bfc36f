"""API keys and roles as plain values: how a key looks, how it is stored, what a role may do.

A key is `sk_sustain_` followed by 43 URL-safe base64 characters (256 random bits), so a key
that leaks into a log or a repository can be recognised by its prefix. Only its SHA-256 is
stored: the key carries all the entropy, so a slow password hash would add nothing but
per-request cost (the same reasoning as GitHub's and Stripe's tokens)."""

from __future__ import annotations

import enum
import hashlib
import hmac
import itertools
import math
import secrets
from collections import Counter
from collections.abc import Sequence

KEY_PREFIX = "sk_sustain_"
MIN_KEY_CHARS = 32
"""Characters after the prefix a bootstrap key must have (≥ 128 bits if random base64)."""
MIN_KEY_BITS = 96
"""Estimated entropy (see estimated_bits) a bootstrap key must carry after its prefix, in bits.
The estimate runs low on short strings: a generated key estimates about 208 bits and never
less than about 180, a random 32-character base64 key about 145 and never less than about 120,
while 'a' * 32 estimates 0, 'ab' * 16 32 and '0123456789' * 4 about 16."""
SHOWN_PREFIX_CHARS = len(KEY_PREFIX) + 6
"""How much of a key is kept in clear to tell keys apart in lists (`sk_sustain_AbCdEf`)."""


class Role(enum.StrEnum):
    """viewer, editor and admin are ordered: each may do everything the ones before it may.
    `agent` stands apart: it may only do what an agent does (fetch its location's
    assignments, heartbeat, claim ticks and upload results there), and no other role may."""

    viewer = "viewer"
    editor = "editor"
    admin = "admin"
    agent = "agent"


_RANK = {Role.viewer: 0, Role.editor: 1, Role.admin: 2}


def allows(held: Role, needed: Role) -> bool:
    """Whether a key holding `held` may do what needs `needed`."""
    if Role.agent in (held, needed):
        return held == needed
    return _RANK[held] >= _RANK[needed]


def generate_key() -> str:
    """A new key: the prefix and 32 random bytes, URL-safe base64 (43 characters)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def _shannon_bits(symbols: Sequence[object]) -> float:
    """Shannon entropy of the symbols' frequencies, in bits per symbol (0 for none)."""
    total = len(symbols)
    return -sum(n / total * math.log2(n / total) for n in Counter(symbols).values())


def estimated_bits(secret: str) -> float:
    """A conservative estimate of the entropy of `secret`, in bits: its length times the
    smaller of the Shannon entropy of its characters and that of the steps between neighbours
    (differences of code points). The first is low for few distinct characters ('aaaa',
    'abab'), the second for runs and cycles ('0123456789' repeated, 'abcdef...'). It cannot
    recognise words or a known string; it only refuses keys that are visibly not random."""
    steps = [ord(b) - ord(a) for a, b in itertools.pairwise(secret)]
    if not steps:
        return 0.0
    return len(secret) * min(_shannon_bits(secret), _shannon_bits(steps))


def weak_key_reason(key: str) -> str | None:
    """Why `key` may not be the bootstrap admin key, or None: it must be the prefix, at least
    MIN_KEY_CHARS printable ASCII characters and MIN_KEY_BITS of estimated entropy. Reasons
    state the rule, never the key."""
    if not key.startswith(KEY_PREFIX) or len(key) - len(KEY_PREFIX) < MIN_KEY_CHARS:
        return (f"must be {KEY_PREFIX} followed by at least {MIN_KEY_CHARS} characters "
                "(`sustain keys generate` prints one)")
    if not key.isascii() or not key.isprintable() or " " in key:
        return "must be printable ASCII without spaces"
    if estimated_bits(key[len(KEY_PREFIX):]) < MIN_KEY_BITS:
        return (f"is too predictable (repeated, cyclic or sequential characters; at least "
                f"{MIN_KEY_BITS} bits of entropy needed): `sustain keys generate` prints a "
                "random one")
    return None


def key_hash(key: str) -> str:
    """Hex SHA-256 of a key: what is stored and looked up."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def same_hash(a: str, b: str) -> bool:
    """Constant-time comparison of two key hashes."""
    return hmac.compare_digest(a, b)


def shown_prefix(key: str) -> str:
    """The part of a key kept in clear for lists and audit lines."""
    return key[:SHOWN_PREFIX_CHARS]


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None for anything else."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 512:
        return None
    return token
