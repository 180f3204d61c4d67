"""The plain-JSON fast path of `Value` gives exactly what the pydantic adapter gives."""

from __future__ import annotations

from typing import Any

import pytest

from durably.app._values import Value


class Name(str):
    pass


CASES: list[tuple[Any, object]] = [
    (int, 3),
    (int, True),
    (str, Name("x")),
    (dict[str, int], {"n": 1, "tokens": 128}),
    (dict[str, int], {"n": True}),
    (dict[str, int], {"n": "7"}),
    (list[str], ["a", Name("b")]),
    (list[dict[str, list[int]]], [{"a": [1, 2]}, {}]),
    (dict[str, bool | None], {"a": None}),
    (None, None),
]


@pytest.mark.parametrize(("annotation", "value"), CASES)
def test_a_plain_json_value_encodes_and_decodes_as_its_adapter_would(
    annotation: Any, value: object
) -> None:
    typed = Value.of(annotation, "test")
    adapter = typed.adapter
    expected = adapter.dump_python(adapter.validate_python(value), mode="json")
    encoded = typed.encode(value)
    assert encoded == expected
    assert type(encoded) is type(expected)
    decoded = typed.decode(encoded)
    assert decoded == adapter.validate_python(encoded)
    assert type(decoded) is type(adapter.validate_python(encoded))


def test_a_value_of_the_wrong_shape_is_refused_as_before() -> None:
    typed = Value.of(dict[str, int], "test")
    with pytest.raises(ValueError):
        typed.encode({"n": "not a number"})
    with pytest.raises(ValueError):
        typed.decode([1])
