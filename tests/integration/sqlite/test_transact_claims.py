"""SQLite `transact` runs its effect inside the write transaction that records it: an effect
longer than the pass's liveness window cannot cost the pass its claim, because no other
connection (another process) can claim while the write lock is held, and the commit that
records the effect renews the claim."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from durably.sqlite import SqliteCheckpointer, connect
from durably.sqlite.settings import SqliteStoreSettings

ALIVE = 0.3
LONG = 30.0


async def test_a_transact_effect_outlasting_the_alive_window_keeps_its_pass_the_claim(
    tmp_path: Path,
) -> None:
    settings = SqliteStoreSettings(path=str(tmp_path / "transact.db"), busy_timeout_seconds=10)
    mine, theirs = await connect(settings=settings), await connect(settings=settings)
    try:
        cp, other = SqliteCheckpointer(mine), SqliteCheckpointer(theirs)
        holder = await cp.claim("wf", LONG, ALIVE)
        assert holder is not None
        running = threading.Event()

        def long_effect(cursor: object) -> str:
            running.set()
            time.sleep(ALIVE * 2)  # on the database thread, inside the write transaction
            return "paid"

        transacting = asyncio.create_task(cp.transact(holder, "pay", long_effect))
        assert await asyncio.to_thread(running.wait, 10)
        # Another process claiming now waits for the write lock, then finds the pass alive.
        assert await other.claim("wf", LONG, LONG) is None
        recorded = await transacting
        assert (recorded.value, recorded.first) == ("paid", True)
        assert await cp.renew(holder, ALIVE)
        assert await other.load("wf") == {"pay": "paid"}
    finally:
        await mine.close()
        await theirs.close()
