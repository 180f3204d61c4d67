"""Input every backing refuses before any I/O, shared by the suites' refusal cases."""

from __future__ import annotations

UNUSABLE_IDS = ("", "nul\x00inside", "lone\ud800surrogate", "x" * 3000, "é" * 257)
"""Ids no store accepts: empty, holding a NUL, not valid Unicode (a lone surrogate, which
UTF-8 cannot encode), or over `durably.validation.MAX_ID_BYTES` in UTF-8 (3,000 bytes; 257
two-byte characters)."""

UNSTORABLE_TEXTS = ("nul\x00inside", "lone\ud800surrogate", "\udfff")
"""Text no backing stores inside a value or a record: PostgreSQL's ``jsonb`` holds no NUL
and UTF-8 no lone surrogate, so every backing refuses both alike."""

__all__ = ["UNSTORABLE_TEXTS", "UNUSABLE_IDS"]
