"""Text no backing can store (a NUL, a lone surrogate): the shared checks, the codec's and
the records' refusals, and what diagnostic text becomes instead."""

from __future__ import annotations

import json

import pytest

from durably.errors import InvalidInputError
from durably.redaction import mend_text
from durably.stores.codec import JsonCodec
from durably.stores.runs import (
    RunRecord,
    SessionRecord,
    ToolCall,
    checked_run,
    checked_session,
    stored_run,
    stored_session,
)
from durably.stores.status import WorkflowStatus, checked_report
from durably.validation import identifier, storable, storable_json

# Strings a Python str holds but UTF-8 cannot encode: surrogate code points, alone, in the
# wrong order, or even as a "pair" of two code points (a str holds the character itself).
LONE_SURROGATES = [
    "\ud800",
    "\udbff",
    "\udc00",
    "\udfff",
    "a\ud800b",
    "\udc00\ud800",
    "\ud83d\ude80",
]
VALID_TEXT = ["plain", "é", "中文", "🚀", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0010ffff"]


@pytest.mark.parametrize("bad", LONE_SURROGATES)
def test_identifier_refuses_a_lone_surrogate_by_name(bad: str) -> None:
    with pytest.raises(InvalidInputError, match=r"item_id must be valid Unicode \(no lone"):
        identifier(bad, "item_id")


@pytest.mark.parametrize("good", VALID_TEXT)
def test_identifier_accepts_any_valid_unicode(good: str) -> None:
    assert identifier(good, "item_id") is good


def test_storable_accepts_json_values_and_returns_them_unchanged() -> None:
    value = {"k": ["v", 1, 2.5, None, True, {"é": "🚀", "\\u0000": "\\ud800"}], "": ("t",)}
    assert storable(value, "metadata") is value
    assert storable(None, "user") is None


@pytest.mark.parametrize("bad", ["nul\x00inside", *LONE_SURROGATES])
def test_storable_refuses_nul_and_lone_surrogates_at_any_depth_keys_included(bad: str) -> None:
    says = "NUL" if "\x00" in bad else "lone surrogate"
    for value in (bad, [bad], ("ok", bad), {"k": bad}, {bad: 1}, {"a": [{"b": {bad: None}}]}):
        with pytest.raises(InvalidInputError, match=f"^metadata must .*{says}"):
            storable(value, "metadata")


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "\\u0000 and \\ud800 written out",
        "\\\\u0000",
        "back\\",
        "line\nbreak\ttab\x01\x1f",
        *VALID_TEXT,
        ["🚀", {"\U0010ffff": "\U00010000"}],
    ],
)
def test_storable_json_accepts_what_json_renders_of_valid_text(value: object) -> None:
    for ensure_ascii in (True, False):
        text = json.dumps(value, ensure_ascii=ensure_ascii)
        assert storable_json(text, "value") is text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (json.dumps("a\x00b"), "NUL"),
        (json.dumps({"\x00": 1}), "NUL"),
        ('"a\x00b"', "NUL"),  # raw, as no JSON encoder writes it
        (r'"\\\u0000"', "NUL"),  # an escaped backslash, then a real escape
        (json.dumps("\ud800"), "surrogate"),
        (r'"\udfff"', "surrogate"),
        (json.dumps("\udc00\ud800"), "surrogate"),  # low before high
        (json.dumps("\ud800x\udc00"), "surrogate"),  # not adjacent
        (json.dumps("\ud800\ud800\udc00"), "surrogate"),  # the first high is alone
        (r'"\uD800"', "surrogate"),  # upper case
        (r'"\ud83d\u0041"', "surrogate"),
        (r'"\ud83d\\udc00"', "surrogate"),  # the "low half" is a backslash and text
        (r'"\ud83d"', "surrogate"),  # at the end
        ('"\ud800"', "surrogate"),  # raw, as ensure_ascii=False renders it
        (json.dumps("\ud800", ensure_ascii=False), "surrogate"),
    ],
)
def test_storable_json_refuses_what_jsonb_cannot_hold(text: str, says: str) -> None:
    with pytest.raises(InvalidInputError, match=f"^value must .*{says}"):
        storable_json(text, "value")


def test_storable_json_reads_escaped_backslashes_in_pairs() -> None:
    assert storable_json(r'"\\u0000 \\\\u0000 \\ud800 \ud83d\ude80"', "value")
    with pytest.raises(InvalidInputError, match="NUL"):
        storable_json(r'"\\\\\u0000"', "value")  # two escaped backslashes, then NUL


def test_json_codec_refuses_what_no_backing_can_store_as_a_value_error() -> None:
    codec = JsonCodec()
    for value in ("a\x00b", {"k": ["\ud800"]}, {"\udfff": 1}, ["\ud83d\ude80"[0]]):
        with pytest.raises(InvalidInputError, match=r"^value must") as refused:
            codec.encode(value)
        assert isinstance(refused.value, ValueError)  # the codec contract's error


def test_json_codec_keeps_its_encoding_and_round_trips_lookalikes() -> None:
    codec = JsonCodec()
    assert codec.encode({"b": 1, "a": "é🚀"}) == '{"a":"\\u00e9\\ud83d\\ude80","b":1}'
    lookalikes = ["\\u0000", "\\ud800", "\\", "🚀", "\U00010000", "\U0010ffff", "\ud7ff"]
    assert codec.decode(codec.encode(lookalikes)) == lookalikes


def _run(**fields: object) -> RunRecord:
    return RunRecord(run_id="r", tenant="t", agent_name="a").model_copy(update=fields)


@pytest.mark.parametrize("bad", ["nul\x00inside", "lone\ud800surrogate"])
def test_a_run_holding_unstorable_text_is_refused_naming_the_field(bad: str) -> None:
    cases: list[tuple[dict[str, object], str]] = [
        ({"metadata": {"k": {"deep": [bad]}}}, "metadata"),
        ({"metadata": {bad: 1}}, "metadata"),
        ({"awaiting_approval": bad}, "awaiting_approval"),
        ({"agent_name": bad}, "agent_name"),  # as model_construct could build it
        ({"pending_tool_calls": (ToolCall(id="c", name="n", arguments={"a": bad}),)}, "tool"),
        ({"pending_tool_calls": (ToolCall(id="c", name=bad),)}, "tool"),
        ({"pending_tool_calls": (ToolCall(id=bad, name="n"),)}, "tool"),
    ]
    for fields, name in cases:
        record = _run(**fields)
        with pytest.raises(InvalidInputError, match=name):
            checked_run(record)
        with pytest.raises(InvalidInputError, match=name):
            stored_run(record, version=1, updated_at=0.0)


@pytest.mark.parametrize("bad", ["nul\x00inside", "lone\ud800surrogate"])
def test_a_session_holding_unstorable_text_is_refused_naming_the_field(bad: str) -> None:
    session = SessionRecord(session_id="s", tenant="t")
    for fields, name in (
        ({"metadata": {"k": bad}}, "metadata"),
        ({"user": bad}, "user"),
        ({"runs": ("r", bad)}, "runs"),
        ({"tenant": bad}, "tenant"),
    ):
        record = session.model_copy(update=fields)
        with pytest.raises(InvalidInputError, match=name):
            checked_session(record)
        with pytest.raises(InvalidInputError, match=name):
            stored_session(record, version=1, updated_at=0.0)


def test_records_of_valid_unicode_are_stored_as_they_are() -> None:
    run = _run(metadata={"é": ["🚀", "\\u0000"]}, awaiting_approval="中文")
    assert checked_run(run) is run
    stored = stored_session(
        SessionRecord(session_id="s", tenant="t", user="🚀"), version=3, updated_at=2.0
    )
    assert (stored.version, stored.updated_at, stored.user) == (3, 2.0, "🚀")


@pytest.mark.parametrize(
    ("text", "mended"),
    [
        ("plain", "plain"),
        ("a\x00b\x00", "a\ufffdb\ufffd"),
        ("\ud800x\udfff", "\ufffdx\ufffd"),
        ("é \x00 \ud83d\ude80 🚀", "é \ufffd \ufffd\ufffd 🚀"),
        ("\\u0000 is text", "\\u0000 is text"),
    ],
)
def test_mend_text_replaces_nul_and_lone_surrogates_and_nothing_else(
    text: str, mended: str
) -> None:
    assert mend_text(text, "error") == mended
    mend_text(text, "error").encode()  # always valid UTF-8 now


def test_a_status_report_keeps_its_error_mended() -> None:
    assert checked_report("failed", 2, "boom\x00\ud800") == (
        WorkflowStatus.FAILED,
        "boom\ufffd\ufffd",
    )
    assert checked_report(WorkflowStatus.RUNNING, 0, None) == (WorkflowStatus.RUNNING, None)
    with pytest.raises(InvalidInputError):
        checked_report("lost", 0, "boom")


@pytest.mark.parametrize("bad", [5, b"bytes", ["list"]])
def test_a_failure_report_that_is_not_text_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="error must be a string"):
        mend_text(bad, "error")
    with pytest.raises(InvalidInputError, match="error must be a string"):
        checked_report("failed", 1, bad)  # type: ignore[arg-type]
    assert checked_report("failed", 1, None) == (WorkflowStatus.FAILED, None)
