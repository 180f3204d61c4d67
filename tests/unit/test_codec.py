"""`JsonCodec`: deterministic text, round trips, and values it refuses; `screened_encode`."""

from __future__ import annotations

import math

import pytest

from durably import CheckpointCodec, JsonCodec
from durably.codec import screened_encode
from durably.errors import InvalidInputError


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
