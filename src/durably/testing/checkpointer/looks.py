"""`CheckpointerConformance` cases for `look`: the status and some records in one read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durably.errors import InvalidInputError
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import MAX_NAMED_KEYS, Checkpointer, Looking
from durably.testing.checkpointer.finish import finishing
from durably.testing.checkpointer.fixtures import (
    STRANGE_IDS,
    CheckpointerFactory,
    claimed,
    wf,
)

FINISHES = 30
"""Workflows finished while looks race them, in the snapshot case."""
LOOKS = 4
"""Looks in flight at once against each finish."""


def looking(cp: Checkpointer[Any]) -> Looking:
    """``cp`` as a `Looking` (every shipped checkpointer is one); the case is skipped for a
    checkpointer without the optional ``look``."""
    if not isinstance(cp, Looking):
        pytest.skip(f"{type(cp).__name__} has no look() (optional)")
    return cp


class CheckpointerLookCases:
    """`look` answers as `get_status` and `peek` would, from one snapshot."""

    async def test_a_look_reads_the_status_and_the_records_asked_for(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        assert await looking(cp).look(wf("unknown"), ["a"]) == (None, {})
        await cp.supply(workflow, "a", 1)
        await cp.supply(workflow, "b", {"two": [2]})
        info, found = await looking(cp).look(workflow, ["b", "missing", "a", "b"])
        assert info is None  # records, but no status reported yet
        assert list(found.items()) == [("b", {"two": [2]}), ("a", 1)]
        holder = await claimed(cp, workflow)
        running = await cp.set_status(holder, WorkflowStatus.RUNNING, attempts=1, error="x")
        assert await looking(cp).look(workflow, []) == (running, {})
        ended = await finishing(cp).finish(holder, "result", [1, "two"])
        assert await looking(cp).look(workflow, ["result", "a"]) == (
            ended,
            {"result": [1, "two"], "a": 1},
        )
        assert ended == await cp.get_status(workflow)

    async def test_a_look_reads_workflows_and_keys_of_any_shape(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        tag = wf("")
        for strange in STRANGE_IDS:
            workflow = f"{strange}{tag}"
            holder = await claimed(cp, workflow)
            await cp.record(holder, strange, [workflow, strange])
            info = await cp.set_status(holder, WorkflowStatus.SLEEPING)
            assert await looking(cp).look(workflow, [strange, "other"]) == (
                info,
                {strange: [workflow, strange]},
            )

    async def test_a_look_never_sees_a_finish_by_halves(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        """A status that says completed comes with the result written in the same write,
        and a result with that status: looks racing each finish see both or neither."""
        cp = await checkpointer_factory()
        seen: list[tuple[bool, bool]] = []

        async def watch(workflow: str, done: asyncio.Event) -> None:
            while not done.is_set():
                info, found = await looking(cp).look(workflow, ["result"])
                completed = info is not None and info.status is WorkflowStatus.COMPLETED
                seen.append((completed, "result" in found))
                await asyncio.sleep(0)

        for n in range(FINISHES):
            workflow = wf()
            holder = await claimed(cp, workflow)
            await cp.set_status(holder, WorkflowStatus.RUNNING)
            done = asyncio.Event()
            watchers = [asyncio.create_task(watch(workflow, done)) for _ in range(LOOKS)]
            await asyncio.sleep(0)
            await finishing(cp).finish(holder, "result", n)
            done.set()
            await asyncio.gather(*watchers)
            assert await looking(cp).look(workflow, ["result"]) == (
                await cp.get_status(workflow),
                {"result": n},
            )
        halves = [pair for pair in seen if pair[0] != pair[1]]
        assert not halves, f"{len(halves)} of {len(seen)} looks saw half a finish"

    async def test_a_look_refuses_bad_input_before_any_io(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        with pytest.raises(InvalidInputError, match="collection"):
            await looking(cp).look(workflow, "ab")
        with pytest.raises(InvalidInputError, match=str(MAX_NAMED_KEYS)):
            await looking(cp).look(workflow, [f"k{n}" for n in range(MAX_NAMED_KEYS + 1)])
        with pytest.raises(InvalidInputError):
            await looking(cp).look(workflow, ["ok", ""])
        with pytest.raises(InvalidInputError):
            await looking(cp).look("", ["a"])
        assert await cp.workflows() == []  # nothing written, nothing created
