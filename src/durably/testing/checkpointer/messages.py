"""`CheckpointerConformance` cases for what long-lived workflows rest on: reading named
records without the rest (`peek`), a message that never lands after the end (`append`
``unless_finished``), consumed messages removed (`forget`) and a workflow begun afresh
(`restart`)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from durably.errors import Fenced, InvalidInputError, WorkflowFinishedError
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import (
    INBOX_PREFIX,
    MAX_NAMED_KEYS,
    Checkpointer,
    Entry,
    finish_workflow,
)
from durably.testing.checkpointer.fixtures import CheckpointerFactory, claimed, lapse, wf

RACES = 3
"""Workflows a race test ends while messages are sent to it."""
SENDERS = 4
SENT_EACH = 12
LANDED_BEFORE_END = 8


async def _end(cp: Checkpointer[Any], workflow: str, status: WorkflowStatus) -> None:
    holder = await claimed(cp, workflow)
    if status is WorkflowStatus.COMPLETED:
        await finish_workflow(cp, holder, "result", "done")
    else:
        await cp.set_status(holder, status, error=status.value)
    await cp.release(holder)


def _messages(records: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in records.items() if key.startswith(INBOX_PREFIX)}


async def race_sends_against_the_end(
    cp: Checkpointer[Any],
    send: Callable[[str, int], Awaitable[Entry]],
    after: Callable[[str], Awaitable[None]] | None = None,
) -> None:
    """`RACES` times: a running workflow finishes (`finish_workflow`, its last record
    under ``"result"``) while senders append to it ``unless_finished`` through ``send``
    (the workflow, a value); ``after`` then looks at the workflow, if given.

    Asserts that each send either landed or was refused with `WorkflowFinishedError`
    (nothing written), and that every message that landed precedes the end's record in
    the store's own order (`load`): a message lands while the workflow is unfinished or
    not at all."""
    for _ in range(RACES):
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.set_status(holder, WorkflowStatus.RUNNING)
        await _race(
            cp,
            workflow,
            functools.partial(send, workflow),
            functools.partial(finish_workflow, cp, holder, "result", "done"),
        )
        if after is not None:
            await after(workflow)


async def _race(
    cp: Checkpointer[Any],
    workflow: str,
    send: Callable[[int], Awaitable[Entry]],
    end: Callable[[], Awaitable[object]],
) -> None:
    landed: list[Entry] = []
    refused: list[int] = []
    enough = asyncio.Event()

    async def sender(first: int) -> None:
        for value in range(first, first + SENT_EACH):
            try:
                landed.append(await send(value))
            except WorkflowFinishedError:
                refused.append(value)
            if len(landed) >= LANDED_BEFORE_END:
                enough.set()
            await asyncio.sleep(0)

    async def ender() -> None:
        await enough.wait()
        await end()

    await asyncio.wait_for(
        asyncio.gather(*(sender(n * SENT_EACH) for n in range(SENDERS)), ender()),
        timeout=60,
    )
    loaded = await cp.load(workflow)
    stored = _messages(loaded)
    assert len(landed) + len(refused) == SENDERS * SENT_EACH
    assert {entry.key: entry.value for entry in landed} == stored
    assert not set(refused) & set(stored.values()), "a refused message was written"
    order = list(loaded)
    late = order[order.index("result") + 1 :]
    assert not late, f"messages landed after the workflow finished: {late}"
    assert len(landed) >= LANDED_BEFORE_END
    assert refused


class CheckpointerMessageCases:
    """`peek`, `append(unless_finished=True)`, `forget` and `restart`."""

    # --- peek ------------------------------------------------------------------------------

    async def test_peek_reads_only_the_named_records_in_the_order_asked(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        await cp.supply(workflow, "a", 1)
        await cp.supply(workflow, "b", {"two": [2]})
        entry = await cp.append(workflow, "message")
        found = await cp.peek(workflow, ["b", "missing", entry.key, "a", "b"])
        assert list(found.items()) == [("b", {"two": [2]}), (entry.key, "message"), ("a", 1)]
        assert await cp.peek(workflow, []) == {}
        assert await cp.peek(wf("unknown"), ["a"]) == {}

    async def test_peek_refuses_a_string_or_too_many_keys_before_any_io(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        await cp.supply(workflow, "ab", 1)
        with pytest.raises(InvalidInputError, match="collection"):
            await cp.peek(workflow, "ab")
        with pytest.raises(InvalidInputError, match=str(MAX_NAMED_KEYS)):
            await cp.peek(workflow, [f"k{n}" for n in range(MAX_NAMED_KEYS + 1)])
        with pytest.raises(InvalidInputError):
            await cp.peek(workflow, ["ok", ""])

    # --- append unless finished ---------------------------------------------------------------

    async def test_an_append_unless_finished_lands_on_an_unfinished_workflow(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        unreported, running, parked = wf("unreported"), wf("running"), wf("parked")
        for workflow, status in ((running, WorkflowStatus.RUNNING), (parked, "parked")):
            holder = await claimed(cp, workflow)
            await cp.set_status(holder, WorkflowStatus(status))
        for workflow in (unreported, running, parked):
            entry = await cp.append(workflow, workflow, unless_finished=True)
            assert entry.key.startswith(INBOX_PREFIX)
            assert await cp.load(workflow) == {entry.key: workflow}

    @pytest.mark.parametrize(
        "status",
        [WorkflowStatus.COMPLETED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED],
        ids=lambda status: status.value,
    )
    async def test_an_append_unless_finished_is_refused_by_a_finished_workflow(
        self, checkpointer_factory: CheckpointerFactory, status: WorkflowStatus
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        early = await cp.append(workflow, "early", unless_finished=True)
        await _end(cp, workflow, status)
        before = await cp.load(workflow)
        with pytest.raises(WorkflowFinishedError, match=status.value):
            await cp.append(workflow, "late", unless_finished=True)
        assert await cp.load(workflow) == before
        assert _messages(before) == {early.key: "early"}
        # Without the condition an append lands as it always did (the engine's own use).
        plain = await cp.append(workflow, "plain")
        assert plain.key > early.key

    async def test_appends_racing_the_end_land_before_it_or_are_refused(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        await race_sends_against_the_end(cp, functools.partial(cp.append, unless_finished=True))

    # --- forget ----------------------------------------------------------------------------

    async def test_forget_deletes_the_named_messages_and_keys_are_never_reused(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        entries = [await cp.append(workflow, n) for n in range(4)]
        holder = await claimed(cp, workflow)
        await cp.record(holder, "step", "kept")
        gone = [entries[0].key, entries[2].key]
        assert await cp.forget(holder, [*gone, f"{INBOX_PREFIX}{99:020d}"]) == 2
        assert await cp.load(workflow) == {entries[1].key: 1, entries[3].key: 3, "step": "kept"}
        assert await cp.forget(holder, gone) == 0  # already gone: nothing to delete
        assert await cp.forget(holder, []) == 0
        later = await cp.append(workflow, "later")
        assert later.key > entries[-1].key
        assert (await cp.record(holder, "after", 1)).first  # the claim still holds

    async def test_a_superseded_pass_forgets_nothing(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        entry = await cp.append(workflow, "message")
        stale = await lapse(cp, workflow)
        await claimed(cp, workflow)
        with pytest.raises(Fenced):
            await cp.forget(stale, [entry.key])
        assert await cp.load(workflow) == {entry.key: "message"}

    async def test_forget_refuses_what_is_not_a_message_before_any_io(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        entry = await cp.append(workflow, "message")
        holder = await claimed(cp, workflow)
        await cp.record(holder, "step", 1)
        for bad in (["step"], [entry.key, "step"], entry.key):
            with pytest.raises(InvalidInputError):
                await cp.forget(holder, bad)
        too_many = [f"{INBOX_PREFIX}{n:020d}" for n in range(MAX_NAMED_KEYS + 1)]
        with pytest.raises(InvalidInputError, match=str(MAX_NAMED_KEYS)):
            await cp.forget(holder, too_many)
        assert await cp.load(workflow) == {entry.key: "message", "step": 1}

    # --- restart ---------------------------------------------------------------------------

    async def test_restart_keeps_the_kept_prefixes_and_rewrites_the_key(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        await cp.supply(workflow, "start", {"run": 1})
        first = await cp.append(workflow, "carried")
        await cp.supply(workflow, "mark#1", "kept")
        holder = await claimed(cp, workflow)
        for step in ("a", "b", "mark", "markless"):
            await cp.record(holder, step, step)
        await cp.set_status(holder, WorkflowStatus.RUNNING, attempts=3, error="before")
        deleted = await cp.restart(
            holder, "start", {"run": 2}, keep=(INBOX_PREFIX, "mark#", "unused:")
        )
        assert deleted == 4
        loaded = await cp.load(workflow)
        assert loaded == {first.key: "carried", "mark#1": "kept", "start": {"run": 2}}
        assert list(loaded)[-1] == "start"  # written afresh, after what was kept
        info = await cp.get_status(workflow)
        assert info is not None
        assert (info.status, info.attempts, info.last_error) == (WorkflowStatus.PENDING, 0, None)
        assert (await cp.record(holder, "a", "afresh")).value == "afresh"  # claim kept
        assert (await cp.append(workflow, "next")).key > first.key

    async def test_restart_without_kept_prefixes_leaves_only_the_key(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        await cp.append(workflow, "dropped")
        holder = await claimed(cp, workflow)
        await cp.record(holder, "step", 1)
        assert await cp.restart(holder, "start", "fresh", keep=()) == 2
        assert await cp.load(workflow) == {"start": "fresh"}

    async def test_a_superseded_pass_restarts_nothing(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        await cp.supply(workflow, "start", "old")
        stale = await lapse(cp, workflow)
        holder = await claimed(cp, workflow)
        await cp.set_status(holder, WorkflowStatus.RUNNING)
        await cp.record(holder, "step", 1)
        with pytest.raises(Fenced):
            await cp.restart(stale, "start", "new")
        assert await cp.load(workflow) == {"start": "old", "step": 1}
        info = await cp.get_status(workflow)
        assert info is not None
        assert info.status is WorkflowStatus.RUNNING

    async def test_restart_refuses_bad_input_before_any_io(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.record(holder, "step", 1)
        with pytest.raises(InvalidInputError, match="inbox"):
            await cp.restart(holder, f"{INBOX_PREFIX}{1:020d}", "forged")
        with pytest.raises(InvalidInputError, match="collection"):
            await cp.restart(holder, "start", "x", keep=INBOX_PREFIX)
        with pytest.raises(InvalidInputError):
            await cp.restart(holder, "start", "x", keep=("",))
        assert await cp.load(workflow) == {"step": 1}


__all__ = ["RACES", "CheckpointerMessageCases", "race_sends_against_the_end"]
