"""`advance` keeps its claim through a renewal that fails for a moment: the database file
locked by another connection (another process) for longer than its busy timeout."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from durably.engine.runtime import Execution, advance
from durably.errors import Contended
from durably.sqlite import SqliteCheckpointer, connect
from durably.sqlite.settings import SqliteStoreSettings
from durably.stores import Completed

ALIVE = 3.0  # renewed every 1 s; the lock below spans one renewal (a wide margin under load)


async def test_a_pass_whose_renewal_failed_once_keeps_its_claim_and_its_paid_step_runs_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "advance.db"
    settings = SqliteStoreSettings(path=str(path), busy_timeout_seconds=0.05)
    mine, theirs = await connect(settings=settings), await connect(settings=settings)
    try:
        paid: list[str] = []
        late = asyncio.Event()

        async def body(run: Execution) -> str:
            async def pay() -> str:
                paid.append(run.workflow)
                # Another process holds the write lock across the keep-alive's renewal at
                # ALIVE/3, longer than every retry of it; then lets go.
                blocker = sqlite3.connect(path, isolation_level=None)
                try:
                    blocker.execute("BEGIN IMMEDIATE")
                    await asyncio.sleep(ALIVE * 0.6)
                    blocker.execute("COMMIT")
                finally:
                    blocker.close()
                if len(paid) == 1:
                    await late.wait()  # the first call runs on past the claim's first window
                return "receipt"

            return await run.step("pay", pay)

        first = asyncio.create_task(advance("wf", SqliteCheckpointer(mine), body, alive=ALIVE))
        await asyncio.sleep(ALIVE * 1.3)  # past the window a dead keep-alive would leave
        try:
            with pytest.raises(Contended):
                await advance("wf", SqliteCheckpointer(theirs), body, alive=ALIVE)
        finally:
            late.set()
        assert await first == Completed("receipt")
        assert paid == ["wf"]
    finally:
        await mine.close()
        await theirs.close()
