"""Processes racing to start one tenant's workflows never pass its cap together: the
store counts, not each process."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from durably import App
from durably.stores.admission import Admitting, TenantCounts
from tests.pg_service import create_database
from tests.redis_service import flushed_database

RACER = Path(__file__).parents[1] / "admission_racer.py"
PROCESSES = 2
STARTS = 9  # per process
CAP = 10
REDIS_DB = 9


async def _dsn(backing: str, tmp_path: Path) -> str:
    if backing == "sqlite":
        return f"sqlite:///{tmp_path / 'race.db'}"
    if backing == "postgres":
        return create_database()
    return await flushed_database(REDIS_DB)


@pytest.mark.parametrize("backing", ["sqlite", "postgres", "redis"])
async def test_processes_starting_at_once_are_admitted_up_to_the_cap_and_no_further(
    backing: str, tmp_path: Path
) -> None:
    dsn = await _dsn(backing, tmp_path)
    async with App(dsn) as app:  # creates the schema once, before the race
        await app.stores()
        tenant = "racers"
        racers = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(RACER),
                dsn,
                tenant,
                str(STARTS),
                str(CAP),
                f"p{n}",
                stdout=asyncio.subprocess.PIPE,
            )
            for n in range(PROCESSES)
        ]
        outputs = await asyncio.wait_for(
            asyncio.gather(*(racer.communicate() for racer in racers)), timeout=90
        )
        assert [racer.returncode for racer in racers] == [0] * PROCESSES
        created = refused = 0
        for stdout, _ in outputs:
            made, turned = (int(n) for n in stdout.split())
            created, refused = created + made, refused + turned
        assert (created, refused) == (CAP, PROCESSES * STARTS - CAP)
        checkpointer = (await app.stores()).checkpointer
        assert isinstance(checkpointer, Admitting)
        assert await checkpointer.tenant_counts(tenant) == TenantCounts(running=CAP, started=CAP)
