"""A custom codec's text on the backings that take any text (memory, SQLite, Redis): what no
store can keep (a lone surrogate has no UTF-8 encoding) is refused before any I/O, with
nothing stored changed; anything else is kept as written. PostgreSQL, which needs a JSON
codec, is covered in tests/integration/postgres/test_workflows.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from durably.errors import InvalidInputError
from durably.memory import MemoryCheckpointer, MemoryDurable, MemoryScheduler
from durably.redis import RedisCheckpointer
from durably.sqlite import SqliteCheckpointer, SqliteDurable, SqliteScheduler, connect
from tests.redis_service import connect as connect_redis
from tests.redis_service import drop_namespaces, unique_namespace

LONG = 300.0


class Verbatim:
    """A codec that is not JSON: a string is stored as written."""

    def encode(self, value: object) -> object:
        return value if isinstance(value, str | bytes) else repr(value)

    def decode(self, text: str) -> object:
        return text


Write = Callable[[str], Awaitable[object]]


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A checkpointer with the `Verbatim` codec, and the backing's `Durable` over it where
    it has one of its own (its arrive and deliver are written through it too)."""
    if request.param == "memory":
        memory = MemoryCheckpointer(Verbatim())  # type: ignore[arg-type]
        yield memory, MemoryDurable(memory, MemoryScheduler())
    elif request.param == "sqlite":
        database = await connect(tmp_path / "codec.db")
        sqlite = SqliteCheckpointer(database, codec=Verbatim())  # type: ignore[arg-type]
        yield sqlite, SqliteDurable(sqlite, SqliteScheduler(database, lease=LONG))
        await database.close()
    else:
        client = await connect_redis("standalone")
        ns = unique_namespace()
        try:
            yield RedisCheckpointer(client, codec=Verbatim(), key_prefix=ns), None  # type: ignore[arg-type]
        finally:
            await drop_namespaces(client, [ns])
            await client.aclose()


def writes(cp: Any, durable: Any, holder: Any) -> list[Write]:
    found: list[Write] = [
        lambda text: cp.record(holder, "step", text),
        lambda text: cp.supply("wf", "input", text),
        lambda text: cp.append("wf", text),
    ]
    if durable is not None:
        found += [
            lambda text: durable.arrive("wf", "input", text),
            lambda text: durable.deliver("wf", text),
        ]
    return found


@pytest.mark.parametrize("text", ["a\ud800b", "\udfff", "\udbff\udfff"])
async def test_a_custom_codecs_text_with_a_lone_surrogate_is_refused_and_nothing_changes(
    stores: Any, text: str
) -> None:
    cp, durable = stores
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    await cp.record(holder, "kept", "v")
    for write in writes(cp, durable, holder):
        with pytest.raises(InvalidInputError, match="value must be valid Unicode"):
            await write(text)
    assert await cp.load("wf") == {"kept": "v"}


async def test_a_custom_codecs_text_is_otherwise_kept_as_written(stores: Any) -> None:
    # A NUL is text these backings store (only PostgreSQL's jsonb refuses it, and it takes
    # JSON codecs only), and so is a character above U+FFFF.
    cp, _ = stores
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    for key, text in (("nul", "a\x00b"), ("astral", "🚀 \\ud800"), ("json", '{"k":1}')):
        recorded = await cp.record(holder, key, text)
        assert (recorded.value, recorded.first) == (text, True)
    assert await cp.load("wf") == {"nul": "a\x00b", "astral": "🚀 \\ud800", "json": '{"k":1}'}


async def test_a_codec_that_returns_no_text_is_refused_by_name(stores: Any) -> None:
    cp, _ = stores
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    with pytest.raises(InvalidInputError, match=r"Verbatim\.encode must return text, got bytes"):
        await cp.record(holder, "step", b"raw")
    assert await cp.load("wf") == {}
