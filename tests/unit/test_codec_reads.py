"""Reading stored text back: `JsonCodec.decode` refuses what its ``encode`` never writes,
and `decoded` / `decoded_records` turn any refusal into an `UnreadableRecordError` naming
the workflow and the record, keeping the records that do read. Writing an int too long
for any reader is refused before I/O."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from durably.errors import (
    IncompatibleRecordError,
    InvalidInputError,
    UnreadableRecordError,
    WorkflowStopped,
)
from durably.memory import MemoryCheckpointer
from durably.stores.codec import JsonCodec, decoded, decoded_records
from durably.stores.workflows import Written, written_records
from durably.validation import INT_BOUND, MAX_INT_DIGITS

UNREADABLE: dict[str, str | bytes] = {
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "a 5,000-digit number": "1" * 5_000,
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity inside": '{"a": [-Infinity]}',
    "not JSON": "{not json",
    "empty": "",
    "not UTF-8": b'"\xff"',
}


@pytest.mark.parametrize("stored", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_text_no_encode_would_write_is_an_unreadable_record_naming_workflow_and_key(
    stored: str | bytes,
) -> None:
    with pytest.raises(UnreadableRecordError) as raised:
        decoded(JsonCodec(), "wf-1", "step#1", stored)
    error = raised.value
    assert (error.workflow, error.key) == ("wf-1", "step#1")
    assert "wf-1" in str(error)
    assert "step#1" in str(error)
    assert len(str(error)) < 800  # bounded, whatever was stored
    assert not error.retryable


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_codec_refuses_on_read_the_constants_it_refuses_on_write(constant: str) -> None:
    with pytest.raises(ValueError, match=constant.lstrip("-")):
        JsonCodec().decode(f"[1, {constant}]")


def test_an_unreadable_record_parks_a_workflow_as_an_incompatible_one_does() -> None:
    error = UnreadableRecordError("wf", {"k": "why"})
    assert isinstance(error, IncompatibleRecordError)
    assert isinstance(error, WorkflowStopped)
    assert error.status == "parked"


def test_decoded_records_name_every_unreadable_record_and_keep_the_others() -> None:
    rows: list[tuple[str | bytes, str | bytes]] = [
        ("a", "1"),
        ("b", "NaN"),
        ("c", '{"x": [2]}'),
        ("d", "{oops"),
    ]
    with pytest.raises(UnreadableRecordError) as raised:
        decoded_records(JsonCodec(), "wf", rows)
    error = raised.value
    assert error.key == "b"
    assert set(error.unreadable) == {"b", "d"}
    assert error.readable == {"a": 1, "c": {"x": [2]}}
    assert list(error.readable) == ["a", "c"]  # in their order


def test_a_key_that_is_not_utf8_is_named_escaped_and_the_rest_still_reads() -> None:
    rows: list[tuple[str | bytes, str | bytes]] = [(b"ok", b"1"), (b"\xffkey", b"2")]
    with pytest.raises(UnreadableRecordError) as raised:
        decoded_records(JsonCodec(), "wf", rows)
    assert raised.value.readable == {"ok": 1}
    assert list(raised.value.unreadable) == ["\\xffkey"]


def test_bytes_that_are_utf8_read_as_their_text() -> None:
    rows: list[tuple[str | bytes, str | bytes]] = [(b"k", '"é"'.encode())]
    assert decoded_records(JsonCodec(), "wf", rows) == {"k": "é"}


def test_a_history_around_an_unreadable_record_keeps_the_landing_times() -> None:
    from datetime import UTC, datetime

    at = datetime(2024, 1, 1, tzinfo=UTC)
    with pytest.raises(UnreadableRecordError) as raised:
        written_records(JsonCodec(), "wf", [("a", "1", at), ("b", "NaN", at)])
    assert raised.value.readable == {"a": Written(1, at)}


async def test_a_memory_checkpointer_reads_through_the_same_check() -> None:
    checkpointer = MemoryCheckpointer()
    await checkpointer.supply("wf", "good", {"n": 1})
    await checkpointer.supply("wf", "bad", 2)
    record = checkpointer._records["wf"]["bad"]
    # What nothing but damage writes:
    checkpointer._records["wf"]["bad"] = dataclasses.replace(record, encoded="NaN")
    with pytest.raises(UnreadableRecordError) as raised:
        await checkpointer.load("wf")
    assert raised.value.readable == {"good": {"n": 1}}
    with pytest.raises(UnreadableRecordError):
        await checkpointer.supply("wf", "bad", 2)  # a losing write reads the winner


def test_an_int_too_long_for_any_reader_is_refused_when_encoded() -> None:
    assert sys.get_int_max_str_digits() in (0, MAX_INT_DIGITS)
    with pytest.raises(InvalidInputError, match="digits"):
        JsonCodec().encode({"n": 10**5_000})
    assert JsonCodec().decode(JsonCodec().encode(INT_BOUND - 1)) == INT_BOUND - 1


@pytest.mark.parametrize("status", ["bogus", b"\xff", b"completed", "failed", None])
def test_an_append_unless_finished_refuses_only_a_status_known_to_be_finished(
    status: str | bytes | None,
) -> None:
    from durably.errors import WorkflowFinishedError
    from durably.stores.workflows import refuse_finished

    finished = status in (b"completed", "failed")
    if finished:
        with pytest.raises(WorkflowFinishedError):
            refuse_finished("wf", status)
    else:
        refuse_finished("wf", status)  # no such status: its next pass parks the workflow
