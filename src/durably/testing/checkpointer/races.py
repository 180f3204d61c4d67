"""`CheckpointerConformance` cases for the fence under a race and the per-claim liveness
window: the promises the workflow store rests on, each seen from the outside."""

from __future__ import annotations

import asyncio
from typing import Any

from durably.errors import Fenced
from durably.stores.workflows import Checkpointer, Pass, Recorded
from durably.testing.checkpointer.fixtures import LONG, CheckpointerFactory, wf

ROUNDS = 12
ALIVE = 0.15
SHORT = 0.4  # a window that lapses within the test, wide enough for a loaded machine


async def _late_record(cp: Checkpointer[Any], holder: Pass) -> Recorded[object] | Fenced:
    try:
        return await cp.record(holder, "late", "from the lapsed pass")
    except Fenced as fenced:
        return fenced


async def _claim_and_look(
    cp: Checkpointer[Any], workflow: str
) -> tuple[Pass | None, dict[str, object]]:
    """A new pass's start: its claim, then what it finds recorded."""
    holder = await cp.claim(workflow, LONG, LONG)
    return holder, (await cp.load(workflow) if holder is not None else {})


class CheckpointerRaceCases:
    """A claim in flight against a write of the pass before it, and liveness per claim."""

    async def test_a_record_of_the_lapsed_holder_never_lands_after_a_racing_claim(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflows = [wf(f"race{n}") for n in range(ROUNDS)]
        lapsed: list[Pass] = []
        for workflow in workflows:
            holder = await cp.claim(workflow, LONG, ALIVE)
            assert holder is not None
            lapsed.append(holder)
        await asyncio.sleep(ALIVE + 0.1)
        # Every round at once: the new claim and the old holder's write in flight together.
        starts = asyncio.gather(*(_claim_and_look(cp, h.workflow) for h in lapsed))
        writes = asyncio.gather(*(_late_record(cp, h) for h in lapsed))
        for old, (new, seen), write in zip(lapsed, await starts, await writes, strict=True):
            loaded = await cp.load(old.workflow)
            if isinstance(write, Fenced):
                # Only a new claim fences: the new pass came first, and the write left
                # nothing.
                assert isinstance(new, Pass)
                assert new.token > old.token
                assert loaded == {}
                continue
            assert isinstance(write, Recorded)
            assert write.first
            assert loaded == {"late": "from the lapsed pass"}
            if new is not None:
                # The write was accepted, so it landed before the new pass began: what
                # the new pass found at its start already held it.
                assert new.token > old.token
                assert seen == loaded
            # Otherwise the write came first and renewed the old pass, which the claim met.

    async def test_each_claim_lapses_at_its_own_liveness_window(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        short, long = wf("short"), wf("long")
        assert await cp.claim(short, LONG, SHORT) is not None
        assert await cp.claim(long, LONG, LONG) is not None
        assert await cp.claim(short, LONG, LONG) is None
        await asyncio.sleep(SHORT + 0.2)
        assert await cp.claim(short, LONG, LONG) is not None
        assert await cp.claim(long, LONG, LONG) is None

    async def test_a_liveness_window_never_outlasts_the_claims_budget(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, SHORT, LONG)
        assert holder is not None
        await asyncio.sleep(SHORT + 0.2)
        again = await cp.claim(workflow, LONG, LONG)
        assert again is not None
        assert again.token > holder.token

    async def test_a_renewal_sets_the_window_it_asks_for(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, LONG, LONG)
        assert holder is not None
        assert await cp.renew(holder, SHORT)  # shorter than the window the claim asked for
        await asyncio.sleep(SHORT + 0.2)
        assert await cp.claim(workflow, LONG, LONG) is not None
