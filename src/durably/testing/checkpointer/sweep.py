"""`CheckpointerConformance` cases for the retention sweep: what it deletes, what it never
touches, and that a swept workflow's tokens are never rewound."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durably.errors import Fenced
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.workflows import Checkpointer, Pass
from durably.testing.checkpointer.fixtures import LONG, CheckpointerFactory, claimed, wf

LATER = timedelta(hours=1)


def _future() -> datetime:
    """A cutoff after every status any test sets (so age alone never spares a workflow)."""
    return datetime.now(UTC) + LATER


async def _finish(
    cp: Checkpointer[Any],
    workflow: str,
    status: WorkflowStatus = WorkflowStatus.COMPLETED,
    *,
    release: bool = True,
) -> tuple[Pass, WorkflowInfo]:
    """Run one pass that records a step, reports ``status`` and (by default) lets go."""
    holder = await claimed(cp, workflow)
    await cp.record(holder, "step", [workflow, "done"])
    info = await cp.set_status(holder, status)
    if release:
        await cp.release(holder)
    return holder, info


async def _assert_gone(cp: Checkpointer[Any], workflow: str) -> None:
    assert await cp.load(workflow) == {}
    assert await cp.history(workflow) == {}
    assert await cp.get_status(workflow) is None


class CheckpointerSweepCases:
    """The retention sweep deletes old finished workflows, and nothing else."""

    async def test_finished_workflows_older_than_the_cutoff_are_swept_and_newer_ones_kept(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        done, failed, newer = wf("done"), wf("failed"), wf("newer")
        _, first = await _finish(cp, done)
        _, second = await _finish(cp, failed, WorkflowStatus.FAILED)
        await asyncio.sleep(0.05)
        _, third = await _finish(cp, newer)
        cutoff = second.updated_at + (third.updated_at - second.updated_at) / 2
        assert first.updated_at <= second.updated_at < cutoff < third.updated_at

        assert await cp.sweep(finished_before=cutoff) == 2
        await _assert_gone(cp, done)
        await _assert_gone(cp, failed)
        assert await cp.load(newer) == {"step": [newer, "done"]}
        kept = await cp.get_status(newer)
        assert kept is not None
        assert kept.status is WorkflowStatus.COMPLETED
        assert [i.workflow for i in await cp.list_status()] == [newer]
        assert await cp.sweep(finished_before=cutoff) == 0

    async def test_unfinished_live_and_statusless_workflows_are_never_swept(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        sleeping, blocked, running = wf("sleeping"), wf("blocked"), wf("running")
        live, supplied, unreported = wf("live"), wf("supplied"), wf("unreported")
        await _finish(cp, sleeping, WorkflowStatus.SLEEPING)
        await _finish(cp, blocked, WorkflowStatus.BLOCKED)
        await _finish(cp, running, WorkflowStatus.RUNNING)
        await _finish(cp, live, release=False)  # finished, but its pass is still alive
        await cp.supply(supplied, "input", 1)
        await cp.append(supplied, "message")
        holder = await claimed(cp, unreported)
        await cp.record(holder, "step", 2)
        await cp.release(holder)

        assert await cp.sweep(finished_before=_future()) == 0
        for workflow in (sleeping, blocked, running, live):
            assert await cp.load(workflow) == {"step": [workflow, "done"]}
            assert await cp.get_status(workflow) is not None
        assert set((await cp.load(supplied)).values()) == {1, "message"}
        assert await cp.load(unreported) == {"step": 2}
        assert await cp.claim(live, LONG, LONG) is None, "the live claim must survive"

    async def test_a_finished_workflow_is_swept_once_its_claim_lapses(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, LONG, 0.15)
        assert holder is not None
        await cp.set_status(holder, WorkflowStatus.COMPLETED)
        assert await cp.sweep(finished_before=_future()) == 0
        await asyncio.sleep(0.25)
        assert await cp.sweep(finished_before=_future()) == 1
        await _assert_gone(cp, workflow)

    async def test_the_limit_caps_how_many_workflows_one_sweep_deletes(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflows = [wf(f"w{n}") for n in range(3)]
        for workflow in workflows:
            await _finish(cp, workflow)
        assert await cp.sweep(finished_before=_future(), limit=2) == 2
        assert len(await cp.list_status()) == 1
        assert await cp.sweep(finished_before=_future(), limit=2) == 1
        assert await cp.list_status() == []
        for workflow in workflows:
            await _assert_gone(cp, workflow)

    async def test_a_limited_sweep_takes_the_oldest_finished_workflows_first(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        # Finished in reverse id order, across both finished statuses.
        oldest, middle, newest = wf("z"), wf("m"), wf("a")
        finished = []
        for workflow, status in (
            (oldest, WorkflowStatus.COMPLETED),
            (middle, WorkflowStatus.FAILED),
            (newest, WorkflowStatus.COMPLETED),
        ):
            finished.append((await _finish(cp, workflow, status))[1].updated_at)
            await asyncio.sleep(0.01)  # distinct times on every store's clock
        assert finished == sorted(set(finished))
        heard: list[str] = []

        async def swept(workflow: str) -> None:
            heard.append(workflow)

        assert await cp.sweep(finished_before=_future(), limit=2, on_swept=swept) == 2
        assert heard == [oldest, middle]
        assert [info.workflow for info in await cp.list_status()] == [newest]

    async def test_on_swept_hears_each_swept_workflow_once(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflows = {wf(f"w{n}") for n in range(3)}
        for workflow in workflows:
            await _finish(cp, workflow)
        await _finish(cp, wf("live"), release=False)
        heard: list[str] = []

        async def swept(workflow: str) -> None:
            heard.append(workflow)

        assert await cp.sweep(finished_before=_future(), on_swept=swept) == 3
        assert sorted(heard) == sorted(workflows)

    async def test_a_claim_after_a_sweep_outranks_every_token_handed_out_before(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        earlier: list[Pass] = []
        for _ in range(20):  # a burst, so a clock-based token runs ahead of the clock
            holder = await claimed(cp, workflow)
            earlier.append(holder)
            await cp.release(holder)
        stale, _ = await _finish(cp, workflow)
        earlier.append(stale)
        assert await cp.sweep(finished_before=_future()) == 1
        with pytest.raises(Fenced):
            await cp.record(stale, "late", "from the swept incarnation")
        await _assert_gone(cp, workflow)

        later: list[Pass] = []
        for n in range(4):
            holder = await claimed(cp, workflow)
            later.append(holder)
            assert holder.token > max(p.token for p in earlier), (holder, earlier[-1])
            await cp.record(holder, f"new-{n}", n)
            for old in (stale, earlier[0]):
                with pytest.raises(Fenced):
                    await cp.record(old, "late", "from the swept incarnation")
                with pytest.raises(Fenced):
                    await cp.set_status(old, WorkflowStatus.COMPLETED)
            assert not await cp.renew(stale, LONG)
            await cp.release(holder)
        tokens = [p.token for p in earlier + later]
        assert all(a < b for a, b in itertools.pairwise(tokens)), tokens
        assert await cp.load(workflow) == {f"new-{n}": n for n in range(4)}
        assert await cp.get_status(workflow) is None

    async def test_a_discarded_then_swept_workflow_still_never_rewinds_its_token(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        first, _ = await _finish(cp, workflow)
        await cp.discard(workflow)
        second, _ = await _finish(cp, workflow)
        assert await cp.sweep(finished_before=_future()) == 1
        third = await claimed(cp, workflow)
        assert first.token < second.token < third.token
        with pytest.raises(Fenced):
            await cp.record(second, "late", 1)

    async def test_bad_sweep_arguments_are_refused_before_anything_is_deleted(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        await _finish(cp, workflow)
        naive = datetime.now() + LATER  # naive on purpose
        with pytest.raises(ValueError, match="timezone"):
            await cp.sweep(finished_before=naive)
        for limit in (0, -1):
            with pytest.raises(ValueError, match="limit"):
                await cp.sweep(finished_before=_future(), limit=limit)
        with pytest.raises(ValueError):
            await cp.sweep(finished_before=_future(), limit=True)
        with pytest.raises(ValueError):
            await cp.sweep(finished_before="2020-01-01")  # type: ignore[arg-type]
        assert await cp.load(workflow) == {"step": [workflow, "done"]}
        assert await cp.get_status(workflow) is not None


__all__ = ["CheckpointerSweepCases"]
