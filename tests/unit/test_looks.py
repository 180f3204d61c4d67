"""The status and the result in one read (`Looking.look`, `look_at`), and the handle's use of
it: an awaited handle reads its workflow's end in one store call."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import durably
from durably.claimcheck.wrappers import ClaimCheckedCheckpointer
from durably.memory import MemoryCheckpointer
from durably.postgres import PostgresCheckpointer
from durably.redis import RedisCheckpointer
from durably.sqlite import SqliteCheckpointer
from durably.stores.workflows import Looking, look_at


class Reads:
    """The reads made through a real `MemoryCheckpointer`, by method name."""

    NAMES = ("look", "get_status", "peek", "load", "history")

    def __init__(self, checkpointer: Any) -> None:
        self.calls: list[str] = []
        for name in self.NAMES:
            setattr(checkpointer, name, self._spy(name, getattr(checkpointer, name)))

    def _spy(self, name: str, read: Any) -> Any:
        async def spied(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return await read(*args, **kwargs)

        return spied


class WithoutLook:
    """A checkpointer with no ``look``: every other method of ``inner``."""

    def __init__(self, inner: MemoryCheckpointer) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "look":
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_every_shipped_checkpointer_can_look() -> None:
    # The conformance cases skip a checkpointer without look: none shipped may lack it.
    for shipped in (
        MemoryCheckpointer,
        SqliteCheckpointer,
        PostgresCheckpointer,
        RedisCheckpointer,
        ClaimCheckedCheckpointer,
    ):
        assert callable(getattr(shipped, "look", None)), shipped
    assert isinstance(MemoryCheckpointer(), Looking)
    assert not isinstance(WithoutLook(MemoryCheckpointer()), Looking)


async def test_looking_without_look_reads_the_status_before_the_records() -> None:
    inner = MemoryCheckpointer()
    holder = await inner.claim("wf", 30.0, 30.0)
    assert holder is not None
    ended = await inner.finish(holder, "result", "done")
    reads = Reads(inner)
    assert await look_at(WithoutLook(inner), "wf", ["result"]) == (ended, {"result": "done"})
    # The status first: a result written with the status read is in the records after it.
    assert reads.calls == ["get_status", "peek"]
    reads.calls.clear()
    assert await look_at(inner, "wf", ["result"]) == (ended, {"result": "done"})
    assert reads.calls == ["look"]


@contextlib.asynccontextmanager
async def ended() -> AsyncIterator[tuple[durably.WorkflowHandle[int], Reads]]:
    """A handle of a one-step workflow that completed, and the reads made from here on."""
    async with durably.App("memory://") as app:

        @app.workflow(name="one")
        async def one(ctx: durably.Context) -> int:
            return 7

        handle = await one.start()
        await app.run_until_idle()
        yield handle, Reads((await app.stores()).checkpointer)


async def test_an_awaited_handle_reads_its_end_in_one_call() -> None:
    async with ended() as (handle, reads):
        assert await asyncio.wait_for(handle.result(), 5) == 7
        assert reads.calls == ["look"]  # the status and the result together


async def test_a_handle_reads_its_status_in_one_call() -> None:
    async with ended() as (handle, reads):
        info = await handle.status()
        assert (info.status, info.kind, info.workflow) == (
            durably.WorkflowStatus.COMPLETED,
            "one",
            handle.id,
        )
        assert reads.calls == ["look"]  # the status with the start record
