"""The replay tester reading a PostgreSQL store by its DSN: the shop's orders in flight are
found, each deploy's drift is flagged, and not a row of the database changes."""

from __future__ import annotations

import psycopg
import pytest

import durably
from durably.testing import Finding, histories_from_store, in_flight_histories, replay
from tests.integration.deploys import shop_v1, shop_v2
from tests.integration.deploys.shop import KIND, LEDGER, START
from tests.pg_service import create_database

pytestmark = pytest.mark.postgres


def every_row(dsn: str) -> dict[str, list[str]]:
    """Every row of every table of the database's public schema, read from outside durably."""
    with psycopg.connect(dsn) as connection:
        tables = [
            str(row[0])
            for row in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        return {
            table: sorted(repr(row) for row in connection.execute(f'SELECT * FROM "{table}"'))
            for table in tables
        }


async def test_orders_in_flight_in_postgres_are_read_and_replayed_without_a_write() -> None:
    dsn = create_database()
    await shop_v1.take_orders(dsn, "acme")
    effects, before = list(LEDGER), every_row(dsn)

    in_flight = await in_flight_histories(dsn, kind=KIND)
    assert [(h.tenant, h.workflow, h.status) for h in in_flight] == [
        ("acme", "o-1", "sleeping"),
        ("default", "o-1", "sleeping"),
    ]
    (done,) = await histories_from_store(dsn, ["o-2"])
    assert done.status == "completed"
    # The Apps replayed against name the database itself, as a module's App often does.
    report = await replay(shop_v1.build(dsn), [*in_flight, done], clock=durably.ManualClock(START))
    assert report.ok, report.describe()
    assert [found.ending.split(" until ")[0] for found in report.workflows] == [
        "waits asleep",
        "waits asleep",
        "completed",
    ]
    for deploy, finding in [
        (shop_v2.with_fee, Finding.ARGUMENT_DRIFT),
        (shop_v2.authorize_first, Finding.STEP_DRIFT),
        (shop_v2.fraud_check, Finding.STEP_DRIFT),
        (shop_v2.charge_in_currency, Finding.INCOMPATIBLE_RECORD),
    ]:
        drifted = await replay(deploy(dsn), in_flight)
        assert [found.finding for found in drifted.workflows] == [finding, finding], deploy
    assert (await replay(shop_v2.patched_fraud_check(dsn), in_flight)).ok
    assert every_row(dsn) == before
    assert effects == LEDGER
