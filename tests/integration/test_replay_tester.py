"""The replay tester on histories saved from a SQLite store by ``durably workflows show
--json`` (a real subprocess): each kind of drift a deploy can bring is flagged, unchanged
code passes, and a replay neither runs a step nor writes to any store."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import durably
from durably.testing import (
    Finding,
    History,
    assert_replays,
    histories_from_files,
    histories_from_store,
    in_flight_histories,
    replay,
)
from tests.integration.deploys import shop_v1, shop_v2
from tests.integration.deploys.shop import KIND, LEDGER, ORDER, START

ASLEEP = "waits asleep until 2023-11-15T00:13:20+00:00"
"""How o-1 replays: started an hour after the shop's clock did (o-2 slept first), it
sleeps until an hour after that."""


def save_history(dsn: str, workflow: str, path: Path) -> None:
    """``durably workflows show WORKFLOW --json > PATH``, as CI would save it."""
    shown = subprocess.run(
        [sys.executable, "-m", "durably", "workflows", "show", workflow, "--dsn", dsn, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    path.write_text(shown.stdout, encoding="utf-8")


def every_row(database: Path) -> dict[str, list[str]]:
    """Every row of every table of a SQLite file, read from outside durably."""
    with sqlite3.connect(database) as connection:
        tables = [
            str(row[0])
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        return {
            table: sorted(repr(row) for row in connection.execute(f'SELECT * FROM "{table}"'))
            for table in tables
        }


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    """A SQLite store with orders of ``shop_v1`` in flight and finished, their histories
    saved as files: ``(dsn, database file, histories folder)``."""
    folder = tmp_path_factory.mktemp("shop")
    database = folder / "shop.db"
    dsn = f"sqlite:///{database}"
    asyncio.run(shop_v1.take_orders(dsn))
    saved = folder / "histories"
    saved.mkdir()
    save_history(dsn, "o-1", saved / "o-1.json")
    save_history(dsn, "o-2", saved / "o-2.json")
    return dsn, database, saved


@pytest.fixture
def nowhere(tmp_path: Path) -> str:
    """A DSN of a SQLite file that does not exist: the App a test replays against opens
    it only if the replay touches its store (the test then sees the file)."""
    return f"sqlite:///{tmp_path / 'never-opened.db'}"


@pytest.fixture(autouse=True)
def ledger() -> list[str]:
    """The shop's effects so far; a replay must add none."""
    return list(LEDGER)


def test_the_saved_json_holds_every_record_in_order_with_the_start_record_first(
    store: tuple[str, Path, Path],
) -> None:
    _, _, saved = store
    shown = json.loads((saved / "o-1.json").read_text(encoding="utf-8"))
    assert [record["key"] for record in shown["history"]] == [
        "durably:start",
        "reserve#1",
        "charge#1",
        "durably:sleep#1",
    ]
    assert shown["key"] == "o-1"
    assert shown["history"][0]["value"]["args"] == {"order": ORDER.model_dump()}
    history = History.from_json((saved / "o-1.json").read_text(encoding="utf-8"))
    assert (history.key, history.kind, history.status) == ("o-1", KIND, "sleeping")
    assert History.from_json(history.to_json()) == history


async def test_the_code_in_flight_replays_its_own_histories_ok_and_runs_nothing(
    store: tuple[str, Path, Path], nowhere: str, tmp_path: Path, ledger: list[str]
) -> None:
    _, _, saved = store
    report = await assert_replays(
        shop_v1.build(nowhere), histories_from_files(saved), clock=durably.ManualClock(START)
    )
    sleeping, done = report.workflows
    assert (sleeping.workflow, sleeping.ending) == ("o-1", ASLEEP)
    assert (done.workflow, done.ending, done.replayed) == ("o-2", "completed", 4)
    assert ledger == LEDGER
    assert not (tmp_path / "never-opened.db").exists()


# A step called where the history recorded another parks the pass, as a worker's pass does
# (the runtime's drift check): the report names both steps in the park's words.
DEPLOYS: list[tuple[Callable[[str], durably.App], Finding, str]] = [
    (
        shop_v2.with_fee,
        Finding.ARGUMENT_DRIFT,
        "step 'charge#1': step 'charge' was called with other arguments",
    ),
    (
        shop_v2.authorize_first,
        Finding.STEP_DRIFT,
        "step 'authorize#1': the body now calls it as its step call #2, where an earlier pass "
        "recorded step 'charge#1'",
    ),
    (
        shop_v2.fraud_check,
        Finding.STEP_DRIFT,
        "step 'fraud-check#1': the body now calls it as its step call #2, where an earlier "
        "pass recorded step 'charge#1'",
    ),
    (
        shop_v2.charge_first,
        Finding.STEP_DRIFT,
        "step 'charge#1': the body now calls it as its step call #1, where an earlier pass "
        "recorded step 'reserve#1'",
    ),
    (
        shop_v2.no_reservation,
        Finding.STEP_DRIFT,
        "step 'charge#1': the body now calls it as its step call #1, where an earlier pass "
        "recorded step 'reserve#1'",
    ),
    (
        shop_v2.charge_in_currency,
        Finding.INCOMPATIBLE_RECORD,
        "the record at 'charge#1' is no longer a valid ChargeInCurrency",
    ),
    (
        shop_v2.order_limit,
        Finding.BODY_FAILED,
        "the body raises Limit('order o-1 is over the limit')",
    ),
]


@pytest.mark.parametrize(
    ("deploy", "finding", "words"), DEPLOYS, ids=[deploy.__name__ for deploy, _, _ in DEPLOYS]
)
async def test_a_deploy_that_changes_the_body_under_an_order_in_flight_is_flagged(
    store: tuple[str, Path, Path],
    nowhere: str,
    tmp_path: Path,
    ledger: list[str],
    deploy: Callable[[str], durably.App],
    finding: Finding,
    words: str,
) -> None:
    _, _, saved = store
    report = await replay(deploy(nowhere), histories_from_files(saved / "o-1.json"))
    assert not report.ok
    (found,) = report.workflows
    assert found.finding is finding, found
    assert words in found.detail
    assert words in report.describe()
    with pytest.raises(AssertionError, match="o-1"):
        await assert_replays(deploy(nowhere), histories_from_files(saved / "o-1.json"))
    assert ledger == LEDGER  # no step of either version ran
    assert not (tmp_path / "never-opened.db").exists()


async def test_a_step_inserted_behind_patched_replays_ok_for_orders_in_flight_and_finished(
    store: tuple[str, Path, Path], nowhere: str, ledger: list[str]
) -> None:
    _, _, saved = store
    report = await assert_replays(
        shop_v2.patched_fraud_check(nowhere),
        histories_from_files(saved),
        clock=durably.ManualClock(START),
    )
    assert [workflow.ending for workflow in report.workflows] == [
        ASLEEP,
        "completed",
    ]
    assert ledger == LEDGER


async def test_a_replay_reads_the_store_and_writes_nothing_to_it(
    store: tuple[str, Path, Path], ledger: list[str]
) -> None:
    dsn, database, _ = store
    before = every_row(database)
    in_flight = await in_flight_histories(dsn, kind=KIND)
    assert [history.workflow for history in in_flight] == ["o-1"]  # o-2 has finished
    both = await histories_from_store(dsn, ["o-1", "o-2"])
    # The Apps replayed against name the store itself, as a module's App often does.
    assert (await replay(shop_v1.build(dsn), both)).ok
    for deploy, _, _ in DEPLOYS:
        assert not (await replay(deploy(dsn), in_flight)).ok
    assert every_row(database) == before
    assert ledger == LEDGER


async def test_the_replay_past_the_warehouse_wait_stops_before_shipping(
    store: tuple[str, Path, Path], nowhere: str, ledger: list[str]
) -> None:
    _, _, saved = store
    later = durably.ManualClock(START + 3 * 3600)  # the warehouse's hour has passed
    report = await assert_replays(
        shop_v1.build(nowhere), histories_from_files(saved / "o-1.json"), clock=later
    )
    (found,) = report.workflows
    assert found.next_calls == ("ship#1",)
    assert found.ending == "would run step 'ship#1' next"
    assert ledger == LEDGER
