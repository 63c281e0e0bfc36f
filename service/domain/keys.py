"""API keys and roles as plain values: how a key looks, how it is stored, what a role may do.

A key is `sk_sustain_` followed by 43 URL-safe base64 characters (256 random bits), so a key
that leaks into a log or a repository can be recognised by its prefix. Only its SHA-256 is
stored: the key carries all the entropy, so a slow password hash would add nothing but
per-request cost (the same reasoning as GitHub's and Stripe's tokens)."""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets

KEY_PREFIX = "sk_sustain_"
MIN_KEY_CHARS = 32
"""Characters after the prefix a bootstrap key must have (≥ 128 bits if random base64)."""
SHOWN_PREFIX_CHARS = len(KEY_PREFIX) + 6
"""How much of a key is kept in clear to tell keys apart in lists (`sk_sustain_AbCdEf`)."""


class Role(enum.StrEnum):
    """Ordered: each role may do everything the ones before it may."""

    viewer = "viewer"
    editor = "editor"
    admin = "admin"


_RANK = {Role.viewer: 0, Role.editor: 1, Role.admin: 2}


def allows(held: Role, needed: Role) -> bool:
    """Whether a key holding `held` may do what needs `needed`."""
    return _RANK[held] >= _RANK[needed]


def generate_key() -> str:
    """A new key: the prefix and 32 random bytes, URL-safe base64 (43 characters)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


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
