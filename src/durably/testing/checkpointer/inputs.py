"""`CheckpointerConformance` cases for `supply`, `append`, `history` and `discard`."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durably.errors import Fenced, InvalidInputError
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import INBOX_PREFIX
from durably.testing.checkpointer.fixtures import (
    LONG,
    CheckpointerFactory,
    claimed,
    wf,
)
from durably.testing.kit import EffectKit


class CheckpointerInputCases:
    """Values and messages from outside a pass, landing times, and starting over."""

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

    async def test_racing_supplies_of_one_key_leave_exactly_one_winner(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        results = await asyncio.gather(*(cp.supply(workflow, "k", n) for n in range(8)))
        assert sum(r.first for r in results) == 1
        assert len({r.value for r in results}) == 1
        assert await cp.load(workflow) == {"k": results[0].value}

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

    async def test_keys_in_the_inbox_key_space_are_refused_before_anything_is_written(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        # The store names inbox keys: a value written under one would be reported by a
        # later `append` as that message's (or hide it), so no write may take one.
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        taken = f"{INBOX_PREFIX}{1:020d}"
        counter = f"inbox-{workflow}"
        writes: list[Callable[[], Awaitable[object]]] = [
            lambda: cp.supply(workflow, taken, "forged"),
            lambda: cp.record(holder, taken, "forged"),
            lambda: cp.transact(holder, taken, effect_kit.bump(counter, "forged")),
            lambda: cp.supply(workflow, INBOX_PREFIX, "forged"),
        ]
        for write in writes:
            with pytest.raises(InvalidInputError, match="inbox"):
                await write()
        assert await effect_kit.count(counter) == 0
        assert await cp.load(workflow) == {}
        entry = await cp.append(workflow, {"message": 1})
        assert await cp.load(workflow) == {entry.key: {"message": 1}}
        assert (await cp.supply(workflow, "inbox", "fine")).first  # only the prefix is taken

    async def test_negative_zero_is_recorded_as_zero(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        # PostgreSQL's jsonb holds no negative zero; every backing records it as 0.0, so
        # a later 0.0 is an equal write everywhere and the value reads back alike.
        cp = await checkpointer_factory()
        workflow = wf()
        first = await cp.supply(workflow, "k", -0.0)
        second = await cp.supply(workflow, "k", 0.0)
        assert (first.first, second.first) == (True, True)
        holder = await claimed(cp, workflow)
        recorded = await cp.record(holder, "nested", {"x": [-0.0, "-0.0"]})
        assert (await cp.record(holder, "nested", {"x": [0.0, "-0.0"]})).first
        loaded: dict[str, Any] = await cp.load(workflow)
        for value in (first.value, second.value, loaded["k"], loaded["nested"]["x"][0]):
            assert isinstance(value, float)
            assert (value, math.copysign(1.0, value)) == (0.0, 1.0)
        assert recorded.value == loaded["nested"] == {"x": [0.0, "-0.0"]}

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
        now = datetime.now(UTC)
        assert all(abs(now - t) < timedelta(minutes=1) for t in times)
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
