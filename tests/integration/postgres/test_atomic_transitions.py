"""`PostgresDurable` crosses records and wakeups in one transaction: a failure between its
two writes (the server refusing the wakeup, or the connection dying there) leaves neither.
And `transact` holds no lock on the claim row while its effect runs: a long effect does
not block its own pass's renewal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import SecretStr

from durably.errors import DurablyError
from durably.postgres import PostgresCheckpointer, PostgresDurable, PostgresScheduler
from durably.postgres.executor import database_for
from durably.postgres.settings import PostgresStoreSettings
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres

LONG = 30.0
DOOMED = "doomed"

# A trigger on the scheduler's table that fails the wakeup of one workflow, after the
# record was written in the same transaction.
FAILURES = {
    "refused": "RAISE EXCEPTION 'no wakeup for %', NEW.workflow;",
    "connection lost": "PERFORM pg_terminate_backend(pg_backend_pid());",
}


async def durable_failing_between_writes(
    pg_stores: Stores, failure: str, dsn: str
) -> PostgresDurable:
    tables = await pg_stores.tables()
    queue = f'"{tables.schema}"."{tables.workflow_queue}"'
    function = f'"{tables.schema}".fail_wakeup'
    async with database_for(pg_stores.pool).session(5.0) as session:
        await session.fetch(
            f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $body$ "
            f"BEGIN IF NEW.workflow = '{DOOMED}' THEN {FAILURES[failure]} END IF; "
            "RETURN NEW; END $body$"
        )
        await session.fetch(
            f"CREATE TRIGGER fail_wakeup BEFORE INSERT OR UPDATE ON {queue} "
            f"FOR EACH ROW EXECUTE FUNCTION {function}()"
        )
    scheduler = pg_stores.track(PostgresScheduler(pg_stores.pool, lease=LONG, tables=tables))
    # A lost connection is retried as a failover would be: for a second here, not the
    # default budget, since every try dies at the same trigger.
    settings = PostgresStoreSettings(dsn=SecretStr(dsn), retry_budget_seconds=1.0)
    checkpointer = PostgresCheckpointer(pg_stores.pool, tables=tables, settings=settings)
    return PostgresDurable(checkpointer, scheduler)


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("transition", ["deliver", "arrive"])
async def test_a_transition_failing_between_its_writes_leaves_neither(
    pg_stores: Stores, postgres_dsn: str, failure: str, transition: str
) -> None:
    durable = await durable_failing_between_writes(pg_stores, failure, postgres_dsn)

    async def cross(workflow: str) -> Any:
        if transition == "deliver":
            return await durable.deliver(workflow, {"text": "hello"})
        return await durable.arrive(workflow, "approval", {"ok": True})

    with pytest.raises(DurablyError):
        await cross(DOOMED)
    assert await durable.checkpointer.load(DOOMED) == {}
    assert await durable.scheduler.next_ready(0) is None
    # The same transition of another workflow commits both writes.
    await cross("bystander")
    assert len(await durable.checkpointer.load("bystander")) == 1
    delivery = await durable.scheduler.next_ready(0)
    assert delivery is not None
    assert delivery.workflow == "bystander"


async def test_a_long_transact_effect_does_not_block_its_own_renewal(pg_stores: Stores) -> None:
    cp = PostgresCheckpointer(pg_stores.pool, tables=await pg_stores.tables())
    holder = await cp.claim("wf", LONG, 1.0)
    assert holder is not None
    running, finish = asyncio.Event(), asyncio.Event()

    async def long_effect(handle: Any) -> str:
        running.set()
        await finish.wait()
        return "paid"

    transacting = asyncio.create_task(cp.transact(holder, "pay", long_effect))
    try:
        await asyncio.wait_for(running.wait(), timeout=10)
        # The keep-alive's renewal goes through while the effect's transaction is open.
        assert await asyncio.wait_for(cp.renew(holder, 1.0), timeout=5)
        assert await asyncio.wait_for(cp.extend(holder, LONG, 1.0), timeout=5)
        assert await asyncio.wait_for(cp.claim("wf", LONG, LONG), timeout=5) is None
    finally:
        finish.set()
    recorded = await asyncio.wait_for(transacting, timeout=10)
    assert (recorded.value, recorded.first) == ("paid", True)
