"""Processes racing to start one tenant's workflows never pass its cap together: the
store counts, not each process. The backings race at once (processes start slowly on a
shared machine), each over a store of its own."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from durably import App
from durably.stores.admission import Admitting, TenantCounts
from tests.admission_racer import race, racing_app
from tests.pg_service import create_database
from tests.redis_service import flushed_database

RACER = Path(__file__).parents[1] / "admission_racer.py"
PROCESSES = 2  # per backing: this one and a racer
STARTS = 9  # per process
CAP = 10
REDIS_DB = 11  # a database index no other suite empties
TENANT = "racers"


async def _race(dsn: str) -> tuple[int, int]:
    """Race a process against this one over ``dsn``, both told to go at once; how many
    starts were created and refused, together."""
    app, workflow = racing_app(dsn, CAP)
    async with app:
        await app.stores()
        racer = await asyncio.create_subprocess_exec(
            sys.executable,
            str(RACER),
            dsn,
            TENANT,
            str(STARTS),
            str(CAP),
            "there",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert racer.stdin is not None
        assert racer.stdout is not None
        assert (await racer.stdout.readline()).strip() == b"ready", dsn.split("://")[0]
        racer.stdin.write(b"go\n")
        await racer.stdin.drain()
        here = await race(workflow, TENANT, STARTS, "here")
        there, _ = await racer.communicate()
    assert racer.returncode == 0, dsn.split("://")[0]
    made, turned = (int(n) for n in there.split())
    return here[0] + made, here[1] + turned


async def test_processes_starting_at_once_are_admitted_up_to_the_cap_and_no_further(
    tmp_path: Path,
) -> None:
    dsns = {
        "sqlite": f"sqlite:///{tmp_path / 'race.db'}",
        "postgres": create_database(),
        "redis": await flushed_database(REDIS_DB),
    }
    apps = {backing: App(dsn) for backing, dsn in dsns.items()}
    try:
        for app in apps.values():  # each schema created once, before the race
            await app.stores()
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(_race(dsn) for dsn in dsns.values())), timeout=100
        )
        for backing, outcome in zip(dsns, outcomes, strict=True):
            assert outcome == (CAP, PROCESSES * STARTS - CAP), backing
            checkpointer = (await apps[backing].stores()).checkpointer
            assert isinstance(checkpointer, Admitting)
            counts = await checkpointer.tenant_counts(TENANT)
            assert counts == TenantCounts(running=CAP, started=CAP), backing
    finally:
        for app in apps.values():
            await app.close()
