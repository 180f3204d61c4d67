"""Conformance cases for whole passes (`advance` over the durable's checkpointer): how a
pass that suspends on several things at once is reported, on every backing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from durably.clock import ManualClock
from durably.engine.runtime import Execution, advance
from durably.stores.workflows import Blocked, Durable

DurableFactory = Callable[[], Awaitable[Durable[Any]]]

T0 = 1_000_000.0  # an instant on the caller's clock
TIMEOUT = 60.0


async def _waits(run: Execution, wait: str) -> object:
    if wait == "awaiting":
        return await run.awaiting("approval")
    return await run.receive("inbox")


def _blocked(wait: str, due: float | None) -> Blocked:
    on = frozenset({"approval" if wait == "awaiting" else "inbox"})
    if wait == "awaiting":
        return Blocked(waiting=on, listening=frozenset(), due=due)
    return Blocked(waiting=frozenset(), listening=on, due=due)


class DurablePassCases:
    """Passes run with `advance` over ``durable_factory()``'s checkpointer."""

    @pytest.mark.parametrize("wait", ["awaiting", "receive"])
    @pytest.mark.parametrize("sleep_first", [True, False], ids=["sleep-first", "wait-first"])
    async def test_a_sleep_beside_a_wait_in_a_task_group_is_reported_as_the_passs_deadline(
        self, durable_factory: DurableFactory, wait: str, sleep_first: bool
    ) -> None:
        durable = await durable_factory()
        workflow = f"wf-{uuid.uuid4().hex[:12]}"
        clock = ManualClock(T0)

        async def body(run: Execution) -> None:
            async with asyncio.TaskGroup() as group:
                if sleep_first:
                    group.create_task(run.sleep("timeout", TIMEOUT))
                group.create_task(_waits(run, wait))
                if not sleep_first:
                    group.create_task(run.sleep("timeout", TIMEOUT))

        # The first pass records the deadline while its sibling's suspension cancels it.
        outcome = await advance(workflow, durable.checkpointer, body, clock=clock)
        assert outcome == _blocked(wait, T0 + TIMEOUT)
        assert await durable.checkpointer.load(workflow) == {"timeout": T0 + TIMEOUT}
        # A later pass reads the recorded deadline.
        clock.advance(TIMEOUT - 1)
        outcome = await advance(workflow, durable.checkpointer, body, clock=clock)
        assert outcome == _blocked(wait, T0 + TIMEOUT)
        # Past the deadline only the wait is left.
        clock.advance(1)
        outcome = await advance(workflow, durable.checkpointer, body, clock=clock)
        assert outcome == _blocked(wait, None)
