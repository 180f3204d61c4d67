"""`CheckpointerConformance`: the promises of SPEC §4 every `Checkpointer` keeps.

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
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from durably.errors import Fenced
from durably.status import WorkflowStatus
from durably.testing.kit import EffectKit
from durably.workflows import INBOX_PREFIX, Checkpointer, Pass

CheckpointerFactory = Callable[[], Awaitable[Checkpointer[Any]]]

LONG = 30.0  # a budget or liveness window no test outlives

STRANGE_IDS = (
    "{braces}",
    "quo\"tes'",
    "semi;colon",
    "co:lon",
    "co:lon:",
    "100%",
    "with space",
    "emoji 🚀",
    "{a}:1:b",
    "%s%d",
)


def wf(label: str = "wf") -> str:
    """A workflow id no other test uses."""
    return f"{label}-{uuid.uuid4().hex[:12]}"


async def claimed(cp: Checkpointer[Any], workflow: str, budget: float = LONG) -> Pass:
    holder = await cp.claim(workflow, budget, LONG if budget >= LONG else budget)
    assert holder is not None, f"{workflow} should have been free to claim"
    return holder


async def lapse(cp: Checkpointer[Any], workflow: str) -> Pass:
    """Claim ``workflow`` with a short liveness window and let it lapse."""
    holder = await cp.claim(workflow, LONG, 0.15)
    assert holder is not None
    await asyncio.sleep(0.25)
    return holder


class CheckpointerConformance:
    """Every test here must pass for every `Checkpointer` durably ships."""

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

    # --- records ---------------------------------------------------------------------------

    async def test_a_write_is_a_sign_of_life(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, LONG, 0.25)
        assert holder is not None
        for step in range(6):
            await asyncio.sleep(0.1)
            await cp.record(holder, f"step-{step}", step)
        assert await cp.claim(workflow, LONG, LONG) is None

    async def test_a_fenced_write_raises_writes_nothing_and_renews_nobody(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await lapse(cp, workflow)
        new = await cp.claim(workflow, LONG, 0.4)
        assert new is not None
        await asyncio.sleep(0.25)
        with pytest.raises(Fenced) as raised:
            await cp.record(old, "late", "stale")
        assert raised.value.workflow == workflow
        assert raised.value.token == old.token
        assert await cp.load(workflow) == {}
        # Renewing the live pass would have kept it until ~0.65 s after its claim.
        await asyncio.sleep(0.3)
        assert await cp.claim(workflow, LONG, LONG) is not None

    async def test_a_released_workflow_is_not_taken_back_by_a_write_in_flight(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.release(holder)
        written = await cp.record(holder, "in-flight", 1)
        assert written.first
        assert await cp.claim(workflow, LONG, LONG) is not None

    async def test_the_first_write_wins_and_the_loser_gets_the_winners_value(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        first = await cp.record(holder, "k", {"n": 1})
        assert (first.value, first.first) == ({"n": 1}, True)
        second = await cp.record(holder, "k", {"n": 2})
        assert (second.value, second.first) == ({"n": 1}, False)
        assert await cp.load(workflow) == {"k": {"n": 1}}

    async def test_a_later_pass_losing_a_write_gets_the_earlier_value(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await claimed(cp, workflow)
        await cp.record(old, "k", "old")
        await cp.release(old)
        new = await claimed(cp, workflow)
        lost = await cp.record(new, "k", "new")
        assert (lost.value, lost.first) == ("old", False)

    async def test_an_equal_value_counts_as_this_passes_own_write(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.record(holder, "k", {"b": 2, "a": 1})
        again = await cp.record(holder, "k", {"a": 1, "b": 2})
        assert (again.value, again.first) == ({"a": 1, "b": 2}, True)

    async def test_a_value_the_codec_reshapes_still_counts_as_this_passes_own(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        first = await cp.record(holder, "pair", (1, "two"))
        assert first.first
        assert first.value == cp.codec.decode(cp.codec.encode((1, "two")))
        again = await cp.record(holder, "pair", (1, "two"))
        assert again.first
        assert again.value == first.value

    async def test_json_null_is_a_recorded_value_that_is_never_replaced(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        first = await cp.record(holder, "nothing", None)
        assert (first.value, first.first) == (None, True)
        second = await cp.record(holder, "nothing", "something")
        assert (second.value, second.first) == (None, False)
        assert await cp.load(workflow) == {"nothing": None}

    async def test_racing_writes_of_one_key_leave_exactly_one_winner(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        results = await asyncio.gather(*(cp.record(holder, "k", n) for n in range(8)))
        assert sum(r.first for r in results) == 1
        winner = next(r.value for r in results if r.first)
        assert all(r.value == winner for r in results)
        assert await cp.load(workflow) == {"k": winner}

    async def test_load_keeps_first_recorded_order_not_key_order(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        for key in ("b", "a", "c", "inbox-like", "A"):
            await cp.record(holder, key, key.upper())
        await cp.record(holder, "a", "loser")
        assert list((await cp.load(workflow)).items()) == [
            ("b", "B"),
            ("a", "A"),
            ("c", "C"),
            ("inbox-like", "INBOX-LIKE"),
            ("A", "A"),
        ]

    async def test_values_of_every_json_shape_round_trip(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        values: dict[str, object] = {
            "int": 7,
            "float": 2.5,
            "text": 'héllo 🚀 "quoted" {braces}; 100%',
            "list": [1, [2, None], {"x": True}],
            "dict": {"nested": {"deep": [False]}},
            "empty": "",
            "false": False,
        }
        for key, value in values.items():
            await cp.record(holder, key, value)
        assert await cp.load(workflow) == values

    # --- transact --------------------------------------------------------------------------

    async def test_transact_runs_its_effect_once_across_passes(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        first = await claimed(cp, workflow)
        done = await cp.transact(first, "pay", effect_kit.bump(counter, "paid"))
        assert (done.value, done.first) == ("paid", True)
        await cp.release(first)
        second = await claimed(cp, workflow)
        again = await cp.transact(second, "pay", effect_kit.bump(counter, "paid twice"))
        assert (again.value, again.first) == ("paid", False)
        assert await effect_kit.count(counter) == 1
        assert await cp.load(workflow) == {"pay": "paid"}

    async def test_racing_transacts_of_one_key_commit_one_effect(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        holder = await claimed(cp, workflow)
        results = await asyncio.gather(
            *(cp.transact(holder, "pay", effect_kit.bump(counter, n)) for n in range(8))
        )
        assert await effect_kit.count(counter) == 1
        assert sum(r.first for r in results) == 1
        assert len({repr(r.value) for r in results}) == 1

    async def test_transact_refuses_a_superseded_pass_before_the_effect(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        old = await lapse(cp, workflow)
        await claimed(cp, workflow)
        with pytest.raises(Fenced):
            await cp.transact(old, "pay", effect_kit.bump(counter, "paid"))
        assert await effect_kit.count(counter) == 0
        assert await cp.load(workflow) == {}

    async def test_a_failing_effect_leaves_neither_record_nor_counter(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        holder = await claimed(cp, workflow)
        with pytest.raises(RuntimeError):
            await cp.transact(holder, "pay", effect_kit.bump_then_fail(counter))
        assert await effect_kit.count(counter) == 0
        assert await cp.load(workflow) == {}
        retried = await cp.transact(holder, "pay", effect_kit.bump(counter, "paid"))
        assert retried.first
        assert await effect_kit.count(counter) == 1

    # --- supply, append --------------------------------------------------------------------

    async def test_supply_is_first_writer_wins_and_needs_no_claim(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        first = await cp.supply(workflow, "approval", {"ok": True})
        assert (first.value, first.first) == ({"ok": True}, True)
        second = await cp.supply(workflow, "approval", {"ok": False})
        assert (second.value, second.first) == ({"ok": True}, False)
        assert await cp.load(workflow) == {"approval": {"ok": True}}
        # Supplying took no claim, and a live pass does not stop a supply.
        holder = await claimed(cp, workflow)
        assert (await cp.supply(workflow, "other", 2)).first
        assert (await cp.record(holder, "approval", {"ok": False})).value == {"ok": True}

    async def test_append_keys_are_inbox_keys_in_append_order(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        entries = [await cp.append(workflow, {"message": n}) for n in range(5)]
        keys = [e.key for e in entries]
        assert all(key.startswith(INBOX_PREFIX) for key in keys)
        assert keys == sorted(keys)
        assert len(set(keys)) == 5
        assert [e.value for e in entries] == [{"message": n} for n in range(5)]
        assert await cp.load(workflow) == {e.key: e.value for e in entries}
        assert list(await cp.load(workflow)) == keys

    async def test_concurrent_appends_get_unique_keys_that_sort_in_load_order(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        entries = await asyncio.gather(*(cp.append(workflow, n) for n in range(16)))
        keys = [e.key for e in entries]
        assert len(set(keys)) == 16
        assert all(key.startswith(INBOX_PREFIX) for key in keys)
        loaded = await cp.load(workflow)
        assert list(loaded) == sorted(keys)
        assert sorted(loaded.values(), key=repr) == sorted(range(16), key=repr)

    async def test_appends_and_records_share_one_first_recorded_order(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.record(holder, "z-step", 1)
        entry = await cp.append(workflow, "hello")
        await cp.supply(workflow, "a-input", 2)
        assert list(await cp.load(workflow)) == ["z-step", entry.key, "a-input"]

    # --- history, unknown workflows --------------------------------------------------------

    async def test_history_times_are_aware_ordered_and_unmoved_by_a_losing_write(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        for key in ("b", "a", "c"):
            await cp.record(holder, key, key)
            await asyncio.sleep(0.01)
        before = await cp.history(workflow)
        assert list(before) == ["b", "a", "c"]
        times = [written.at for written in before.values()]
        assert all(t.tzinfo is not None and t.utcoffset() == timedelta(0) for t in times)
        assert times == sorted(times)
        await asyncio.sleep(0.05)
        await cp.record(holder, "a", "loser")
        after = await cp.history(workflow)
        assert after == before
        assert {key: w.value for key, w in after.items()} == {"b": "b", "a": "a", "c": "c"}

    async def test_an_unknown_workflow_loads_empty_and_creates_nothing(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        assert await cp.load(workflow) == {}
        assert await cp.history(workflow) == {}
        assert await cp.get_status(workflow) is None
        assert await cp.list_status() == []
        assert await cp.discard(workflow) == 0

    # --- discard ---------------------------------------------------------------------------

    async def test_discard_counts_fences_and_lets_the_workflow_start_over(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow, bystander = wf(), wf("bystander")
        holder = await claimed(cp, workflow)
        await cp.record(holder, "one", 1)
        await cp.supply(workflow, "two", 2)
        await cp.append(workflow, 3)
        await cp.set_status(holder, WorkflowStatus.RUNNING)
        await cp.supply(bystander, "kept", True)
        assert await cp.discard(workflow) == 3
        with pytest.raises(Fenced):
            await cp.record(holder, "late", 4)
        assert not await cp.renew(holder, LONG)
        assert await cp.get_status(workflow) is None
        again = await cp.claim(workflow, LONG, LONG)
        assert again is not None
        assert again.token > holder.token
        assert await cp.load(workflow) == {}
        assert await cp.history(workflow) == {}
        assert await cp.load(bystander) == {"kept": True}

    # --- identifiers and arguments ---------------------------------------------------------

    async def test_strange_ids_address_exactly_themselves(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        tag = uuid.uuid4().hex[:8]
        workflows = [f"{strange}{tag}" for strange in STRANGE_IDS] + [f"{tag}"]
        for n, workflow in enumerate(workflows):
            holder = await claimed(cp, workflow)
            for strange in STRANGE_IDS:
                await cp.record(holder, strange, [workflow, strange, n])
            await cp.set_status(holder, WorkflowStatus.SLEEPING, attempts=n)
        for n, workflow in enumerate(workflows):
            assert await cp.load(workflow) == {s: [workflow, s, n] for s in STRANGE_IDS}
            info = await cp.get_status(workflow)
            assert info is not None
            assert (info.workflow, info.attempts) == (workflow, n)
        assert [i.workflow for i in await cp.list_status()] == sorted(workflows)

    async def test_empty_and_nul_ids_are_refused(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        for bad in ("", "nul\x00inside"):
            with pytest.raises(ValueError):
                await cp.load(bad)
            with pytest.raises(ValueError):
                await cp.claim(bad, LONG, LONG)
            with pytest.raises(ValueError):
                await cp.record(holder, bad, 1)
            with pytest.raises(ValueError):
                await cp.supply(bad, "k", 1)
            with pytest.raises(ValueError):
                await cp.supply(workflow, bad, 1)
            with pytest.raises(ValueError):
                await cp.append(bad, 1)
            with pytest.raises(ValueError):
                await cp.history(bad)
            with pytest.raises(ValueError):
                await cp.discard(bad)
            with pytest.raises(ValueError):
                await cp.get_status(bad)
        assert await cp.load(workflow) == {}

    @pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
    async def test_non_positive_durations_are_refused(
        self, checkpointer_factory: CheckpointerFactory, bad: float
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        with pytest.raises(ValueError):
            await cp.claim(workflow, bad, LONG)
        with pytest.raises(ValueError):
            await cp.claim(workflow, LONG, bad)
        holder = await claimed(cp, workflow)
        with pytest.raises(ValueError):
            await cp.renew(holder, bad)
        with pytest.raises(ValueError):
            await cp.extend(holder, bad, LONG)
        with pytest.raises(ValueError):
            await cp.extend(holder, LONG, bad)
        assert await cp.claim(workflow, LONG, LONG) is None

    # --- status ----------------------------------------------------------------------------

    async def test_status_is_set_read_and_replaced(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        info = await cp.set_status(holder, WorkflowStatus.RUNNING)
        assert (info.workflow, info.status, info.attempts, info.last_error) == (
            workflow,
            WorkflowStatus.RUNNING,
            0,
            None,
        )
        assert info.updated_at.tzinfo is not None
        failed = await cp.set_status(holder, WorkflowStatus.FAILED, attempts=3, error="boom 💥")
        assert await cp.get_status(workflow) == failed
        assert (failed.status, failed.attempts, failed.last_error) == (
            WorkflowStatus.FAILED,
            3,
            "boom 💥",
        )
        assert failed.updated_at >= info.updated_at

    async def test_status_is_fenced_for_a_superseded_pass(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await lapse(cp, workflow)
        new = await claimed(cp, workflow)
        await cp.set_status(new, WorkflowStatus.SLEEPING)
        with pytest.raises(Fenced):
            await cp.set_status(old, WorkflowStatus.COMPLETED)
        info = await cp.get_status(workflow)
        assert info is not None
        assert info.status is WorkflowStatus.SLEEPING

    async def test_status_lists_by_status_in_id_order_with_after_paging(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        tag = uuid.uuid4().hex[:6]
        ids = [f"{tag}-{suffix}" for suffix in ("b", "B", "a", "é", "😀", "a b", "Z", "c")]
        for n, workflow in enumerate(ids):
            holder = await claimed(cp, workflow)
            status = WorkflowStatus.COMPLETED if n % 2 else WorkflowStatus.BLOCKED
            await cp.set_status(holder, status)
        everything = [i.workflow for i in await cp.list_status()]
        assert everything == sorted(ids)
        done = [i.workflow for i in await cp.list_status(status=WorkflowStatus.COMPLETED)]
        assert done == sorted(ids[1::2])
        assert all(
            i.status is WorkflowStatus.BLOCKED
            for i in await cp.list_status(status=WorkflowStatus.BLOCKED)
        )
        assert await cp.list_status(status=WorkflowStatus.RUNNING) == []
        pages: list[str] = []
        after: str | None = None
        while True:
            page = await cp.list_status(limit=3, after=after)
            if not page:
                break
            assert len(page) <= 3
            pages.extend(i.workflow for i in page)
            after = page[-1].workflow
        assert pages == sorted(ids)
        first_done = done[0]
        later = await cp.list_status(status=WorkflowStatus.COMPLETED, after=first_done, limit=2)
        assert [i.workflow for i in later] == done[1:3]
