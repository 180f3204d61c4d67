"""Workflows over one database: fenced records, effects committed with their records, and
transitions that cross records and wakeups in one transaction."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durably.errors import Fenced, InvalidInputError
from durably.postgres import PostgresCheckpointer, PostgresDurable, PostgresScheduler
from tests.pg_service import PostgresEffectKit, Stores

pytestmark = pytest.mark.postgres

LONG = 30.0


async def checkpointer(pg_stores: Stores) -> PostgresCheckpointer:
    return PostgresCheckpointer(pg_stores.pool, tables=await pg_stores.tables())


async def test_one_of_eight_racing_claims_wins(pg_stores: Stores) -> None:
    cp = await checkpointer(pg_stores)
    passes = await asyncio.gather(*(cp.claim("wf", LONG, LONG) for _ in range(8)))
    assert len([p for p in passes if p is not None]) == 1


async def test_a_write_from_a_pass_that_lost_the_workflow_is_refused(pg_stores: Stores) -> None:
    cp = await checkpointer(pg_stores)
    first = await cp.claim("wf", 0.2, 0.2)
    assert first is not None
    await asyncio.sleep(0.3)
    second = await cp.claim("wf", LONG, LONG)
    assert second is not None
    assert second.token > first.token
    with pytest.raises(Fenced):
        await cp.record(first, "step", 1)
    assert await cp.load("wf") == {}
    assert (await cp.record(second, "step", 2)).first


async def test_an_effect_is_performed_and_recorded_in_one_commit(
    pg_stores: Stores, effect_kit: PostgresEffectKit
) -> None:
    cp = await checkpointer(pg_stores)
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    recorded = await cp.transact(holder, "pay", effect_kit.bump("paid", {"ok": True}))
    assert recorded.first
    assert recorded.value == {"ok": True}
    again = await cp.transact(holder, "pay", effect_kit.bump("paid", {"ok": False}))
    assert not again.first
    assert again.value == {"ok": True}
    assert await effect_kit.count("paid") == 1


async def test_an_effect_from_a_superseded_pass_is_refused_before_it_runs(
    pg_stores: Stores, effect_kit: PostgresEffectKit
) -> None:
    cp = await checkpointer(pg_stores)
    stale = await cp.claim("wf", LONG, LONG)
    assert stale is not None
    await cp.discard("wf")
    with pytest.raises(Fenced):
        await cp.transact(stale, "pay", effect_kit.bump("paid", 1))
    assert await effect_kit.count("paid") == 0


async def test_a_pass_superseded_during_its_effect_rolls_the_effect_back(
    pg_stores: Stores, effect_kit: PostgresEffectKit
) -> None:
    cp = await checkpointer(pg_stores)
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    bump = effect_kit.bump("paid", 1)

    async def superseded_meanwhile(handle: Any) -> object:
        value = await bump(handle)
        await cp.discard("wf")  # another connection raises the fence mid-effect
        return value

    with pytest.raises(Fenced):
        await cp.transact(holder, "pay", superseded_meanwhile)
    assert await effect_kit.count("paid") == 0
    assert await cp.load("wf") == {}


async def test_a_failing_effect_rolls_back_with_its_record(
    pg_stores: Stores, effect_kit: PostgresEffectKit
) -> None:
    cp = await checkpointer(pg_stores)
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    with pytest.raises(RuntimeError, match="failed after its write"):
        await cp.transact(holder, "pay", effect_kit.bump_then_fail("paid"))
    assert await effect_kit.count("paid") == 0
    assert await cp.load("wf") == {}


async def test_a_value_supplied_mid_transact_is_handed_back_rather_than_raised(
    pg_stores: Stores, effect_kit: PostgresEffectKit
) -> None:
    cp = await checkpointer(pg_stores)
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    bump = effect_kit.bump("paid", "from the effect")

    async def raced(handle: Any) -> object:
        value = await bump(handle)
        await cp.supply("wf", "pay", "supplied")
        return value

    recorded = await cp.transact(holder, "pay", raced)
    assert (recorded.value, recorded.first) == ("supplied", False)
    assert await cp.load("wf") == {"pay": "supplied"}
    assert await effect_kit.count("paid") == 0


async def test_an_effect_that_writes_its_own_step_row_is_told_so(
    pg_stores: Stores, pg_driver: str
) -> None:
    tables = await pg_stores.tables()
    cp = PostgresCheckpointer(pg_stores.pool, tables=tables)
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    table = f'"{tables.schema}".{tables.workflow_checkpoint}'

    async def sneaky(handle: Any) -> object:
        if pg_driver == "psycopg":
            await handle.execute(
                f"INSERT INTO {table} (workflow, key, value) VALUES (%s, %s, %s::jsonb)",
                ("wf", "step", '"mine"'),
            )
        else:
            await handle.execute(
                f"INSERT INTO {table} (workflow, key, value) VALUES ($1, $2, $3::jsonb)",
                "wf",
                "step",
                '"mine"',
            )
        return "returned"

    with pytest.raises(InvalidInputError, match="own checkpoint row"):
        await cp.transact(holder, "step", sneaky)
    assert await cp.load("wf") == {}


async def test_a_step_that_took_time_is_stamped_when_it_landed(
    pg_stores: Stores, effect_kit: PostgresEffectKit
) -> None:
    cp = await checkpointer(pg_stores)
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    bump = effect_kit.bump("slow", 1)

    async def slow(handle: Any) -> object:
        value = await bump(handle)
        await asyncio.sleep(0.4)
        return value

    started = datetime.now(UTC)
    await cp.transact(holder, "slow", slow)
    landed = (await cp.history("wf"))["slow"].at
    assert landed.tzinfo is not None
    assert landed - started >= timedelta(seconds=0.35)


async def test_a_workflow_id_full_of_braces_quotes_and_semicolons_addresses_itself(
    pg_stores: Stores,
) -> None:
    cp = await checkpointer(pg_stores)
    strange = "{a}'; DROP TABLE workflow_claim; --\"{b}"
    await cp.supply(strange, "k", 1)
    await cp.supply("{a}", "k", 2)
    assert await cp.load(strange) == {"k": 1}
    assert await cp.load("{a}") == {"k": 2}


async def test_an_arrive_that_fails_between_its_two_writes_leaves_neither(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    cp = PostgresCheckpointer(pg_stores.pool, tables=tables)
    scheduler = pg_stores.track(PostgresScheduler(pg_stores.pool, tables=tables))
    durable = PostgresDurable(cp, scheduler)
    scheduler._namespace = "bad\x00namespace"  # the second write (make_ready) fails
    with pytest.raises(Exception):  # noqa: B017 - any failure will do; what matters is after
        await durable.arrive("wf", "approval", "yes")
    assert await cp.load("wf") == {}


async def test_durable_refuses_stores_on_different_pools(pg_stores: Stores) -> None:
    from durably.errors import ConfigurationError

    tables = await pg_stores.tables()
    cp = PostgresCheckpointer(pg_stores.pool, tables=tables)
    other_pool = type("Pool", (), {"__module__": "psycopg_pool.fake"})()
    scheduler = PostgresScheduler(other_pool, tables=tables)
    with pytest.raises(ConfigurationError, match="same pool"):
        PostgresDurable(cp, scheduler)


class _WrittenJson:
    """A codec that renders JSON text of its own: a string value is sent as written."""

    renders_json = True

    def encode(self, value: object) -> str:
        return value if isinstance(value, str) else json.dumps(value)

    def decode(self, text: str) -> object:
        return json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        r'{"k":"a\u0000b"}',
        r'"\\\u0000"',  # an escaped backslash, then an escaped NUL
        r'"\ud800"',
        r'"\uDFFF"',
        r'"\ud83d\u0041"',
        '"\ud800"',  # a raw lone surrogate
        '"a\x00b"',  # a raw NUL
    ],
)
async def test_a_custom_codecs_json_that_jsonb_cannot_hold_is_refused_before_it_is_sent(
    pg_stores: Stores, effect_kit: PostgresEffectKit, text: str
) -> None:
    tables = await pg_stores.tables()
    cp = PostgresCheckpointer(pg_stores.pool, codec=_WrittenJson(), tables=tables)
    durable = PostgresDurable(cp, pg_stores.track(PostgresScheduler(pg_stores.pool, tables=tables)))
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    await cp.record(holder, "kept", '{"k":"v"}')
    for write in (
        lambda: cp.record(holder, "step", text),
        lambda: cp.transact(holder, "paid", effect_kit.bump("paid", text)),
        lambda: cp.supply("wf", "input", text),
        lambda: cp.append("wf", text),
        lambda: durable.arrive("wf", "input", text),
        lambda: durable.deliver("wf", text),
    ):
        with pytest.raises(InvalidInputError, match="value must"):
            await write()
    assert await cp.load("wf") == {"kept": {"k": "v"}}
    assert await effect_kit.count("paid") == 0
    assert await durable.scheduler.next_ready(0) is None
    lookalikes = r'["\\u0000", "\\\\ud800", "\ud83d\ude80", "\u00e9"]'
    assert (await cp.record(holder, "looks", lookalikes)).value == json.loads(lookalikes)


async def test_a_custom_codecs_text_that_is_not_json_is_invalid_input_not_unavailable(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    cp = PostgresCheckpointer(pg_stores.pool, codec=_WrittenJson(), tables=tables)
    holder = await cp.claim("wf", LONG, LONG)
    assert holder is not None
    await cp.record(holder, "kept", '{"k":"v"}')
    # Nothing on the client parses a codec's JSON: the server refuses it as data (22P02),
    # which is the value's fault, so it is neither retried nor reported "unavailable".
    with pytest.raises(InvalidInputError, match="PostgreSQL refused the value"):
        await cp.record(holder, "step", "not json")
    with pytest.raises(InvalidInputError, match="PostgreSQL refused the value"):
        await cp.supply("wf", "input", "{unclosed")
    assert await cp.load("wf") == {"kept": {"k": "v"}}
    assert await cp.renew(holder, LONG)


async def test_a_message_whose_append_commits_after_a_later_numbered_one_is_still_received(
    pg_stores: Stores,
) -> None:
    # Two senders append to one inbox at once; the first to take a number commits last.
    # A pass that ran in between must not make the first message unreachable: `receive`
    # reads "after the last message received", so a key that becomes visible later must
    # never sort before one already seen.
    from durably.engine.runtime import Execution, advance
    from durably.postgres.executor import session_for
    from durably.stores.workflows import Blocked, Completed

    cp = await checkpointer(pg_stores)

    async def body(run: Execution) -> list[object]:
        got: list[object] = []
        batch = 0
        while len(got) < 2:
            got += [entry.value for entry in await run.receive(f"batch-{batch}")]
            batch += 1
        return sorted(got, key=str)

    numbered, finish = asyncio.Event(), asyncio.Event()

    async def slow_sender() -> None:
        pool = pg_stores.pool
        acquire = pool.connection() if pg_stores.driver == "psycopg" else pool.acquire()
        async with acquire as connection, connection.transaction():
            await cp.append_on(session_for(connection), "wf", cp.encode("first"))
            numbered.set()
            await finish.wait()

    slow = asyncio.create_task(slow_sender())
    await numbered.wait()
    fast = asyncio.create_task(cp.append("wf", "second"))
    await asyncio.wait({fast}, timeout=1.0)  # done at once unless appends queue up
    assert isinstance(await advance("wf", cp, body), Blocked)
    finish.set()
    await slow
    await fast
    assert await advance("wf", cp, body) == Completed(["first", "second"])


async def test_advance_returns_when_the_pass_ends_while_its_renewal_waits_for_the_pool(
    pg_stores: Stores, postgres_dsn: str
) -> None:
    # A fresh pool holds one connection: the keep-alive's first renewal waits while the pool
    # grows, and the pass ends meanwhile. psycopg-pool waits with asyncio.wait_for, which on
    # Python 3.11 drops a cancel that lands as the wait completes; the keep-alive must still
    # stop, or advance hangs with the claim renewed until its budget is spent.
    from durably.engine.runtime import Execution, advance
    from durably.stores.workflows import Completed
    from tests.pg_service import close_pool, open_pool

    tables = await pg_stores.tables()

    async def body(run: Execution) -> str:
        return "done"

    for attempt in range(5):
        pool = await open_pool(pg_stores.driver, postgres_dsn)
        try:
            cp = PostgresCheckpointer(pool, tables=tables)
            outcome = await asyncio.wait_for(advance(f"wf-{attempt}", cp, body), 5.0)
            assert outcome == Completed("done")
            assert await cp.claim(f"wf-{attempt}", LONG, LONG) is not None  # released
        finally:
            await close_pool(pool)
