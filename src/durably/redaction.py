"""What text becomes before it is stored: secrets in tool-call arguments masked, and
diagnostic text (failure messages) mended so that every backing can store it."""

from __future__ import annotations

import re

from pydantic import JsonValue

from durably.errors import InvalidInputError

# API keys in the shapes providers hand out: sk-..., sk-live-..., rk_live_..., pk_test_...
_API_KEY = re.compile(r"\b(?:sk|rk|pk)[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-+/=]{8,}")
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")

SECRET_MASK = "[secret]"
EMAIL_MASK = "[email]"

# What no backing stores: NUL (PostgreSQL's text refuses it) and surrogate code points
# (a str holds them, UTF-8 cannot encode them).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


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


def mend_text(text: object, name: str) -> str:
    """``text`` with every NUL and lone surrogate replaced by U+FFFD, so that every backing
    stores it alike. For diagnostic text, such as an exception's repr, that must be kept
    rather than refused (refusing a failure report would leave its work unsettled): a
    workflow status's error, a work item's failure. Raises `InvalidInputError` naming
    ``name``, before any I/O, for a value that is not a string at all."""
    if not isinstance(text, str):
        raise InvalidInputError(f"{name} must be a string, got {type(text).__name__}")
    if text.isascii():
        return text.replace("\x00", REPLACEMENT) if "\x00" in text else text
    return _UNSTORABLE.sub(REPLACEMENT, text)
