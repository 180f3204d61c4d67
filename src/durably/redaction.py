"""What text becomes before it is stored: secrets in tool-call arguments masked, and
diagnostic text (failure messages) mended and bounded so that every backing can store it.

Every scrubbing pattern runs in time linear in its text, however hostile: each one starts
only where no character of its own token class precedes (a lookbehind that fails at once
inside a run), and its repeated parts are possessive or bounded, so no start rescans what
an earlier start read. docs/concepts.md ("What scrubbing masks") lists what is and is not
masked.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable

from pydantic import JsonValue

from durably.errors import InvalidInputError

SECRET_MASK = "[secret]"
EMAIL_MASK = "[email]"

# Names whose values are secrets, as a dict key (`secret_name`) or as ``name=value`` /
# ``name: value`` in text. A name counts if it *ends* with one of these (any case), so
# ``client_secret``, ``accessToken`` and ``X-Api-Key`` count and ``max_tokens`` does not.
_SECRET_WORDS = (
    r"password|passwd|passphrase|pwd|secret|secret[_-]?key|secret[_-]?access[_-]?key"
    r"|token|api[_-]?key|private[_-]?key|credentials?|authorization"
)
# The same words for a scan: a plain first-letter class lets the engine skip ahead in C, and
# the rest is read after a lookbehind on that letter (any case).
_SECRET_WORD_SCAN = (
    r"[PpSsTtAaCc](?i:(?<=p)(?:assword|asswd|assphrase|wd|rivate[_-]?key)"
    r"|(?<=s)ecret(?:[_-]?access)?(?:[_-]?key)?|(?<=t)oken|(?<=a)(?:pi[_-]?key|uthorization)"
    r"|(?<=c)redentials?)"
)
_NAME_TAIL = re.compile(rf"(?i)(?:{_SECRET_WORDS})\Z")
_NAME_TAIL_CHARS = 24  # longer than any word above: only a key's tail is looked at

_VALUE = r"(?:(?:bearer|basic|token|digest)[ \t]++)?[^\s\"'&,;]++"


def _masked_after_group(match: re.Match[str]) -> str:
    return match.group(1) + SECRET_MASK


def _masked_credentials(match: re.Match[str]) -> str:
    # "Basic" starts ordinary prose too: mask only base64 that decodes to user:password.
    try:
        decoded = base64.b64decode(match.group(1), validate=True)
    except ValueError:
        return match.group(0)
    return SECRET_MASK if b":" in decoded else match.group(0)


def _mask(mask: str) -> Callable[[re.Match[str]], str]:
    return lambda match: mask


# Each pattern, what becomes of its match, and the text (lower case) without which it
# cannot match: a pattern runs only over text holding one of these, which an ``in`` finds
# at memory speed. Applied in this order.
_PATTERNS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str], tuple[str, ...]], ...] = (
    # PEM and OpenSSH private keys: the BEGIN line and the body up to the next "-" (the END
    # line, if any). A truncated key is masked as well.
    (
        re.compile(
            r"-----BEGIN (?:RSA |DSA |EC |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----"
            r"[A-Za-z0-9+/=\s:,.\\]*+"
            r"(?:-----END (?:RSA |DSA |EC |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----)?"
        ),
        _mask(SECRET_MASK),
        ("private key",),
    ),
    # JSON web tokens: three base64url parts, the first two JSON objects ("eyJ"). The
    # lookbehind after the first letter keeps a start from inside a longer run.
    (
        re.compile(
            r"e(?<![A-Za-z0-9_\-.]e)yJ[A-Za-z0-9_\-]*+\.eyJ[A-Za-z0-9_\-]*+\.[A-Za-z0-9_\-]*+"
        ),
        _mask(SECRET_MASK),
        ("eyj",),
    ),
    # Provider API keys: OpenAI/Anthropic/Stripe style, GitHub, GitLab, Slack, Google, AWS
    # access key ids.
    (
        re.compile(
            r"[srpgxA](?<![A-Za-z0-9_\-].)(?:"
            r"(?<=[srp])k[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9_\-]{8,}+"
            r"|(?<=g)h[pousr]_[A-Za-z0-9]{20,}+"
            r"|(?<=g)ithub_pat_[A-Za-z0-9_]{20,}+"
            r"|(?<=g)lpat-[A-Za-z0-9_\-]{20,}+"
            r"|(?<=x)ox[abposre]-[A-Za-z0-9\-]{10,}+"
            r"|(?<=A)Iza[A-Za-z0-9_\-]{30,}+"
            r"|(?<=A)(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|IPA|NPA|NVA|PKA)[A-Z0-9]{16}(?![A-Za-z0-9])"
            r")"
        ),
        _mask(SECRET_MASK),
        ("sk", "rk", "pk", "gh", "github_pat_", "glpat-", "xox", "aiza", "a"),
    ),
    # An AWS secret access key on its own, in text that names AWS: exactly 40 characters of
    # base64 with upper and lower case letters and a digit, not part of a longer run (a hex
    # digest has no capitals).
    (
        re.compile(
            r"(?<![A-Za-z0-9+/=])(?=[A-Za-z0-9+/]{0,39}[A-Z])(?=[A-Za-z0-9+/]{0,39}[a-z])"
            r"(?=[A-Za-z0-9+/]{0,39}[0-9])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=])"
        ),
        _mask(SECRET_MASK),
        ("aws",),
    ),
    # name=value, name: value, "name": "value" for a secret-like name (x-api-key, password,
    # client_secret, Authorization, ...): the name stays, the value is masked. The match
    # starts at the secret word, so whatever precedes it in the name is kept as it is.
    (
        re.compile(
            rf"({_SECRET_WORD_SCAN}[\"']?[ \t]{{0,8}}+[:=][ \t]{{0,8}}+[\"']?)(?i:{_VALUE})"
        ),
        _masked_after_group,
        ("pass", "pwd", "secret", "token", "key", "credential", "authorization"),
    ),
    # Bearer tokens, and Basic credentials (base64 of user:password), wherever they stand.
    (
        re.compile(r"(?i)b(?<![A-Za-z0-9_\-]b)earer[ \t]++[A-Za-z0-9._\-+/=~]{8,}+"),
        _mask(SECRET_MASK),
        ("bearer",),
    ),
    (
        re.compile(
            r"B(?<![A-Za-z0-9_\-]B)asic[ \t]++"
            r"((?:[A-Za-z0-9+/]{4})++(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?+)"
            r"(?![A-Za-z0-9+/=])"
        ),
        _masked_credentials,
        ("basic",),
    ),
    # Credentials in a URL: scheme://user:password@host keeps the user, masks the password.
    (re.compile(r"(://[^/\s:@]{0,256}+:)[^/\s@]++(?=@)"), _masked_after_group, ("://",)),
    # E-mail addresses: the local part starts where no local-part character precedes it.
    (
        re.compile(
            r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]++@"
            r"(?:[A-Za-z0-9\-]++\.)+[A-Za-z]{2,}+(?![A-Za-z0-9\-])"
        ),
        _mask(EMAIL_MASK),
        ("@",),
    ),
)


def scrub_text(text: str) -> str:
    """``text`` with the secrets docs/concepts.md lists masked (`SECRET_MASK`) and e-mail
    addresses redacted (`EMAIL_MASK`), in time linear in its length."""
    lowered = text.lower()
    for pattern, replace, needs in _PATTERNS:
        if any(literal in lowered for literal in needs):
            text = pattern.sub(replace, text)
    return text


def secret_name(name: str) -> bool:
    """Whether a value under ``name`` is a secret: the name ends, in any case, with
    password, passwd, passphrase, pwd, secret, secret_key, secret_access_key, token,
    api_key, private_key, credential(s) or authorization."""
    return _NAME_TAIL.search(name[-_NAME_TAIL_CHARS:]) is not None


def scrub(value: JsonValue) -> JsonValue:
    """Scrub every string inside a JSON value: each string under a secret-like key
    (`secret_name`) is masked whole, every other string is scrubbed (`scrub_text`). Dict
    keys, numbers, booleans and nulls are left as they are."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {
            key: _masked(item) if secret_name(key) else scrub(item) for key, item in value.items()
        }
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value


def _masked(value: JsonValue) -> JsonValue:
    if isinstance(value, str):
        return SECRET_MASK
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value


# What no backing stores: NUL (PostgreSQL's text refuses it) and surrogate code points
# (a str holds them, UTF-8 cannot encode them).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"

MAX_ERROR_CHARS = 65_536
"""The most characters of failure text a store keeps (a work item's ``fail(error=...)``, a
workflow status's error); longer text keeps its head and ends with `TRUNCATED_MARKER`."""
TRUNCATED_MARKER = "…[truncated]"


def mend_text(text: object, name: str) -> str:
    """``text`` with its secrets masked (`scrub_text`: an exception's message may quote a
    password or a token, and failure text reaches logs, errors and dashboards), every NUL
    and lone surrogate replaced by U+FFFD, so that every backing stores it alike, and cut
    to `MAX_ERROR_CHARS` (ending with `TRUNCATED_MARKER`) when longer. For diagnostic
    text, such as an exception's repr, that must be kept rather than refused (refusing a
    failure report would leave its work unsettled): a workflow status's error, a work
    item's failure, a step's recorded error. Raises `InvalidInputError` naming ``name``,
    before any I/O, for a value that is not a string at all."""
    if not isinstance(text, str):
        raise InvalidInputError(f"{name} must be a string, got {type(text).__name__}")
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - len(TRUNCATED_MARKER)] + TRUNCATED_MARKER
    text = scrub_text(text)
    if text.isascii():
        return text.replace("\x00", REPLACEMENT) if "\x00" in text else text
    return _UNSTORABLE.sub(REPLACEMENT, text)
