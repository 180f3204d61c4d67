"""The App's failure record: its type, message and failing step kept beside its text, and
records of text alone (written before) still read."""

from __future__ import annotations

from durably.app import _layout as layout
from durably.errors import StepFailedError
from durably.redaction import MAX_ERROR_CHARS


def test_a_steps_failure_records_the_steps_own_error_and_its_key() -> None:
    error = StepFailedError("wf-1", "charge#2", "PaymentDeclined", "card declined")
    assert layout.failure(error) == {
        "error": repr(error),
        "type": "PaymentDeclined",
        "message": "card declined",
        "step": "charge#2",
    }


def test_a_bodys_own_failure_records_its_type_and_no_step() -> None:
    record = layout.failure(KeyError("ticket"))
    assert (record["type"], record["message"], record["step"]) == ("KeyError", "'ticket'", None)


def test_a_long_failure_is_bounded_like_any_failure_text() -> None:
    record = layout.failure(ValueError("x" * (MAX_ERROR_CHARS * 2)))
    assert len(str(record["message"])) <= MAX_ERROR_CHARS
    assert len(str(record["error"])) <= MAX_ERROR_CHARS


def test_an_ending_gives_the_details_its_record_keeps_or_none() -> None:
    new = {"durably:failed#1": layout.failure(ValueError("boom"))}
    ended = layout.ending(new)
    assert ended is not None
    assert ended["e"] == "ValueError('boom')"
    assert layout.failure_details(ended) == {"type": "ValueError", "message": "boom", "step": None}
    old = layout.ending({"durably:failed#1": "ValueError('boom')"})
    assert old == {"e": "ValueError('boom')"}
    assert layout.failure_details(old) == {"type": None, "message": None, "step": None}
