"""Format 2 of recorded values: bytes as base64, sets sorted; format 1 records still read."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from durably.app._formats import BYTES_TAG, RecordedFrozenSet, RecordedSet
from durably.app._values import ANY, Signature, Value, digest

EVERY_BYTE = bytes(range(256))


class Attachment(TypedDict):
    name: str
    data: bytes


@dataclasses.dataclass
class Scan:
    pages: list[bytes]


def through_json(value: Value, data: object) -> Any:
    """``data`` stored and read back as a store would (JSON text), then decoded."""
    return value.decode(json.loads(json.dumps(data)))


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (bytes, EVERY_BYTE),
        (bytes | None, b"\x00"),
        (list[bytes], [EVERY_BYTE, b""]),
        (dict[str, bytes], {"digest": b"\xe2\x82"}),
        (tuple[bytes, int], (b"\xff", 3)),
        (Attachment, {"name": "scan.pdf", "data": b"%PDF\xe2"}),
        (Scan, Scan([b"\x80", b"\xff\xfe"])),
        (bytes | str, b"\xe2"),
    ],
)
def test_any_bytes_round_trip_wherever_the_annotation_places_them(
    annotation: Any, value: object
) -> None:
    typed = Value.of(annotation, "test")
    assert through_json(typed, typed.encode(value)) == value


def test_bytes_are_kept_as_tagged_standard_base64() -> None:
    assert Value.of(bytes, "test").encode(b"\xff\xfe") == {BYTES_TAG: "//4="}


def test_a_string_where_bytes_are_expected_is_read_as_the_utf8_text_of_format_1() -> None:
    assert Value.of(bytes, "test").decode("pdf é") == "pdf é".encode()
    assert Value.of(list[bytes], "test").decode(["a", {BYTES_TAG: "/w=="}]) == [b"a", b"\xff"]


@pytest.mark.parametrize("stored", [{BYTES_TAG: "not base64!"}, {BYTES_TAG: 7}])
def test_a_tag_that_holds_no_base64_is_a_misfit(stored: object) -> None:
    with pytest.raises(ValueError, match="base64"):
        Value.of(bytes, "test").decode(stored)


def test_a_union_with_str_keeps_bytes_and_text_apart() -> None:
    typed = Value.of(bytes | str, "test")
    assert through_json(typed, typed.encode(b"text")) == b"text"
    assert through_json(typed, typed.encode("text")) == "text"


def test_a_set_is_kept_sorted_by_each_items_json_and_iterates_in_that_order() -> None:
    typed = Value.of(set[str], "test")
    names = {"tony", "ada", "leslie", "grace"}
    assert typed.encode(names) == sorted(names)
    decoded = through_json(typed, typed.encode(names))
    assert isinstance(decoded, RecordedSet)
    assert decoded == names
    assert list(decoded) == sorted(names)


def test_a_decoded_set_keeps_the_order_its_record_lists_even_unsorted() -> None:
    decoded = Value.of(frozenset[str], "test").decode(["tony", "ada", "tony", "leslie"])
    assert isinstance(decoded, RecordedFrozenSet)
    assert list(decoded) == ["tony", "ada", "leslie"]
    assert decoded == frozenset({"ada", "tony", "leslie"})
    assert hash(decoded) == hash(frozenset({"ada", "tony", "leslie"}))


def test_items_added_to_a_decoded_set_come_after_the_recorded_ones_in_repr_order() -> None:
    decoded = Value.of(set[str], "test").decode(["b", "a", "c"])
    decoded.discard("a")
    decoded.update({"z", "y"})
    assert list(decoded) == ["b", "c", "y", "z"]


def test_a_decoded_set_copies_and_pickles_with_its_order() -> None:
    for decoded in (
        Value.of(set[str], "test").decode(["b", "a"]),
        Value.of(frozenset[str], "test").decode(["b", "a"]),
    ):
        for again in (
            copy.copy(decoded),
            copy.deepcopy(decoded),
            pickle.loads(pickle.dumps(decoded)),
        ):
            assert type(again) is type(decoded)
            assert list(again) == ["b", "a"]


def test_a_set_of_bytes_and_sets_inside_containers_are_sorted_too() -> None:
    typed = Value.of(dict[str, set[bytes]], "test")
    encoded = typed.encode({"k": {b"\xff", b"\x00"}})
    assert encoded == {"k": [{BYTES_TAG: "/w=="}, {BYTES_TAG: "AA=="}]}
    assert through_json(typed, encoded) == {"k": {b"\xff", b"\x00"}}


def test_set_constraints_still_hold_after_duplicates_are_removed() -> None:
    from typing import Annotated

    from pydantic import Field

    typed = Value.of(Annotated[set[str], Field(min_length=2)], "test")
    with pytest.raises(ValueError, match="at least 2"):
        typed.decode(["a", "a"])
    assert typed.decode(["a", "b"]) == {"a", "b"}


def test_a_value_of_no_declared_type_gets_its_bytes_and_sets_in_format_2() -> None:
    assert ANY.encode({"blob": b"\xff", "tags": {"b", "a"}, "n": [1]}) == {
        "blob": {BYTES_TAG: "/w=="},
        "tags": ["a", "b"],
        "n": [1],
    }


def test_a_type_without_bytes_or_sets_is_left_to_pydantic_alone() -> None:
    assert Value.of(dict[str, list[int]], "test").formatted is None
    assert Value.of(bytes, "test").formatted is not None


def test_a_models_own_config_decides_its_bytes() -> None:
    class Base64Model(BaseModel):
        model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")
        data: bytes

    typed = Value.of(Base64Model, "test")
    assert through_json(typed, typed.encode(Base64Model(data=EVERY_BYTE))).data == EVERY_BYTE


def test_a_step_record_of_format_1_matches_its_arguments_digest_of_then() -> None:
    async def echo(blob: bytes, n: int) -> bytes:
        return blob

    signature = Signature(echo, "step 'echo'")
    now = signature.digest_args((b"text", 1), {})
    then = signature.earlier_digest((b"text", 1), {})
    assert now != then
    assert then == digest({"blob": "text", "n": 1})  # how format 1 encoded the call
    assert signature.earlier_digest((b"\xff", 1), {}) is None  # format 1 could not


def test_a_signature_the_formats_agree_on_has_no_earlier_digest() -> None:
    async def plain(name: str, n: int) -> str:
        return name

    assert Signature(plain, "step 'plain'").earlier_digest(("a", 1), {}) is None
