"""What scrubbing masks, what it leaves, and that it stays linear on hostile text."""

from __future__ import annotations

import base64
import random
import string
import time

import pytest
from pydantic import JsonValue

from durably.errors import InvalidInputError, StatePersistenceError
from durably.redaction import (
    EMAIL_MASK,
    MAX_ERROR_CHARS,
    SECRET_MASK,
    TRUNCATED_MARKER,
    mend_text,
    scrub,
    scrub_text,
    secret_name,
)
from durably.stores.codec import JsonCodec
from durably.stores.runs import RunRecord, ToolCall, stored_run

_PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n"

# (text holding a secret, the secret that must be gone)
MASKED = [
    ("AWS key id AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    ("temp ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
    (
        "aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI/K7MDENG"),
    ("gh ghp_16C7e42F292c6912E7710c838347Ae178B4a ok", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11ABCDEFG0123456789_abcd"),
    ("gitlab glpat-xxxxxxxxxxxxxxxxxxxx1234", "glpat-xxxxxxxxxxxxxxxxxxxx1234"),
    ("slack xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl"),
    ("slack xoxp-1-2-3-abcdef123456", "xoxp-1-2-3-abcdef123456"),
    ("google AIzaSyA-1234567890abcdefghijklmnopqrstu", "AIzaSyA-1234567890abcdefghijklmnopqrstu"),
    ("openai sk-proj-abcdef1234567890", "sk-proj-abcdef1234567890"),
    ("stripe rk_live_abcdef12345678", "rk_live_abcdef12345678"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-nature_x end",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-nature_x",
    ),
    ("Authorization: Bearer abc.def.ghi-123", "abc.def.ghi-123"),
    ("header bearer abcdefgh12345678", "abcdefgh12345678"),
    ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
    ("curl -H 'Basic dXNlcjpodW50ZXIy'", "dXNlcjpodW50ZXIy"),
    ("x-api-key: k3y-value-9", "k3y-value-9"),
    ("X-Api-Key=AbC123", "AbC123"),
    ("password=hunter2", "hunter2"),
    ("db passwd: s3cr3t!", "s3cr3t!"),
    ('{"client_secret": "shh-123"}', "shh-123"),
    ("accessToken=tok_abc", "tok_abc"),
    ("api_key = 12345", "12345"),
    ("postgresql://app:hunter2@db.internal/app", "hunter2"),
    (f"-----BEGIN PRIVATE KEY-----\n{_PEM_BODY}-----END PRIVATE KEY-----", _PEM_BODY.strip()),
    (f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}", "BKcwggSjAgEAAoIBAQC7"),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    ("mail ada.l+x@example.co.uk please", "ada.l+x@example.co.uk"),
    ("end.with.dot bob@example.com.", "bob@example.com"),
]

# Text that must come back unchanged.
KEPT = [
    "skill-level",
    "task-force",
    "hello world",
    "price: 100%",
    "max_tokens=100",
    "Basic configuration of the basic plan",
    "the token is valid",  # no separator after the word
    "sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709",  # hex: no capitals
    "https://example.com/path?q=1",
    "user@localhost",  # no dot in the domain
    "-----BEGIN PUBLIC KEY-----",
    "git sha 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "eyJ alone is not a token",
    "AKIA-short",
]


@pytest.mark.parametrize(("text", "secret"), MASKED)
def test_each_kind_of_secret_is_masked(text: str, secret: str) -> None:
    scrubbed = scrub_text(text)
    assert secret not in scrubbed
    assert SECRET_MASK in scrubbed or EMAIL_MASK in scrubbed


@pytest.mark.parametrize("text", KEPT)
def test_text_without_a_secret_is_left_as_it_is(text: str) -> None:
    assert scrub_text(text) == text


def test_the_name_before_a_secret_value_is_kept() -> None:
    assert scrub_text("x-api-key: abc123") == f"x-api-key: {SECRET_MASK}"
    assert scrub_text("https://ada:pw@host/db") == f"https://ada:{SECRET_MASK}@host/db"


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "Password",
        "db_passwd",
        "client_secret",
        "accessToken",
        "api_key",
        "apiKey",
        "X-Api-Key",
        "private_key",
        "aws_secret_access_key",
        "credentials",
        "Authorization",
        "pwd",
        "passphrase",
    ],
)
def test_values_under_secret_like_keys_are_masked_whole(name: str) -> None:
    value: JsonValue = {name: "anything at all", "nested": {name: ["a", 2, None]}}
    assert secret_name(name)
    assert scrub(value) == {name: SECRET_MASK, "nested": {name: [SECRET_MASK, 2, None]}}


@pytest.mark.parametrize("name", ["max_tokens", "tokenizer", "keyboard", "user", "secretary"])
def test_values_under_ordinary_keys_are_only_scrubbed(name: str) -> None:
    assert not secret_name(name)
    assert scrub({name: "plain", "n": 1}) == {name: "plain", "n": 1}


_MIB = 1 << 20
_RANDOM = random.Random(15)


def _random_text(alphabet: str) -> str:
    return "".join(_RANDOM.choices(alphabet, k=_MIB))


HOSTILE = {
    "a": "a" * _MIB,
    "hex": _random_text(string.hexdigits.lower()),
    "base64url": _random_text(string.ascii_letters + string.digits + "-_"),
    "base64": base64.b64encode(_RANDOM.randbytes(_MIB * 3 // 4)).decode(),
    "dots": "a." * (_MIB // 2),
    "ats": "a@" * (_MIB // 2),
    "dots and ats": "a.a@" * (_MIB // 4),
    "almost mail": "a@b." * (_MIB // 4),
    "key prefixes": "sk-ghp_xoxb-AKIA" * (_MIB // 16),
    "jwt starts": "eyJa." * (_MIB // 5),
    "secret names": "password " * (_MIB // 9),
    "quoted names": '"password"' * (_MIB // 10),
    "name then blanks": "password" + " " * _MIB,
    "separators": "token: " * (_MIB // 7),
    "url starts": "://a:" * (_MIB // 5),
    "pem starts": "-----BEGIN PRIVATE KEY-----" * (_MIB // 27),
    "bearer": "Bearer " * (_MIB // 7),
    "basic": "Basic " * (_MIB // 6),
    "aws": "aws Aa1" * (_MIB // 7),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_mebibyte_of_hostile_text_is_scrubbed_in_linear_time(name: str) -> None:
    # A pattern that backtracks quadratically takes minutes here (seconds at 48 KB before);
    # linear scrubbing takes a fraction of a second, with room for a loaded machine.
    started = time.perf_counter()
    scrub({"argument": HOSTILE[name]})
    assert time.perf_counter() - started < 2.5


def test_failure_text_past_the_limit_is_cut_with_a_marker() -> None:
    mended = mend_text("x" * (MAX_ERROR_CHARS * 4), "error")
    assert len(mended) == MAX_ERROR_CHARS
    assert mended.endswith(TRUNCATED_MARKER)
    assert mend_text("short", "error") == "short"


def test_arguments_over_the_size_limit_are_refused_before_they_are_scrubbed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def never(value: JsonValue) -> JsonValue:
        raise AssertionError("scrubbed text that could not be stored")

    monkeypatch.setattr("durably.stores.runs.scrub", never)
    call = ToolCall(id="c", name="n", arguments={"blob": "a" * 2048})
    run = RunRecord(run_id="r", tenant="t", agent_name="a", pending_tool_calls=(call,))
    with pytest.raises(StatePersistenceError) as caught:
        stored_run(run, version=1, updated_at=0.0, max_bytes=1024, store="sqlite")
    assert caught.value.reason == "too_large"


def test_a_step_value_too_deep_to_encode_is_refused_as_bad_input() -> None:
    value: list[object] = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(InvalidInputError, match="deep"):
        JsonCodec().encode(value)
