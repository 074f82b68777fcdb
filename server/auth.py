"""Per-device bearer tokens: shown once at creation, stored only as a SHA-256 hash.

Tokens carry 256 bits of randomness, so a fast hash is enough (nothing to brute-force); the
first characters are kept apart to tell tokens apart in listings.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["PREFIX", "hash_token", "new_token", "token_prefix", "tokens_equal"]

PREFIX = "nui_"


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_prefix(token: str) -> str:
    return token[: len(PREFIX) + 6]


def tokens_equal(hashed: str, other_hash: str) -> bool:
    return hmac.compare_digest(hashed, other_hash)
