"""The hand-written protocol packing writes exactly what redis-py's own packer writes for a
UTF-8 client (a script call and a plain command), and leaves to redis-py every argument
of another type."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection

from durably.redis.wire import bulk, packed_call, packed_command

ARGUMENTS: list[tuple[Any, ...]] = [
    (),
    ("key",),
    ("wf:{acme}:1", "é-ü", "", 0, -7, 12345678901234567890, 1.5, 1e-9, b"\x00\xff"),
]


def _redis_py(*args: Any) -> bytes:
    connection = Connection(encoding="utf-8")
    return b"".join(connection.pack_command(*args))


@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_a_plain_command_packs_as_redis_py_packs_it(arguments: tuple[Any, ...]) -> None:
    assert packed_command(("HMGET", *arguments)) == _redis_py("HMGET", *arguments)


@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_a_script_call_packs_as_redis_py_packs_it(arguments: tuple[Any, ...]) -> None:
    sha = "a" * 40
    head = bulk(b"EVALSHA") + bulk(sha.encode())
    expected = _redis_py("EVALSHA", sha, len(arguments), *arguments)
    assert packed_call(head, len(arguments), arguments) == expected


@pytest.mark.parametrize("odd", [True, None, 1 + 2j, ["list"], bytearray(b"x")])
def test_an_argument_of_another_type_is_left_to_redis_py(odd: object) -> None:
    assert packed_command(("SET", "key", odd)) is None
    assert packed_call(bulk(b"EVALSHA") + bulk(b"0" * 40), 1, ("key", odd)) is None
