"""`payload_text`: the one rendering of a work item's payload, and what it refuses."""

from __future__ import annotations

import json

import pytest

from durably.errors import InvalidInputError
from durably.stores.work import payload_text

COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"n": "1"},
        {'quote"d': 'back\\slash "and" quotes', "": ""},
        {"lines": "one\ntwo\tthree\r\x01\x1f\x7f"},
        {"emoji 🚀": "é, ß, 中文, 🚀", "z": "a", "a": "z"},
        {"looks like an escape": "\\u0000 is six characters here"},
    ],
)
def test_it_is_the_compact_json_of_the_payload_in_its_order(payload: dict[str, str]) -> None:
    text = payload_text(payload)
    assert text == COMPACT(payload)
    assert json.loads(text) == payload


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"k": "nul\x00inside"}, "NUL"),
        ({"nul\x00key": "v"}, "NUL"),
        ({"k": "lone \ud800 surrogate"}, "surrogate"),
        ({"\udfff": "v"}, "surrogate"),
        ({"k": 1}, "strings"),
        ({1: "v"}, "strings"),
        ({"k": None}, "strings"),
    ],
)
def test_what_no_backing_could_store_is_refused(payload: dict[str, str], says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        payload_text(payload)
