"""`DurableConformance`: the workflow transitions that cross checkpointer and scheduler.

Subclass it and provide ``durable_factory``: ``Callable[[], Awaitable[Durable[Any]]]``, each
call a durable over an empty, isolated namespace (the subclass cleans up).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from durably.errors import Fenced, InvalidInputError
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import INBOX_PREFIX, Delivery, Durable, Scheduler
from durably.testing.durable.passes import DurableFactory, DurablePassCases
from durably.testing.refused import UNSTORABLE_TEXTS, UNUSABLE_IDS

LONG = 30.0
T0 = 1_000_000.0  # an instant on the caller's clock

# Suffixes where one id is a prefix, a glob or a pattern of another.
NEAR = ("", ":", "*", "?", "[ab]", "%", "_", "{x}", " ", ":y", "}", "{")


def wf(label: str = "wf") -> str:
    """A workflow id no other test uses."""
    return f"{label}-{uuid.uuid4().hex[:12]}"


async def prepared(durable_factory: DurableFactory) -> Durable[Any]:
    durable = await durable_factory()
    await durable.scheduler.prepare()
    return durable


async def take(scheduler: Scheduler, workflow: str) -> Delivery:
    delivery = await scheduler.next_ready(0)
    assert delivery is not None, f"{workflow} should have been delivered"
    assert delivery.workflow == workflow
    return delivery


class DurableConformance(DurablePassCases):
    """Every test here must pass for every `Durable` durably ships."""

    async def test_arrive_records_first_writer_wins_and_makes_the_workflow_ready(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        first = await durable.arrive(workflow, "approval", {"ok": True})
        assert (first.value, first.first) == ({"ok": True}, True)
        second = await durable.arrive(workflow, "approval", {"ok": False})
        assert (second.value, second.first) == ({"ok": True}, False)
        assert await durable.checkpointer.load(workflow) == {"approval": {"ok": True}}
        await take(durable.scheduler, workflow)
        assert await durable.scheduler.next_ready(0) is None

    async def test_deliver_appends_an_inbox_message_and_makes_the_workflow_ready(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        one = await durable.deliver(workflow, {"text": "hello"})
        two = await durable.deliver(workflow, {"text": "again"})
        assert one.key.startswith(INBOX_PREFIX)
        assert one.key < two.key
        assert (one.value, two.value) == ({"text": "hello"}, {"text": "again"})
        assert await durable.checkpointer.load(workflow) == {
            one.key: {"text": "hello"},
            two.key: {"text": "again"},
        }
        await take(durable.scheduler, workflow)
        assert await durable.scheduler.next_ready(0) is None

    async def test_arrive_refuses_a_key_in_the_inbox_key_space(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        with pytest.raises(InvalidInputError, match="inbox"):
            await durable.arrive(workflow, f"{INBOX_PREFIX}{1:020d}", "forged")
        assert await durable.checkpointer.load(workflow) == {}
        assert await durable.scheduler.next_ready(0) is None
        entry = await durable.deliver(workflow, "real")
        assert await durable.checkpointer.load(workflow) == {entry.key: "real"}

    async def test_concurrent_deliveries_all_land_in_order_under_one_wakeup(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        entries = await asyncio.gather(*(durable.deliver(workflow, n) for n in range(10)))
        keys = sorted(e.key for e in entries)
        assert len(set(keys)) == 10
        assert list(await durable.checkpointer.load(workflow)) == keys
        await take(durable.scheduler, workflow)
        assert await durable.scheduler.next_ready(0) is None

    async def test_a_value_arriving_mid_pass_survives_the_passes_acknowledgement(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        await durable.scheduler.make_ready(workflow)
        delivery = await take(durable.scheduler, workflow)
        await durable.arrive(workflow, "input", 42)
        await durable.scheduler.done(delivery)
        await take(durable.scheduler, workflow)

    async def test_a_message_arriving_mid_pass_is_not_pushed_out_by_its_sleep(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        await durable.scheduler.make_ready(workflow)
        delivery = await take(durable.scheduler, workflow)
        await durable.deliver(workflow, "wake up")
        await durable.scheduler.wake_at(delivery, T0 + 10_000)
        await take(durable.scheduler, workflow)

    async def test_arrive_wakes_a_sleeping_workflow(self, durable_factory: DurableFactory) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        await durable.scheduler.make_ready(workflow)
        await durable.scheduler.wake_at(await take(durable.scheduler, workflow), T0 + 10_000)
        assert await durable.scheduler.next_ready(0) is None
        await durable.arrive(workflow, "input", "now")
        await take(durable.scheduler, workflow)

    async def test_delete_cancels_discards_counts_and_fences(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        workflow, bystander = wf(), wf("bystander")
        cp = durable.checkpointer
        holder = await cp.claim(workflow, LONG, LONG)
        assert holder is not None
        await cp.record(holder, "step", 1)
        await cp.set_status(holder, WorkflowStatus.RUNNING)
        await durable.arrive(workflow, "input", 2)
        await durable.deliver(workflow, 3)
        await durable.arrive(bystander, "input", "kept")
        assert await durable.delete(workflow) == 3
        with pytest.raises(Fenced):
            await cp.record(holder, "late", 4)
        assert await cp.load(workflow) == {}
        assert await cp.get_status(workflow) is None
        again = await cp.claim(workflow, LONG, LONG)
        assert again is not None
        assert again.token > holder.token
        await take(durable.scheduler, bystander)
        assert await durable.scheduler.next_ready(0) is None
        assert await cp.load(bystander) == {"input": "kept"}

    async def test_delete_removes_a_sleeping_or_in_flight_wakeup(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        sleeping, flying = wf("sleeping"), wf("flying")
        scheduler = durable.scheduler
        await scheduler.make_ready(sleeping)
        await scheduler.wake_at(await take(scheduler, sleeping), T0 + 10)
        await scheduler.make_ready(flying)
        in_flight = await take(scheduler, flying)
        assert await durable.delete(sleeping) == 0
        assert await durable.delete(flying) == 0
        await scheduler.done(in_flight)
        assert await scheduler.wake_due(T0 + 1000) == 0
        assert await scheduler.reclaim(0) == []
        assert await scheduler.next_ready(0) is None

    async def test_a_deleted_workflow_can_start_over(self, durable_factory: DurableFactory) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        await durable.arrive(workflow, "input", "old")
        await durable.delete(workflow)
        fresh = await durable.arrive(workflow, "input", "new")
        assert (fresh.value, fresh.first) == ("new", True)
        await take(durable.scheduler, workflow)

    async def test_near_ids_arrive_deliver_and_delete_as_exactly_themselves(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        base = f"w{uuid.uuid4().hex[:8]}"
        workflows = [base + suffix for suffix in NEAR]
        for workflow in workflows:
            for suffix in NEAR:
                await durable.arrive(workflow, f"k{suffix}", [workflow, suffix])
            await durable.deliver(workflow, workflow)
        doomed = base + "*"
        assert await durable.delete(doomed) == len(NEAR) + 1
        for workflow in workflows:
            loaded = await durable.checkpointer.load(workflow)
            if workflow == doomed:
                assert loaded == {}
                continue
            assert [loaded[f"k{suffix}"] for suffix in NEAR] == [[workflow, s] for s in NEAR]
            assert [v for k, v in loaded.items() if k.startswith(INBOX_PREFIX)] == [workflow]
        taken = set()
        while (delivery := await durable.scheduler.next_ready(0)) is not None:
            taken.add(delivery.workflow)
        assert taken == set(workflows) - {doomed}

    async def test_unusable_ids_are_refused(self, durable_factory: DurableFactory) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        for bad in UNUSABLE_IDS:
            with pytest.raises(InvalidInputError):
                await durable.arrive(bad, "k", 1)
            with pytest.raises(InvalidInputError):
                await durable.arrive(workflow, bad, 1)
            with pytest.raises(InvalidInputError):
                await durable.deliver(bad, 1)
            with pytest.raises(InvalidInputError):
                await durable.delete(bad)
        assert await durable.checkpointer.load(workflow) == {}
        assert await durable.scheduler.next_ready(0) is None

    async def test_arrive_and_deliver_make_a_workflow_ready_in_its_tenants_turn(
        self, durable_factory: DurableFactory
    ) -> None:
        # Ids of one tenant sort before the other's: served by id they would not alternate.
        durable = await prepared(durable_factory)
        tag = uuid.uuid4().hex[:8]
        tenants = {"da": [f"a{n}-{tag}" for n in range(2)], "db": [f"b{n}-{tag}" for n in range(2)]}
        for tenant, (arriving, delivered) in tenants.items():
            await durable.arrive(arriving, "input", 1, tenant=tenant)
            await durable.deliver(delivered, "hi", tenant=tenant)
        owner = {w: tenant for tenant, names in tenants.items() for w in names}
        order = []
        while (delivery := await durable.scheduler.next_ready(0)) is not None:
            order.append(owner[delivery.workflow])
        assert order == ["da", "db"] * 2

    async def test_an_unusable_tenant_is_refused_before_anything_is_written(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        for bad in UNUSABLE_IDS:
            with pytest.raises(InvalidInputError, match="tenant"):
                await durable.arrive(workflow, "k", 1, tenant=bad)
            with pytest.raises(InvalidInputError, match="tenant"):
                await durable.deliver(workflow, 1, tenant=bad)
        assert await durable.checkpointer.load(workflow) == {}
        assert await durable.scheduler.next_ready(0) is None

    async def test_values_holding_text_no_backing_can_store_are_refused_and_wake_nothing(
        self, durable_factory: DurableFactory
    ) -> None:
        durable = await prepared(durable_factory)
        workflow = wf()
        for bad in UNSTORABLE_TEXTS:
            for value in (bad, {"k": [bad]}, {bad: 1}):
                with pytest.raises(InvalidInputError):
                    await durable.arrive(workflow, "k", value)
                with pytest.raises(InvalidInputError):
                    await durable.deliver(workflow, value)
        assert await durable.checkpointer.load(workflow) == {}
        assert await durable.scheduler.next_ready(0) is None


__all__ = ["DurableConformance", "DurableFactory"]
