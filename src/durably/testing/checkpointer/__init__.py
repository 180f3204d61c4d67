"""`CheckpointerConformance`: the promises every `Checkpointer` keeps.

Subclass it and provide two fixtures:

- ``checkpointer_factory``: ``Callable[[], Awaitable[Checkpointer[Any]]]``, each call a store
  over an empty, isolated namespace (the subclass cleans up);
- ``effect_kit``: an `EffectKit` whose counters live in the same datastore as the
  checkpointers the factory makes.

Leases run on the store's own clock, which a test cannot move, so the lease tests wait for
real, with budgets of a few tenths of a second.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from durably.errors import Fenced
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Pass
from durably.testing.checkpointer.finish import CheckpointerFinishCases
from durably.testing.checkpointer.fixtures import LONG, CheckpointerFactory, claimed, lapse, wf
from durably.testing.checkpointer.inputs import CheckpointerInputCases
from durably.testing.checkpointer.isolation import CheckpointerIsolationCases
from durably.testing.checkpointer.looks import CheckpointerLookCases
from durably.testing.checkpointer.messages import CheckpointerMessageCases
from durably.testing.checkpointer.races import CheckpointerRaceCases
from durably.testing.checkpointer.records import CheckpointerRecordCases
from durably.testing.checkpointer.status import CheckpointerStatusCases
from durably.testing.checkpointer.sweep import CheckpointerSweepCases
from durably.testing.kit import EffectKit


class CheckpointerClaimCases:
    """At most one live pass per workflow, strictly increasing tokens, and lapses."""

    # --- claims ----------------------------------------------------------------------------

    async def test_exactly_one_of_eight_racing_claims_wins(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        passes = await asyncio.gather(*(cp.claim(workflow, LONG, LONG) for _ in range(8)))
        winners = [p for p in passes if p is not None]
        assert len(winners) == 1
        assert winners[0].workflow == workflow

    async def test_a_live_claim_refuses_a_second_claim(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        await claimed(cp, workflow)
        assert await cp.claim(workflow, LONG, LONG) is None

    async def test_tokens_strictly_increase_after_release_discard_and_lapse(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        first = await claimed(cp, workflow)
        await cp.release(first)
        second = await claimed(cp, workflow)
        await cp.discard(workflow)
        third = await claimed(cp, workflow)
        await cp.release(third)
        fourth = await lapse(cp, workflow)
        fifth = await claimed(cp, workflow)
        tokens = [p.token for p in (first, second, third, fourth, fifth)]
        assert all(a < b for a, b in itertools.pairwise(tokens)), tokens

    async def test_claims_on_different_workflows_do_not_interfere(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        a, b = wf("a"), wf("b")
        await claimed(cp, a)
        assert await cp.claim(b, LONG, LONG) is not None

    async def test_a_renewing_pass_keeps_its_claim_past_its_first_alive_window(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, LONG, 0.3)
        assert holder is not None
        for _ in range(6):
            await asyncio.sleep(0.1)
            assert await cp.renew(holder, 0.3)
        assert await cp.claim(workflow, LONG, LONG) is None

    async def test_a_silent_pass_lapses_and_a_new_claim_outranks_it(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await cp.claim(workflow, LONG, 0.2)
        assert old is not None
        await asyncio.sleep(0.35)
        new = await cp.claim(workflow, LONG, LONG)
        assert new is not None
        assert new.token > old.token

    async def test_renewal_cannot_carry_a_pass_past_its_budget(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, 0.4, 0.2)
        assert holder is not None
        started = time.monotonic()
        while time.monotonic() - started < 0.6:
            await cp.renew(holder, 0.2)
            await asyncio.sleep(0.05)
        assert not await cp.renew(holder, 0.2)
        assert await cp.claim(workflow, LONG, LONG) is not None

    async def test_renew_after_the_budget_is_spent_is_false(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, 0.2, 0.2)
        assert holder is not None
        await asyncio.sleep(0.3)
        assert not await cp.renew(holder, LONG)

    async def test_extend_never_shrinks_the_budget(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, LONG, 0.3)
        assert holder is not None
        assert await cp.extend(holder, 0.1, LONG)
        await asyncio.sleep(0.25)
        # A shrunk budget would have been spent by now, and renew would say False.
        assert await cp.renew(holder, LONG)
        assert await cp.claim(workflow, LONG, LONG) is None

    async def test_extend_grows_the_budget_past_the_first_one(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, 0.25, 0.25)
        assert holder is not None
        assert await cp.extend(holder, LONG, LONG)
        await asyncio.sleep(0.4)
        assert await cp.claim(workflow, LONG, LONG) is None
        assert await cp.renew(holder, LONG)

    async def test_a_superseded_pass_cannot_renew_or_extend(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await lapse(cp, workflow)
        await claimed(cp, workflow)
        assert not await cp.renew(old, LONG)
        assert not await cp.extend(old, LONG, LONG)

    async def test_extend_revives_a_lapsed_pass_nobody_else_claimed(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await lapse(cp, workflow)
        assert await cp.extend(holder, LONG, LONG)
        assert await cp.claim(workflow, LONG, LONG) is None
        assert (await cp.record(holder, "k", 1)).first

    async def test_a_pass_the_store_never_handed_out_is_fenced_and_takes_nothing(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        cp = await checkpointer_factory()
        supplied, untouched, counter = wf("supplied"), wf("untouched"), wf("counter")
        await cp.supply(supplied, "input", 1)  # records, but never claimed
        for workflow in (supplied, untouched):
            for token in (0, 1):
                forged = Pass(workflow, token)
                with pytest.raises(Fenced):
                    await cp.record(forged, "k", "forged")
                with pytest.raises(Fenced):
                    await cp.transact(forged, "pay", effect_kit.bump(counter, "forged"))
                with pytest.raises(Fenced):
                    await cp.set_status(forged, WorkflowStatus.RUNNING)
                assert not await cp.renew(forged, LONG)
                assert not await cp.extend(forged, LONG, LONG)
                await cp.release(forged)
            assert await cp.get_status(workflow) is None
            holder = await cp.claim(workflow, LONG, LONG)
            assert holder is not None, "a forged pass must not have taken the workflow"
        assert await effect_kit.count(counter) == 0
        assert await cp.load(supplied) == {"input": 1}
        assert await cp.load(untouched) == {}

    async def test_release_frees_the_workflow_at_once(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.release(holder)
        assert not await cp.renew(holder, LONG)
        assert await cp.claim(workflow, LONG, LONG) is not None

    async def test_a_superseded_pass_releasing_frees_nothing(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await lapse(cp, workflow)
        await claimed(cp, workflow)
        await cp.release(old)
        assert await cp.claim(workflow, LONG, LONG) is None


class CheckpointerConformance(
    CheckpointerClaimCases,
    CheckpointerRaceCases,
    CheckpointerRecordCases,
    CheckpointerInputCases,
    CheckpointerStatusCases,
    CheckpointerFinishCases,
    CheckpointerLookCases,
    CheckpointerIsolationCases,
    CheckpointerSweepCases,
    CheckpointerMessageCases,
):
    """Every test here must pass for every `Checkpointer` durably ships."""


__all__ = ["CheckpointerConformance", "CheckpointerFactory"]
