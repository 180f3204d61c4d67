"""Masks secrets in tool-call arguments before a run is stored."""

from __future__ import annotations

import re

from pydantic import JsonValue

# API keys in the shapes providers hand out: sk-..., sk-live-..., rk_live_..., pk_test_...
_API_KEY = re.compile(r"\b(?:sk|rk|pk)[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-+/=]{8,}")
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")

SECRET_MASK = "[secret]"
EMAIL_MASK = "[email]"


def scrub_text(text: str) -> str:
    """Replace API keys, bearer tokens and e-mail addresses in ``text``."""
    text = _API_KEY.sub(SECRET_MASK, text)
    text = _BEARER.sub(SECRET_MASK, text)
    return _EMAIL.sub(EMAIL_MASK, text)


def scrub(value: JsonValue) -> JsonValue:
    """Scrub every string inside a JSON value (dict keys are left as they are)."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {key: scrub(item) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value
