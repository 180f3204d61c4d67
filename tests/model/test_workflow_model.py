"""The scheduler, `Durable` and the retention sweep in lockstep: every answer the same on
memory, SQLite, PostgreSQL and Redis.

Hand-outs stay invisible for the lease on each store's own clock, which no test moves, so a
delivery comes back only through `reclaim`, `done` or `wake_at`. Receipts differ by
backing: a delivery is compared by its workflow. Deadlines are on the caller's clock, which
the machine keeps (``self.now``) and moves.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from durably.memory import MemoryCheckpointer, MemoryDurable, MemoryScheduler
from durably.postgres import PostgresCheckpointer, PostgresDurable, PostgresScheduler
from durably.redis import RedisCheckpointer, RedisDurable, RedisScheduler
from durably.sqlite import SqliteCheckpointer, SqliteDurable, SqliteScheduler
from durably.stores.retention import sweep
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Delivery, Durable, Scheduler, is_inbox_key
from tests.model.lockstep import START, Backing, Lockstep, Services, canon, drive, sweep_out

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

LEASE = 30.0
WORKFLOWS = ("w1", "w2", "w:3 {x}")


def delivered(answer: Any) -> object:
    return answer.workflow if isinstance(answer, Delivery) else canon(answer)


def unordered(answer: Any) -> object:
    return canon(sorted(answer)) if isinstance(answer, list) else canon(answer)


def records(answer: Any) -> object:
    """A load, its inbox keys as their rank (each backing numbers them its own way)."""
    inbox = sorted(key for key in answer if is_inbox_key(key))
    return canon(
        [(f"inbox#{inbox.index(k)}" if is_inbox_key(k) else k, v) for k, v in answer.items()]
    )


class SchedulerMachine(Lockstep[Any]):
    """One `Scheduler` per backing, moved in lockstep."""

    def __init__(self, services: Services) -> None:
        super().__init__(services)
        self.now = START  # the caller's clock, for wake_at and wake_due
        # Deliveries handed out, one per backing each (memory's answer decides).
        self.deliveries: list[list[Delivery]] = []

    def scheduler(self, backing: Backing[Any]) -> Scheduler:
        store: Scheduler = backing.store
        return store

    async def build(self) -> list[Backing[Any]]:
        services = self.services
        made: list[Backing[Any]] = [
            Backing("memory", MemoryScheduler(lease=LEASE)),
            Backing("sqlite", SqliteScheduler(await services.database(), lease=LEASE)),
            Backing(
                "postgres",
                services.track(
                    PostgresScheduler(services.pool, lease=LEASE, tables=await services.tables())
                ),
            ),
            Backing(
                "redis",
                RedisScheduler(services.redis, lease=LEASE, key_prefix=services.namespace()),
            ),
        ]
        for backing in made:
            await self.scheduler(backing).prepare()
        return made

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def make_ready(self, workflow: str) -> None:
        self.each(lambda b: self.scheduler(b).make_ready(workflow), label=f"make_ready {workflow}")

    @rule()
    def next_ready(self) -> None:
        answers = self.each(lambda b: self.scheduler(b).next_ready(0), delivered, "next_ready")
        if isinstance(answers[0], Delivery):
            self.deliveries.append([a for a in answers if isinstance(a, Delivery)])

    def _handed_out(self) -> bool:
        return bool(self.deliveries)

    @precondition(_handed_out)
    @rule(data=st.data(), how=st.sampled_from(("done", "wake_at", "extend")))
    def answer(self, data: st.DataObject, how: str) -> None:
        index = data.draw(st.integers(0, len(self.deliveries) - 1))
        by_backing = dict(zip([b.name for b in self.backings], self.deliveries[index], strict=True))
        when = self.now + data.draw(st.sampled_from((-1.0, 0.0, 5.0, 50.0)))

        def call(b: Backing[Any]) -> Any:
            delivery = by_backing[b.name]
            if how == "done":
                return self.scheduler(b).done(delivery)
            if how == "extend":
                return self.scheduler(b).extend(delivery, 60.0)
            return self.scheduler(b).wake_at(delivery, when)

        self.each(call, label=f"{how} delivery {index} ({self.deliveries[index][0].workflow})")

    @rule()
    def wake_due(self) -> None:
        self.each(lambda b: self.scheduler(b).wake_due(self.now), label="wake_due")

    @rule()
    def reclaim(self) -> None:
        self.each(lambda b: self.scheduler(b).reclaim(0), unordered, label="reclaim(0)")

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def cancel(self, workflow: str) -> None:
        self.each(lambda b: self.scheduler(b).cancel(workflow), label=f"cancel {workflow}")

    @rule(seconds=st.sampled_from((1.0, 5.0, 60.0)))
    def advance_caller_clock(self, seconds: float) -> None:
        self.now += seconds
        self.advance(seconds)


class DurableMachine(SchedulerMachine):
    """One `Durable` per backing: the scheduler's rules, and arrivals, deliveries,
    deletions, finished workflows and the retention sweep across both stores."""

    def scheduler(self, backing: Backing[Any]) -> Scheduler:
        durable: Durable[Any] = backing.store
        return durable.scheduler

    async def build(self) -> list[Backing[Any]]:
        services = self.services
        database = await services.database()
        tables = await services.tables()
        ns = services.namespace()
        made: list[Backing[Any]] = [
            Backing("memory", MemoryDurable(MemoryCheckpointer(), MemoryScheduler(lease=LEASE))),
            Backing(
                "sqlite",
                SqliteDurable(SqliteCheckpointer(database), SqliteScheduler(database, lease=LEASE)),
            ),
            Backing(
                "postgres",
                PostgresDurable(
                    PostgresCheckpointer(services.pool, tables=tables),
                    services.track(PostgresScheduler(services.pool, lease=LEASE, tables=tables)),
                ),
            ),
            Backing(
                "redis",
                RedisDurable(
                    RedisCheckpointer(services.redis, key_prefix=ns),
                    RedisScheduler(services.redis, lease=LEASE, key_prefix=ns),
                ),
            ),
        ]
        for backing in made:
            await self.scheduler(backing).prepare()
        return made

    @rule(
        workflow=st.sampled_from(WORKFLOWS),
        key=st.sampled_from(("approval", "other", "inbox:00000000000000000001")),
        value=st.sampled_from((True, 0.0, -0.0, "yes", None)),
    )
    def arrive(self, workflow: str, key: str, value: object) -> None:
        self.each(
            lambda b: b.store.arrive(workflow, key, value),
            lambda answer: canon((answer.value, answer.first)),
            label=f"arrive {workflow}/{key}",
        )

    @rule(workflow=st.sampled_from(WORKFLOWS), value=st.sampled_from(({"m": 1}, "hi", 2)))
    def deliver(self, workflow: str, value: object) -> None:
        self.each(
            lambda b: b.store.deliver(workflow, value),
            lambda answer: canon(answer.value),
            label=f"deliver to {workflow}",
        )

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def delete(self, workflow: str) -> None:
        self.each(lambda b: b.store.delete(workflow), label=f"delete {workflow}")

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def load(self, workflow: str) -> None:
        self.each(lambda b: b.store.checkpointer.load(workflow), records, f"load {workflow}")

    @rule(
        workflow=st.sampled_from(WORKFLOWS),
        status=st.sampled_from((WorkflowStatus.COMPLETED, WorkflowStatus.FAILED)),
    )
    def finish(self, workflow: str, status: WorkflowStatus) -> None:
        """A pass that ends the workflow: claim, report, release (None if it was held)."""

        async def call(b: Backing[Any]) -> object:
            checkpointer = b.store.checkpointer
            holder = await checkpointer.claim(workflow, 3600.0, 3600.0)
            if holder is None:
                return None
            await checkpointer.set_status(holder, status)
            await checkpointer.release(holder)
            return (await checkpointer.get_status(workflow)).status

        self.each(call, label=f"finish {workflow} as {status}")

    @rule(everything=st.booleans(), limit=st.integers(1, 3))
    def retention_sweep(self, everything: bool, limit: int) -> None:
        cutoff = datetime.now(UTC) + timedelta(hours=1 if everything else -1)

        def call(b: Backing[Any]) -> Awaitable[object]:
            return sweep_out(
                lambda n, note: sweep(b.store, finished_before=cutoff, limit=n, on_swept=note),
                limit,
            )

        self.each(call, label=f"sweep everything={everything} limit={limit}")


def test_every_backing_answers_a_scheduler_sequence_alike(services: Services) -> None:
    drive(lambda: SchedulerMachine(services), examples=4, steps=25)


def test_every_backing_answers_a_durable_sequence_alike(services: Services) -> None:
    drive(lambda: DurableMachine(services), examples=5, steps=30)
