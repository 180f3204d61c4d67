"""`AppMessages`: messages at scale. A send costs the same whatever was sent before, a
`recv` reads only its topic's unconsumed messages, consumed messages are deleted, and a
send racing the workflow's end lands before it or is refused."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from durably.app import App, Context, WorkflowHandle
from durably.errors import WorkflowFinishedError
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import INBOX_PREFIX
from durably.testing.app.fixtures import APPROVAL, NOTE, AppFixtures

SAMPLED = 60
"""Sends timed at a time, to a long inbox and to an empty one."""
FILLED_AT_ONCE = 32
"""Sends in flight at once while an inbox is filled (not timed): the fill is bound by
round trips, not by the work a send costs."""
ROUNDS = 5
"""Times `SAMPLED` sends are timed to each inbox, in turn (the cheapest round of each
counts: a round slowed by a neighbour on the machine says nothing of the store)."""
SLOWER_AT_MOST = 1.5
"""How much more a send to the long inbox may cost than one to an empty inbox (work per
send, median)."""
LINEAR_AT_MOST = 8.0
"""How much more consuming four times the messages may cost (linear: 4; quadratic: 16).
Twice linear, since one run of each size is timed and a shared machine's collector and
caches move a single run by half again; a cost that grew with the history stays far past it."""


async def seconds(call: Awaitable[object], *, cpu: bool) -> float:
    """What ``call`` cost: with ``cpu``, the processor time this process spent while it
    ran (a store in this process: its database thread included, the waits of a disk
    other processes share left out); else the wall time (a store server's own work
    included, which this process's CPU never sees)."""
    clock = time.process_time if cpu else time.perf_counter
    began = clock()
    await call
    return clock() - began


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Collect once, then keep the collector out while measuring: its passes grow with
    everything the process keeps alive (thousands of queued messages on memory), and what
    they cost is not the measured calls'."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def send_many(handle: WorkflowHandle[Any], count: int) -> None:
    """Send ``count`` notes to ``handle``, `FILLED_AT_ONCE` in flight at a time."""
    for first in range(0, count, FILLED_AT_ONCE):
        batch = range(first, min(first + FILLED_AT_ONCE, count))
        await asyncio.gather(*(handle.send(NOTE, "x") for _ in batch))


def stored_messages(records: dict[str, object]) -> list[str]:
    return [key for key in records if key.startswith(INBOX_PREFIX)]


class AppMessages(AppFixtures):
    messages_sent = 10_000
    """How many messages the constant-send case sends to one workflow (a subclass over a
    slow store may send fewer: a send to it is compared with one to an empty inbox)."""
    messages_consumed = 8_000
    """How many queued messages the linear-consume case has a workflow take in one pass
    (against a quarter as many)."""
    store_in_process = False
    """Whether all of the store's work runs in this process (memory, SQLite): the message
    cases then time this process's CPU; over a server they time wall clock (`seconds`)."""

    async def test_a_send_costs_the_same_after_thousands_of_messages(self, app: App) -> None:
        @app.workflow
        async def inbox(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        handle = await inbox.start()  # never run: every message stays queued
        await send_many(handle, self.messages_sent - ROUNDS * SAMPLED)

        async def median_cost(target: WorkflowHandle[str | None]) -> float:
            """What one send to ``target`` costs now: the median of `SAMPLED` sends."""
            with collector_paused():
                spent = [
                    await seconds(target.send(NOTE, "x"), cpu=self.store_in_process)
                    for _ in range(SAMPLED)
                ]
            return statistics.median(spent)

        # Rounds alternate between the full inbox and a fresh one, so both are measured
        # under the same load on the machine; the cheapest round of each counts.
        full, empty = [], []
        for _ in range(ROUNDS):
            full.append(await median_cost(handle))
            empty.append(await median_cost(await inbox.start()))
        stored = await (await app.stores()).checkpointer.load(handle.id)
        assert len(stored_messages(stored)) == self.messages_sent
        slower = min(full) / min(empty)
        assert slower <= SLOWER_AT_MOST, (
            f"a send costs {slower:.2f}x with {self.messages_sent} messages queued what it "
            "costs to an empty inbox"
        )

    async def test_consuming_queued_messages_takes_time_linear_in_their_count(
        self, app: App
    ) -> None:
        @app.workflow
        async def drain(ctx: Context, count: int) -> int:
            taken = 0
            for _ in range(count):
                taken += len(await ctx.recv(NOTE) or "")
            return taken if await ctx.recv(APPROVAL) else -1

        async def consume(count: int) -> float:
            handle = await drain.start(count)
            await handle.send(APPROVAL, True)  # another topic's, queued before the notes
            await send_many(handle, count)
            with collector_paused():
                spent = await seconds(app.run_until_idle(), cpu=self.store_in_process)
            assert await handle.result(timeout=5) == count
            return spent

        # Both measured with the App's subscription to the store's announcements up (it
        # starts with the first handle that waits, and each announcement costs this
        # process a little): the first consume would otherwise run without it.
        await consume(1)
        few = await consume(self.messages_consumed // 4)
        many = await consume(self.messages_consumed)
        assert many / few <= LINEAR_AT_MOST, (
            f"{self.messages_consumed} messages took {many / few:.1f}x the time of a quarter "
            "as many"
        )

    async def test_a_recv_loop_keeps_no_message_it_consumed(self, app: App) -> None:
        received: list[str] = []

        @app.workflow
        async def listener(ctx: Context, rounds: int) -> int:
            for _ in range(rounds):
                note = await ctx.recv(NOTE)
                if not ctx.replaying:
                    received.append(str(note))
            return len(received)

        handle = await listener.start(30)
        checkpointer = (await app.stores()).checkpointer
        counts: list[int] = []
        for batch in range(10):
            for n in range(3):
                await handle.send(NOTE, f"{batch}.{n}")
            await app.run_until_idle()
            stored = await checkpointer.load(handle.id)
            assert stored_messages(stored) == [], f"consumed messages kept after batch {batch}"
            counts.append(len(stored))
        assert await handle.result(timeout=5) == 30
        assert received == [f"{batch}.{n}" for batch in range(10) for n in range(3)]
        # What is left is the body's own: its start, result, and per recv its record and
        # at most one wait, never the messages besides.
        assert counts[-1] <= 2 + 2 * 30

    async def test_a_recv_record_written_before_values_were_kept_still_replays(
        self, app: App
    ) -> None:
        @app.workflow
        async def pair(ctx: Context) -> list[str | None]:
            return [await ctx.recv(NOTE), await ctx.recv(NOTE)]

        handle = await pair.start()
        await handle.send(NOTE, "old")
        checkpointer = (await app.stores()).checkpointer
        (old,) = stored_messages(await checkpointer.load(handle.id))
        # The first recv as an earlier release recorded it: the message's key alone.
        holder = await checkpointer.claim(handle.id, 30.0, 30.0)
        assert holder is not None
        await checkpointer.record(holder, "durably:recv:note#1", {"m": old})
        await checkpointer.release(holder)
        await app.run_until_idle()
        await handle.send(NOTE, "new")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == ["old", "new"]
        # Its record does not hold the value, so the message it names is kept.
        assert stored_messages(await checkpointer.load(handle.id)) == [old]

    async def test_sends_racing_the_end_land_before_it_or_are_refused(self, app: App) -> None:
        @app.workflow
        async def first_note(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        checkpointer = (await app.stores()).checkpointer
        for _ in range(3):
            handle = await first_note.start()
            await app.run_until_idle()  # waiting for its note
            landed, refused = await _race(app, handle)
            stored = await checkpointer.load(handle.id)
            order = list(stored)
            assert order.index("durably:result") == len(order) - 1, (
                "a message landed after the workflow completed"
            )
            queued = [stored[key] for key in stored_messages(stored)]
            messages = {str(value.get("value")) for value in queued if isinstance(value, dict)}
            read = await handle.result(timeout=5)
            # Each note that landed was read or is still queued (it landed while the
            # last pass ran); none refused was written.
            assert read not in messages
            assert messages | {read} == set(landed)
            assert not messages & set(refused)
            with pytest.raises(WorkflowFinishedError, match="completed"):
                await handle.send(NOTE, "after")
            assert await checkpointer.load(handle.id) == stored

    async def test_a_workflow_resumed_many_times_still_refuses_a_send_once_cancelled(
        self, app: App
    ) -> None:
        @app.workflow
        async def waiting(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        handle = await waiting.start()
        for _ in range(12):  # past the markers one read covers
            await app.run_until_idle()
            assert await handle.cancel()
            await app.run_until_idle()
            assert (await handle.status()).status is WorkflowStatus.CANCELLED
            assert await handle.resume()
        await app.run_until_idle()
        assert await handle.cancel()
        with pytest.raises(WorkflowFinishedError, match="being cancelled"):
            await handle.send(NOTE, "too late")
        await app.run_until_idle()
        assert await handle.resume()
        await handle.send(NOTE, "after the resume")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "after the resume"


async def _race(app: App, handle: WorkflowHandle[Any]) -> tuple[list[str], list[str]]:
    """Send notes from four senders while the workflow runs to its end; the notes that
    landed and those refused."""
    landed: list[str] = []
    refused: list[str] = []
    send: Callable[[str], Awaitable[None]] = functools.partial(handle.send, NOTE)

    async def sender(name: str) -> None:
        for n in range(10):
            note = f"{name}{n}"
            try:
                await send(note)
            except WorkflowFinishedError:
                refused.append(note)
            else:
                landed.append(note)
            await asyncio.sleep(0)

    async def serve() -> None:
        while not landed:
            await asyncio.sleep(0)
        # Until it ends: a store that skips a row another transaction holds (a send's
        # wakeup being written) can find nothing ready for a moment.
        while not (await handle.status()).status.finished:
            await app.run_until_idle()
            await asyncio.sleep(0)

    await asyncio.gather(*(sender(name) for name in "abcd"), serve())
    assert len(landed) + len(refused) == 40
    return landed, refused


__all__ = ["AppMessages", "seconds"]
