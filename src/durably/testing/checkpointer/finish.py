"""`CheckpointerConformance` cases for `finish`: a last record and the COMPLETED status in
one write, fenced like `record` and `set_status`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durably.errors import Fenced, InvalidInputError
from durably.redaction import MAX_ERROR_CHARS, TRUNCATED_MARKER
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Checkpointer, Finishing, Pass
from durably.testing.checkpointer.fixtures import LONG, CheckpointerFactory, claimed, lapse, wf


def finishing(cp: Checkpointer[Any]) -> Finishing:
    """``cp`` as a `Finishing` (every shipped checkpointer is one); the case is skipped for
    a checkpointer without the optional ``finish``."""
    if not isinstance(cp, Finishing):
        pytest.skip(f"{type(cp).__name__} has no finish() (optional)")
    return cp


class CheckpointerFinishCases:
    """`finish` writes the record and the COMPLETED status together, or neither."""

    async def test_finish_writes_the_record_and_the_completed_status(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.record(holder, "step", 1)
        running = await cp.set_status(holder, WorkflowStatus.RUNNING, attempts=2, error="before")
        info = await finishing(cp).finish(
            holder, "result", {"v": [1, "two"]}, attempts=2, error="before"
        )
        assert (info.workflow, info.status, info.attempts, info.last_error) == (
            workflow,
            WorkflowStatus.COMPLETED,
            2,
            "before",
        )
        assert info.updated_at.tzinfo is not None
        assert abs(datetime.now(UTC) - info.updated_at) < timedelta(minutes=1)
        assert info.updated_at >= running.updated_at
        assert await cp.get_status(workflow) == info
        assert await cp.load(workflow) == {"step": 1, "result": {"v": [1, "two"]}}
        assert list(await cp.history(workflow)) == ["step", "result"]

    async def test_finish_reports_as_set_status_would(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        plain, mended, huge = wf(), wf(), wf()
        info = await finishing(cp).finish(await claimed(cp, plain), "result", None)
        assert (info.status, info.attempts, info.last_error) == (
            WorkflowStatus.COMPLETED,
            0,
            None,
        )
        assert await cp.load(plain) == {"result": None}
        info = await finishing(cp).finish(
            await claimed(cp, mended), "result", 1, attempts=1, error="a\x00b 💥"
        )
        assert info.last_error == "a\ufffdb 💥"
        assert await cp.get_status(mended) == info
        long_error = "é" * (MAX_ERROR_CHARS * 2)
        info = await finishing(cp).finish(await claimed(cp, huge), "result", 1, error=long_error)
        stored = await cp.get_status(huge)
        assert stored == info
        assert stored.last_error == long_error[: MAX_ERROR_CHARS - len(TRUNCATED_MARKER)] + (
            TRUNCATED_MARKER
        )

    async def test_a_superseded_pass_finishing_writes_neither(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await lapse(cp, workflow)
        new = await claimed(cp, workflow)
        await cp.set_status(new, WorkflowStatus.SLEEPING, attempts=1)
        with pytest.raises(Fenced) as raised:
            await finishing(cp).finish(old, "result", "stale")
        assert (raised.value.workflow, raised.value.token) == (workflow, old.token)
        assert await cp.load(workflow) == {}
        info = await cp.get_status(workflow)
        assert info is not None
        assert (info.status, info.attempts) == (WorkflowStatus.SLEEPING, 1)

    async def test_a_pass_that_was_never_handed_out_or_was_discarded_writes_neither(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        never, discarded = wf(), wf()
        with pytest.raises(Fenced):
            await finishing(cp).finish(Pass(never, 1), "result", 1)
        holder = await claimed(cp, discarded)
        await cp.record(holder, "step", 1)
        await cp.discard(discarded)
        with pytest.raises(Fenced):
            await finishing(cp).finish(holder, "result", 1)
        for workflow in (never, discarded):
            assert await cp.load(workflow) == {}
            assert await cp.get_status(workflow) is None

    async def test_finish_keeps_a_record_already_under_the_key(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        await cp.supply(workflow, "result", "first")
        holder = await claimed(cp, workflow)
        info = await finishing(cp).finish(holder, "result", "second", attempts=3)
        assert (info.status, info.attempts) == (WorkflowStatus.COMPLETED, 3)
        assert await cp.load(workflow) == {"result": "first"}
        assert await cp.get_status(workflow) == info

    async def test_finish_again_replaces_the_status_and_keeps_the_record(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        # A retried finish whose first reply was lost must land the same state.
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        first = await finishing(cp).finish(holder, "result", [1])
        again = await finishing(cp).finish(holder, "result", [1], attempts=1)
        assert await cp.get_status(workflow) == again
        assert again.updated_at >= first.updated_at
        assert await cp.load(workflow) == {"result": [1]}

    async def test_a_refused_finish_writes_neither(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.set_status(holder, WorkflowStatus.RUNNING)
        with pytest.raises(InvalidInputError):
            await finishing(cp).finish(holder, "inbox:00000000000000000001", 1)
        with pytest.raises(InvalidInputError):
            await finishing(cp).finish(holder, "result", 1, attempts=-1)
        with pytest.raises(InvalidInputError):
            await finishing(cp).finish(holder, "result", "nul \x00 inside")
        assert await cp.load(workflow) == {}
        info = await cp.get_status(workflow)
        assert info is not None
        assert info.status is WorkflowStatus.RUNNING

    async def test_finish_is_a_sign_of_life(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        # Windows wide enough that a loaded machine's late timers and slow writes still
        # land past the first window and well within the renewed one.
        holder = await cp.claim(workflow, LONG, 1.0)
        assert holder is not None
        await asyncio.sleep(0.6)
        await finishing(cp).finish(holder, "result", 1)
        await asyncio.sleep(0.6)  # past the first window, within the renewed one
        assert await cp.claim(workflow, LONG, LONG) is None

    async def test_a_finish_racing_a_takeover_lands_whole_or_not_at_all(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        for _ in range(5):
            workflow = wf()
            old = await lapse(cp, workflow)
            finished, taken = await asyncio.gather(
                finishing(cp).finish(old, "result", "old"),
                cp.claim(workflow, LONG, LONG),
                return_exceptions=True,
            )
            # A finish landing first renews the lapsed claim (a sign of life): then the
            # claim finds it held.
            assert taken is None or isinstance(taken, Pass), taken
            info = await cp.get_status(workflow)
            if isinstance(finished, Fenced):
                assert await cp.load(workflow) == {}
                assert info is None
            else:
                assert not isinstance(finished, BaseException), finished
                assert await cp.load(workflow) == {"result": "old"}
                assert info == finished
