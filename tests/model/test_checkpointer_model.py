"""The checkpointer in lockstep: claims, fenced records, supplies, appends (unless finished
too), named reads, forgotten messages, restarts, statuses, finishes, discards and the
retention sweep, every answer the same on memory, SQLite, PostgreSQL and Redis.

Leases run on each store's own clock, which no test moves: claims here are long, so one
lapses only when released. Tokens and inbox keys are numbered differently by each backing
(PostgreSQL draws both from one global sequence): a pass is compared as "a pass", and an
inbox key by its rank among the workflow's messages.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from durably.memory import MemoryCheckpointer, MemoryEffectKit
from durably.postgres import PostgresCheckpointer, StateTables
from durably.redis import RedisCheckpointer, RedisEffectKit
from durably.sqlite import Database, SqliteCheckpointer
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.workflows import Checkpointer, Entry, Pass, Recorded, Written, is_inbox_key
from durably.testing.checkpointer.finish import finishing
from durably.testing.kit import EffectKit
from tests.model.lockstep import Backing, Lockstep, Services, canon, drive, sweep_out

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

LONG = 3600.0
WORKFLOWS = ("w1", "w2", "w:3 {x}")
KEYS = ("a", "b", "c", "inbox:00000000000000000001")
STATUSES = (
    WorkflowStatus.RUNNING,
    WorkflowStatus.COMPLETED,
    WorkflowStatus.FAILED,
    WorkflowStatus.CANCELLED,
)
RANKS = st.lists(st.integers(1, 4), max_size=3)
"""Messages named by their rank among a workflow's appends (a rank never appended names a
key no backing has)."""

VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.sampled_from((0.0, -0.0, 1.5, 1e20, -2.5e-7, 10**20)),
        st.text(alphabet='ab"\\é🚀 -0.', max_size=4),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner),
    max_leaves=6,
)


class SqliteCounters:
    """`transact` effects bumping a counter table in the checkpointer's SQLite file."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def bump(self, counter: str, value: object) -> Any:
        def effect(cursor: sqlite3.Cursor) -> object:
            cursor.execute("CREATE TABLE IF NOT EXISTS model_counters (name TEXT PRIMARY KEY, n)")
            cursor.execute(
                "INSERT INTO model_counters VALUES (?, 1) ON CONFLICT DO UPDATE SET n = n + 1",
                (counter,),
            )
            return value

        return effect

    def bump_then_fail(self, counter: str) -> Any:
        bump = self.bump(counter, None)

        def effect(cursor: sqlite3.Cursor) -> object:
            bump(cursor)
            raise RuntimeError(f"effect on {counter} failed after its write")

        return effect

    async def count(self, counter: str) -> int:
        def read(cursor: sqlite3.Cursor) -> int:
            cursor.execute("CREATE TABLE IF NOT EXISTS model_counters (name TEXT PRIMARY KEY, n)")
            row = cursor.execute("SELECT n FROM model_counters WHERE name = ?", (counter,))
            found = row.fetchone()
            return 0 if found is None else int(found[0])

        return await self._database.transaction(lambda tx: read(tx.cursor()))


class PostgresCounters:
    """`transact` effects bumping a counter table in the checkpointer's schema (psycopg)."""

    def __init__(self, pool: Any, tables: StateTables) -> None:
        self._pool = pool
        self._table = f'"{tables.schema}".model_counters'

    async def create(self) -> PostgresCounters:
        async with self._pool.connection() as connection:
            await connection.execute(f"CREATE TABLE {self._table} (name text PRIMARY KEY, n int)")
        return self

    def bump(self, counter: str, value: object) -> Any:
        async def effect(cursor: Any) -> object:
            await cursor.execute(
                f"INSERT INTO {self._table} VALUES (%s, 1) "
                "ON CONFLICT (name) DO UPDATE SET n = model_counters.n + 1",
                (counter,),
            )
            return value

        return effect

    def bump_then_fail(self, counter: str) -> Any:
        bump = self.bump(counter, None)

        async def effect(cursor: Any) -> object:
            await bump(cursor)
            raise RuntimeError(f"effect on {counter} failed after its write")

        return effect

    async def count(self, counter: str) -> int:
        async with self._pool.connection() as connection:
            cursor = await connection.execute(
                f"SELECT n FROM {self._table} WHERE name = %s", (counter,)
            )
            found = await cursor.fetchone()
        return 0 if found is None else int(found[0])


def info(answer: Any) -> object:
    """A status without its time (the store's clock)."""
    if isinstance(answer, WorkflowInfo):
        return canon((answer.workflow, answer.status, answer.attempts, answer.last_error))
    if isinstance(answer, list):
        return [info(one) for one in answer]
    return canon(answer)


def transacted(answer: tuple[object, int]) -> object:
    """A transact's outcome and how many of its effects committed so far."""
    outcome, committed = answer
    if isinstance(outcome, Recorded):
        outcome = (outcome.value, outcome.first)
    return canon((outcome, committed))


class CheckpointerMachine(Lockstep[Checkpointer[Any]]):
    """One `Checkpointer` per backing, moved in lockstep."""

    def __init__(self, services: Services) -> None:
        super().__init__(services)
        # Per backing: every pass of each workflow, oldest first; inbox key -> rank.
        self.passes: list[dict[str, list[Pass]]] = [{} for _ in self.backings]
        self.ranks: list[dict[tuple[str, str], int]] = [{} for _ in self.backings]
        self.appended: dict[str, int] = {}

    async def build(self) -> list[Backing[Checkpointer[Any]]]:
        services = self.services
        memory = MemoryCheckpointer()
        database = await services.database()
        tables = await services.tables()
        ns = services.namespace()
        # The counters `transact` effects bump, in each checkpointer's own datastore.
        self.kits: dict[str, EffectKit[Any]] = {
            "memory": MemoryEffectKit(memory),
            "sqlite": SqliteCounters(database),
            "postgres": await PostgresCounters(services.pool, tables).create(),
            "redis": RedisEffectKit(services.redis, ns),
        }
        return [
            Backing("memory", memory),
            Backing("sqlite", SqliteCheckpointer(database)),
            Backing("postgres", PostgresCheckpointer(services.pool, tables=tables)),
            Backing("redis", RedisCheckpointer(services.redis, key_prefix=ns)),
        ]

    # --- normalising --------------------------------------------------------------------

    def _key(self, index: int, workflow: str, key: str) -> str:
        if not is_inbox_key(key):
            return key
        return f"inbox#{self.ranks[index].get((workflow, key), -1)}"

    def _records(self, workflow: str) -> Any:
        """Normalise a load or history answer of each backing (by position)."""
        position = iter(range(len(self.backings)))

        def normal(answer: dict[str, object]) -> object:
            index = next(position)
            return canon(
                [
                    (self._key(index, workflow, key), v.value if isinstance(v, Written) else v)
                    for key, v in answer.items()
                ]
            )

        return normal

    def _messages(self, index: int, workflow: str, ranks: list[int]) -> list[str]:
        """Backing ``index``'s keys of ``workflow``'s messages of ``ranks``."""
        by_rank = {rank: key for (w, key), rank in self.ranks[index].items() if w == workflow}
        return [by_rank.get(rank, f"inbox:{10**19 + rank}") for rank in ranks]

    def _index(self, backing: Backing[Checkpointer[Any]]) -> int:
        return next(i for i, b in enumerate(self.backings) if b is backing)

    def _holder(self, index: int, workflow: str, which: int) -> Pass:
        passes = self.passes[index][workflow]
        return passes[max(0, len(passes) - 1 - which)]

    # --- rules ----------------------------------------------------------------------------

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def claim(self, workflow: str) -> None:
        answers = self.each(
            lambda b: b.store.claim(workflow, LONG, LONG),
            lambda answer: isinstance(answer, Pass),
            label=f"claim {workflow}",
        )
        for index, answer in enumerate(answers):
            if isinstance(answer, Pass):
                passes = self.passes[index].setdefault(workflow, [])
                assert not passes or answer.token > passes[-1].token, "a token went back"
                passes.append(answer)

    def _claimed(self) -> bool:
        return bool(self.passes[0])

    @precondition(_claimed)
    @rule(
        data=st.data(),
        key=st.sampled_from(KEYS),
        value=VALUES,
        which=st.sampled_from((0, 0, 0, 1)),
    )
    def record(self, data: st.DataObject, key: str, value: object, which: int) -> None:
        workflow = data.draw(st.sampled_from(sorted(self.passes[0])))
        holders = {b.name: self._holder(i, workflow, which) for i, b in enumerate(self.backings)}
        self.each(
            lambda b: b.store.record(holders[b.name], key, value),
            lambda answer: canon((answer.value, answer.first)),
            label=f"record {workflow}/{key} by pass -{which}",
        )

    @precondition(_claimed)
    @rule(
        data=st.data(),
        key=st.sampled_from(KEYS),
        value=VALUES,
        fails=st.sampled_from((False, False, True)),
        which=st.sampled_from((0, 0, 0, 1)),
    )
    def transact(
        self, data: st.DataObject, key: str, value: object, fails: bool, which: int
    ) -> None:
        workflow = data.draw(st.sampled_from(sorted(self.passes[0])))
        holders = {b.name: self._holder(i, workflow, which) for i, b in enumerate(self.backings)}
        counter = f"{workflow}/{key}"

        async def call(b: Backing[Checkpointer[Any]]) -> object:
            kit = self.kits[b.name]
            effect = kit.bump_then_fail(counter) if fails else kit.bump(counter, value)
            try:
                answer: object = await b.store.transact(holders[b.name], key, effect)
            except Exception as error:  # each backing wraps a failing effect its own way
                answer = "effect failed" if fails else error
            return answer, await kit.count(counter)

        self.each(
            call,
            transacted,
            label=f"transact {workflow}/{key} by pass -{which} (failing: {fails})",
        )

    @rule(workflow=st.sampled_from(WORKFLOWS), key=st.sampled_from(KEYS), value=VALUES)
    def supply(self, workflow: str, key: str, value: object) -> None:
        self.each(
            lambda b: b.store.supply(workflow, key, value),
            lambda answer: canon((answer.value, answer.first)),
            label=f"supply {workflow}/{key}",
        )

    @rule(workflow=st.sampled_from(WORKFLOWS), value=VALUES, unless=st.booleans())
    def append(self, workflow: str, value: object, unless: bool) -> None:
        answers = self.each(
            lambda b: b.store.append(workflow, value, unless_finished=unless),
            lambda answer: canon(answer.value),
            label=f"append to {workflow} (unless finished: {unless})",
        )
        if not isinstance(answers[0], Entry):
            return  # refused alike by every backing (checked): nothing was written
        rank = self.appended[workflow] = self.appended.get(workflow, 0) + 1
        for index, answer in enumerate(answers):
            if isinstance(answer, Entry):
                assert is_inbox_key(answer.key)
                assert all(answer.key > key for (w, key) in self.ranks[index] if w == workflow)
                self.ranks[index][(workflow, answer.key)] = rank

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def load(self, workflow: str) -> None:
        self.each(lambda b: b.store.load(workflow), self._records(workflow), f"load {workflow}")

    @rule(workflow=st.sampled_from(WORKFLOWS), keys=st.lists(st.sampled_from(KEYS)), ranks=RANKS)
    def peek(self, workflow: str, keys: list[str], ranks: list[int]) -> None:
        self.each(
            lambda b: b.store.peek(
                workflow, [*keys, *self._messages(self._index(b), workflow, ranks)]
            ),
            self._records(workflow),
            f"peek {workflow} {keys} messages {ranks}",
        )

    @precondition(_claimed)
    @rule(data=st.data(), ranks=RANKS, which=st.sampled_from((0, 0, 1)))
    def forget(self, data: st.DataObject, ranks: list[int], which: int) -> None:
        workflow = data.draw(st.sampled_from(sorted(self.passes[0])))

        def call(b: Backing[Checkpointer[Any]]) -> Any:
            index = self._index(b)
            holder = self._holder(index, workflow, which)
            return b.store.forget(holder, self._messages(index, workflow, ranks))

        self.each(call, label=f"forget {workflow} messages {ranks} by pass -{which}")

    @precondition(_claimed)
    @rule(
        data=st.data(),
        key=st.sampled_from(("a", "b")),
        value=VALUES,
        keep=st.sampled_from(((), ("inbox:",), ("inbox:", "c"))),
        which=st.sampled_from((0, 0, 1)),
    )
    def restart(
        self, data: st.DataObject, key: str, value: object, keep: tuple[str, ...], which: int
    ) -> None:
        workflow = data.draw(st.sampled_from(sorted(self.passes[0])))
        holders = {b.name: self._holder(i, workflow, which) for i, b in enumerate(self.backings)}
        self.each(
            lambda b: b.store.restart(holders[b.name], key, value, keep=keep),
            label=f"restart {workflow}/{key} keeping {keep} by pass -{which}",
        )

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def history(self, workflow: str) -> None:
        answers = self.each(
            lambda b: b.store.history(workflow), self._records(workflow), f"history {workflow}"
        )
        for answer in answers:
            assert isinstance(answer, dict)
            times = [written.at for written in answer.values()]
            assert times == sorted(times), "landing times went back in record order"

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def discard(self, workflow: str) -> None:
        self.each(lambda b: b.store.discard(workflow), label=f"discard {workflow}")

    @precondition(_claimed)
    @rule(
        data=st.data(),
        how=st.sampled_from(("release", "renew", "extend")),
        which=st.sampled_from((0, 0, 1)),
    )
    def hold(self, data: st.DataObject, how: str, which: int) -> None:
        workflow = data.draw(st.sampled_from(sorted(self.passes[0])))
        holders = {b.name: self._holder(i, workflow, which) for i, b in enumerate(self.backings)}

        def call(b: Backing[Checkpointer[Any]]) -> Any:
            holder = holders[b.name]
            if how == "release":
                return b.store.release(holder)
            if how == "renew":
                return b.store.renew(holder, LONG)
            return b.store.extend(holder, LONG * 2, LONG)

        self.each(call, label=f"{how} {workflow} by pass -{which}")

    @precondition(_claimed)
    @rule(
        data=st.data(),
        status=st.sampled_from(STATUSES),
        attempts=st.integers(0, 2),
        error=st.sampled_from((None, "boom", "nul\x00")),
        which=st.sampled_from((0, 0, 1)),
    )
    def set_status(
        self,
        data: st.DataObject,
        status: WorkflowStatus,
        attempts: int,
        error: str | None,
        which: int,
    ) -> None:
        workflow = data.draw(st.sampled_from(sorted(self.passes[0])))
        holders = {b.name: self._holder(i, workflow, which) for i, b in enumerate(self.backings)}
        self.each(
            lambda b: b.store.set_status(holders[b.name], status, attempts=attempts, error=error),
            info,
            label=f"set_status {workflow} {status}",
        )

    @precondition(_claimed)
    @rule(
        data=st.data(),
        key=st.sampled_from(KEYS),
        value=VALUES,
        attempts=st.integers(0, 2),
        error=st.sampled_from((None, "boom", "nul\x00")),
        which=st.sampled_from((0, 0, 1)),
    )
    def finish(
        self,
        data: st.DataObject,
        key: str,
        value: object,
        attempts: int,
        error: str | None,
        which: int,
    ) -> None:
        workflow = data.draw(st.sampled_from(sorted(self.passes[0])))
        holders = {b.name: self._holder(i, workflow, which) for i, b in enumerate(self.backings)}
        self.each(
            lambda b: finishing(b.store).finish(
                holders[b.name], key, value, attempts=attempts, error=error
            ),
            info,
            label=f"finish {workflow}/{key} by pass -{which}",
        )

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def get_status(self, workflow: str) -> None:
        self.each(lambda b: b.store.get_status(workflow), info, label=f"get_status {workflow}")

    @rule(
        status=st.sampled_from((None, *STATUSES)),
        limit=st.integers(1, 3),
        after=st.sampled_from((None, "w1")),
    )
    def list_status(self, status: WorkflowStatus | None, limit: int, after: str | None) -> None:
        self.each(
            lambda b: b.store.list_status(status=status, limit=limit, after=after),
            info,
            label=f"list_status {status} after {after}",
        )

    @rule(everything=st.booleans(), limit=st.integers(1, 3))
    def sweep(self, everything: bool, limit: int) -> None:
        # The cutoff is on the stores' clocks: an hour ahead takes every finished workflow
        # whose claim is not live, an hour back none.
        cutoff = datetime.now(UTC) + timedelta(hours=1 if everything else -1)
        self.each(
            lambda b: sweep_out(
                lambda n, note: b.store.sweep(finished_before=cutoff, limit=n, on_swept=note),
                limit,
            ),
            label=f"sweep everything={everything} limit={limit}",
        )

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def recorded_or_not(self, workflow: str) -> None:
        # A supply that lost: first-writer-wins seen from outside a pass.
        self.each(
            lambda b: b.store.supply(workflow, "a", "late"),
            lambda answer: canon(answer.first if isinstance(answer, Recorded) else answer),
            label=f"late supply to {workflow}",
        )


def test_every_backing_answers_a_checkpointer_sequence_alike(services: Services) -> None:
    drive(lambda: CheckpointerMachine(services), examples=5, steps=30)
