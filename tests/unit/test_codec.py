"""`JsonCodec`: deterministic text, round trips, and values it refuses; `screened_encode`."""

from __future__ import annotations

import math

import pytest

from durably.errors import InvalidInputError
from durably.stores import CheckpointCodec, JsonCodec
from durably.stores.codec import _number_may_start, screened_encode, without_negative_zero


def test_equal_values_encode_to_equal_text_whatever_their_key_order() -> None:
    codec = JsonCodec()
    one = {"b": [1, {"z": None, "a": True}], "a": "é 🚀", "c": 2.5}
    other = {"c": 2.5, "a": "é 🚀", "b": [1, {"a": True, "z": None}]}
    assert codec.encode(one) == codec.encode(other)
    assert codec.encode(one) == codec.encode(codec.decode(codec.encode(one)))


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -7, 2.5, "", 'quo"te {x}; 100%', [1, [None]], {"k": {"n": [False]}}],
)
def test_every_json_value_round_trips(value: object) -> None:
    codec = JsonCodec()
    assert codec.decode(codec.encode(value)) == value


def test_a_tuple_comes_back_as_a_list() -> None:
    codec = JsonCodec()
    assert codec.decode(codec.encode((1, "two"))) == [1, "two"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, [1, math.nan], {"x": math.inf}])
def test_nan_and_infinity_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        JsonCodec().encode(bad)


def test_a_value_json_cannot_hold_is_refused() -> None:
    with pytest.raises(TypeError):
        JsonCodec().encode({"when": object()})


def test_the_json_codec_satisfies_the_codec_protocol() -> None:
    assert isinstance(JsonCodec(), CheckpointCodec)


@pytest.mark.parametrize("value", ["🚀", {"rocket 🚀": ["𝄞 clef", "é"]}, "\\ud83d\\ude80 as text"])
def test_characters_above_the_basic_plane_round_trip_exactly(value: object) -> None:
    codec = JsonCodec()
    assert codec.decode(codec.encode(value)) == value


@pytest.mark.parametrize("bad", ["\ud83d\ude80", {"k": ["x", "\ud83d\ude80"]}, {"\ud83d\ude80": 1}])
def test_surrogate_code_points_that_would_come_back_as_one_character_are_refused(
    bad: object,
) -> None:
    # Two surrogate code points escape exactly as a real 🚀 does, and decode as one.
    with pytest.raises(InvalidInputError, match="surrogate"):
        JsonCodec().encode(bad)


class _Text:
    """A codec of its own: strings as written."""

    def __init__(self, renders_json: bool) -> None:
        self.renders_json = renders_json

    def encode(self, value: object) -> str:
        return str(value)

    def decode(self, text: str) -> object:
        return text


def test_screened_encode_leaves_json_codec_as_it_is() -> None:
    codec = JsonCodec()
    assert screened_encode(codec) == codec.encode


def test_screened_encode_holds_a_json_codecs_text_to_what_jsonb_keeps() -> None:
    encode = screened_encode(_Text(renders_json=True))
    assert encode('"ok"') == '"ok"'
    for text in (r'"a\u0000"', r'"\ud800"', "a\x00", "\ud800"):
        with pytest.raises(InvalidInputError, match="value must"):
            encode(text)


def test_screened_encode_holds_other_text_to_valid_unicode_only() -> None:
    encode = screened_encode(_Text(renders_json=False))
    assert encode("a\x00 \\u0000 🚀") == "a\x00 \\u0000 🚀"
    with pytest.raises(InvalidInputError, match="value must be valid Unicode"):
        encode("a\udc80")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-0.0", "0.0"),
        ('{"a":-0.0}', '{"a":0.0}'),
        ("[1,-0,-0e3]", "[1,0,0e3]"),
        ('{"a": \n\t-0.0}', '{"a": \n\t0.0}'),
        ("[ -0.0 ]", "[ 0.0 ]"),
        ('["a:-0",-0.0]', '["a:-0",0.0]'),
        ('{"at":"2026-01-05","id":"0b1c-0a2f"}', '{"at":"2026-01-05","id":"0b1c-0a2f"}'),
        ("[1e-05,-0.5,-05]", "[1e-05,-0.5,-05]"),
        ('["x-0"]', '["x-0"]'),
    ],
)
def test_negative_zeros_are_written_as_zero_and_nothing_else_changes(
    text: str, expected: str
) -> None:
    assert without_negative_zero(text) == expected


def test_a_negative_zero_after_many_dashes_in_strings_is_still_found() -> None:
    # Many "-0"s inside strings, then one real negative zero after them.
    dates = ",".join(f'"2026-0{n % 9 + 1}-0{n % 9 + 1}"' for n in range(40))
    assert without_negative_zero(f"[{dates},-0.0]") == f"[{dates},0.0]"
    assert without_negative_zero(f"[{dates}]") == f"[{dates}]"


def test_only_texts_with_a_number_sign_where_a_value_begins_are_rescanned() -> None:
    assert not _number_may_start('{"at":"2026-01-05","id":"0b1c-0a2f"}')
    assert not _number_may_start("[1e-05]")
    assert _number_may_start('["a:-0"]')  # a string that looks like one: rescanned
    assert _number_may_start("-0")
    assert _number_may_start('{"a": -0}')


def test_json_codec_writes_a_negative_zero_beside_dates_as_zero() -> None:
    value = {"at": "2026-01-05", "ids": ["0b1c-0a2f"] * 20, "z": -0.0}
    text = JsonCodec().encode(value)
    assert "-0.0" not in text
    decoded = JsonCodec().decode(text)
    assert isinstance(decoded, dict)
    assert math.copysign(1.0, decoded["z"]) == 1.0
    assert decoded["at"] == "2026-01-05"
    assert decoded["ids"] == ["0b1c-0a2f"] * 20
