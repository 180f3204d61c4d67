"""Invariants under concurrency, on every backing: each rule fires several calls at once on
one store (real concurrent clients on SQLite, PostgreSQL and Redis) and checks what must
hold whatever the interleaving: concurrent claimers never share an item and leave none
behind, of racing completions exactly one wins, concurrent appends get unique keys that
sort after every earlier one and in load order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from durably.errors import LeaseLostError, WorkItemNotFoundError
from durably.memory import MemoryCheckpointer, MemoryWorkQueue
from durably.postgres import PostgresCheckpointer, PostgresWorkQueue
from durably.redis import RedisCheckpointer, RedisWorkQueue
from durably.sqlite import SqliteCheckpointer, SqliteWorkQueue
from durably.stores.work import WorkItem, WorkQueue, WorkState
from durably.stores.workflows import Checkpointer
from durably.testing.queue.fixtures import POLICY
from tests.model.lockstep import Backing, Lockstep, Services, drive

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

TENANTS = ("acme", "globex", "initech")
WORKFLOWS = ("w1", "w2")


@dataclass
class Stores:
    queue: WorkQueue
    checkpointer: Checkpointer[Any]
    queued: set[tuple[str, str]] = field(default_factory=set)
    held: dict[tuple[str, str], str] = field(default_factory=dict)  # item -> worker
    inbox: dict[str, list[str]] = field(default_factory=dict)  # workflow -> keys


class ConcurrentMachine(Lockstep[Stores]):
    """A queue and a checkpointer per backing, each hit by concurrent calls."""

    def __init__(self, services: Services) -> None:
        super().__init__(services)
        self.enqueued = 0

    async def build(self) -> list[Backing[Stores]]:
        services = self.services
        made: list[Backing[Stores]] = []
        for name in ("memory", "sqlite", "postgres", "redis"):
            backing: Backing[Stores] = Backing(name, None)  # type: ignore[arg-type]
            clock = backing.clock
            queue: WorkQueue
            checkpointer: Checkpointer[Any]
            if name == "memory":
                queue, checkpointer = MemoryWorkQueue(clock, POLICY), MemoryCheckpointer()
            elif name == "sqlite":
                database = await services.database()
                queue = SqliteWorkQueue(database, clock=clock, policy=POLICY)
                checkpointer = SqliteCheckpointer(database)
            elif name == "postgres":
                tables = await services.tables()
                queue = services.track(
                    PostgresWorkQueue(services.pool, clock=clock, policy=POLICY, tables=tables)
                )
                checkpointer = PostgresCheckpointer(services.pool, tables=tables)
            else:
                ns = services.namespace()
                queue = RedisWorkQueue(services.redis, clock=clock, policy=POLICY, key_prefix=ns)
                checkpointer = RedisCheckpointer(services.redis, key_prefix=ns)
            backing.store = Stores(queue, checkpointer)
            made.append(backing)
        return made

    def on_every_backing(self, check: Any) -> None:
        """Run ``check(backing)`` on each backing in turn (concurrency is inside it)."""

        async def all_of() -> None:
            for backing in self.backings:
                await check(backing)

        self.services.run(all_of())

    @rule(count=st.integers(1, 6), tenants=st.integers(1, 3))
    def enqueue(self, count: int, tenants: int) -> None:
        first = self.enqueued
        self.enqueued += count

        async def check(b: Backing[Stores]) -> None:
            for n in range(first, first + count):
                item = WorkItem(id=f"i{n}", tenant=TENANTS[n % tenants])
                await b.store.queue.enqueue(item)
                b.store.queued.add((item.tenant, item.id))

        self.on_every_backing(check)

    @rule(claimers=st.integers(2, 8))
    def claim_at_once(self, claimers: int) -> None:
        async def check(b: Backing[Stores]) -> None:
            stores = b.store
            taken = await asyncio.gather(
                *(stores.queue.claim(worker=f"c{n}") for n in range(claimers))
            )
            items = [item for item in taken if item is not None]
            refs = [(item.tenant, item.id) for item in items]
            assert len(set(refs)) == len(refs), f"{b.name}: an item went to two claimers"
            assert set(refs) <= stores.queued, f"{b.name}: a claim took an item not queued"
            assert len(items) == min(claimers, len(stores.queued)), (
                f"{b.name}: {len(items)} of {claimers} claims served, "
                f"{len(stores.queued)} items were queued"
            )
            for item in items:
                assert item.worker is not None
                stores.queued.discard((item.tenant, item.id))
                stores.held[(item.tenant, item.id)] = item.worker

        self.on_every_backing(check)

    def _holding(self) -> bool:
        return bool(self.backings[0].store.held)

    @precondition(_holding)
    @rule(racers=st.integers(2, 5))
    def complete_at_once(self, racers: int) -> None:
        async def check(b: Backing[Stores]) -> None:
            stores = b.store
            (tenant, item_id), worker = min(stores.held.items())
            results = await asyncio.gather(
                *(
                    stores.queue.complete(item_id, tenant=tenant, worker=worker)
                    for _ in range(racers)
                ),
                return_exceptions=True,
            )
            won = [r for r in results if isinstance(r, WorkItem)]
            lost = [r for r in results if isinstance(r, LeaseLostError | WorkItemNotFoundError)]
            assert len(won) == 1, f"{b.name}: {len(won)} of {racers} racing completions won"
            assert len(lost) == racers - 1, f"{b.name}: {results!r}"
            del stores.held[(tenant, item_id)]

        self.on_every_backing(check)

    @precondition(_holding)
    @rule()
    def settle_everything_at_once(self) -> None:
        async def check(b: Backing[Stores]) -> None:
            stores = b.store
            held = sorted(stores.held.items())
            settled = await asyncio.gather(
                *(
                    stores.queue.fail(item_id, tenant=tenant, worker=worker, error="retry")
                    if n % 2
                    else stores.queue.complete(item_id, tenant=tenant, worker=worker)
                    for n, ((tenant, item_id), worker) in enumerate(held)
                )
            )
            for item in settled:
                if item.state is WorkState.QUEUED:  # failed, queued again after its backoff
                    stores.queued.add((item.tenant, item.id))
            stores.held.clear()

        self.on_every_backing(check)
        self.advance(POLICY.backoff_cap_seconds)  # every requeued item is due again

    @rule(workflow=st.sampled_from(WORKFLOWS), appenders=st.integers(2, 8))
    def append_at_once(self, workflow: str, appenders: int) -> None:
        async def check(b: Backing[Stores]) -> None:
            stores = b.store
            entries = await asyncio.gather(
                *(stores.checkpointer.append(workflow, n) for n in range(appenders))
            )
            keys = [entry.key for entry in entries]
            earlier = stores.inbox.setdefault(workflow, [])
            assert len(set(keys)) == appenders, f"{b.name}: two appends got one key"
            assert not earlier or min(keys) > max(earlier), f"{b.name}: a key sorts too early"
            earlier.extend(keys)
            loaded = list(await stores.checkpointer.load(workflow))
            assert loaded == sorted(earlier), f"{b.name}: load order is not append order"

        self.on_every_backing(check)

    @invariant()
    def stats_count_what_was_handed_out(self) -> None:
        async def check(b: Backing[Stores]) -> None:
            stats = await b.store.queue.stats()
            assert (stats.depth, stats.claimed) == (len(b.store.queued), len(b.store.held)), (
                f"{b.name}: {stats}"
            )

        self.on_every_backing(check)


def test_concurrent_calls_keep_every_invariant_on_every_backing(services: Services) -> None:
    drive(lambda: ConcurrentMachine(services), examples=4, steps=20)
