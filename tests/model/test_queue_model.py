"""The work queue in lockstep: random enqueues, claims, settles, reaps and clock moves,
every answer the same on memory, SQLite, PostgreSQL and Redis."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from durably.memory import MemoryWorkQueue
from durably.postgres import PostgresWorkQueue
from durably.redis import RedisWorkQueue
from durably.sqlite import SqliteWorkQueue
from durably.stores.work import WorkItem, WorkPriority, WorkQueue
from durably.testing.queue.fixtures import POLICY  # small: leases lapse, items dead-letter
from tests.model.lockstep import Backing, Lockstep, Services, canon, drive

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

TENANTS = ("acme", "globex")
IDS = ("i1", "i2", "i3", "i4")
QUEUES = ("default", "other")
WORKERS = ("w1", "w2")


def items(answer: Any) -> object:
    """A list of items in a stable order (reap and adopt report them in store order)."""
    if isinstance(answer, list):
        return canon(sorted(answer, key=lambda item: (item.tenant, item.id)))
    return canon(answer)


class QueueMachine(Lockstep[WorkQueue]):
    """One `WorkQueue` per backing, moved in lockstep."""

    def __init__(self, services: Services) -> None:
        super().__init__(services)
        # (tenant, id, worker) of every claim memory handed out: what settles aim at.
        self.claimed: list[tuple[str, str, str]] = []

    async def build(self) -> list[Backing[WorkQueue]]:
        services = self.services
        memory: Backing[WorkQueue] = Backing("memory", None)  # type: ignore[arg-type]
        memory.store = MemoryWorkQueue(memory.clock, POLICY)
        sqlite: Backing[WorkQueue] = Backing("sqlite", None)  # type: ignore[arg-type]
        sqlite.store = SqliteWorkQueue(await services.database(), clock=sqlite.clock, policy=POLICY)
        postgres: Backing[WorkQueue] = Backing("postgres", None)  # type: ignore[arg-type]
        postgres.store = services.track(
            PostgresWorkQueue(
                services.pool, clock=postgres.clock, policy=POLICY, tables=await services.tables()
            )
        )
        redis: Backing[WorkQueue] = Backing("redis", None)  # type: ignore[arg-type]
        redis.store = RedisWorkQueue(
            services.redis, clock=redis.clock, policy=POLICY, key_prefix=services.namespace()
        )
        return [memory, sqlite, postgres, redis]

    @rule(
        tenant=st.sampled_from(TENANTS),
        item_id=st.sampled_from(IDS),
        queue=st.sampled_from(QUEUES),
        priority=st.sampled_from(list(WorkPriority)),
        dedupe_key=st.sampled_from((None, None, "k1")),
        delay=st.sampled_from((None, None, 0.0, 3.0)),
    )
    def enqueue(
        self,
        tenant: str,
        item_id: str,
        queue: str,
        priority: WorkPriority,
        dedupe_key: str | None,
        delay: float | None,
    ) -> None:
        def call(b: Backing[WorkQueue]) -> Any:
            available = None if delay is None else b.clock.now() + delay
            item = WorkItem(
                id=item_id,
                tenant=tenant,
                queue=queue,
                priority=priority,
                dedupe_key=dedupe_key,
                available_at=available,
                payload={"n": item_id},
            )
            return b.store.enqueue(item)

        self.each(call, label=f"enqueue {tenant}/{item_id} to {queue}")

    @rule(
        worker=st.sampled_from(WORKERS),
        queue=st.sampled_from(QUEUES),
        lease=st.sampled_from((None, None, 3.0, 100.0)),
    )
    def claim(self, worker: str, queue: str, lease: float | None) -> None:
        answers = self.each(
            lambda b: b.store.claim(worker=worker, queue=queue, lease_seconds=lease),
            label=f"claim by {worker} from {queue}",
        )
        taken = answers[0]
        if isinstance(taken, WorkItem):
            self.claimed.append((taken.tenant, taken.id, worker))

    @precondition(lambda self: bool(self.claimed))
    @rule(data=st.data(), how=st.sampled_from(("complete", "fail", "dead", "heartbeat")))
    def settle_a_claimed_item(self, data: st.DataObject, how: str) -> None:
        tenant, item_id, worker = data.draw(st.sampled_from(self.claimed))
        self._settle(how, tenant, item_id, worker)

    @rule(
        tenant=st.sampled_from(TENANTS),
        item_id=st.sampled_from(IDS),
        worker=st.sampled_from(WORKERS),
        how=st.sampled_from(("complete", "fail", "heartbeat")),
    )
    def settle_any_item(self, tenant: str, item_id: str, worker: str, how: str) -> None:
        self._settle(how, tenant, item_id, worker)

    def _settle(self, how: str, tenant: str, item_id: str, worker: str) -> None:
        def call(b: Backing[WorkQueue]) -> Any:
            if how == "complete":
                return b.store.complete(item_id, tenant=tenant, worker=worker)
            if how == "heartbeat":
                return b.store.heartbeat(item_id, tenant=tenant, worker=worker)
            return b.store.fail(
                item_id,
                tenant=tenant,
                worker=worker,
                error=f"{how} {item_id}",
                retryable=how != "dead",
            )

        self.each(call, label=f"{how} {tenant}/{item_id} by {worker}")

    @rule()
    def reap(self) -> None:
        self.each(lambda b: b.store.reap(), items, label="reap")

    @rule(worker=st.sampled_from(WORKERS))
    def adopt(self, worker: str) -> None:
        self.each(lambda b: b.store.adopt(worker=worker), items, label=f"adopt {worker}")

    @rule(
        tenant=st.sampled_from((None, *TENANTS)),
        queue=st.sampled_from((None, *QUEUES)),
        limit=st.sampled_from((1, 2, 50)),
    )
    def dead_letters(self, tenant: str | None, queue: str | None, limit: int) -> None:
        self.each(
            lambda b: b.store.dead_letters(tenant=tenant, queue=queue, limit=limit),
            label=f"dead letters of {tenant} in {queue}",
        )

    @rule(queue=st.sampled_from(QUEUES))
    def stats(self, queue: str) -> None:
        self.each(lambda b: b.store.stats(queue=queue), label=f"stats of {queue}")

    @rule(seconds=st.sampled_from((0.5, 1.0, 3.0, 10.0, 30.0)))
    def advance_clocks(self, seconds: float) -> None:
        self.advance(seconds)


def test_every_backing_answers_a_queue_sequence_alike(services: Services) -> None:
    drive(lambda: QueueMachine(services), examples=6, steps=30)
