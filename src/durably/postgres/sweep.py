"""The retention sweep for `PostgresCheckpointer`: finished workflows are chosen without
locks, then each is swept in a transaction of its own under its claim row's lock."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from durably.postgres import statements
from durably.postgres.connection import Access
from durably.postgres.executor import Row, Session
from durably.postgres.failures import state_errors
from durably.postgres.schema import StateTables
from durably.stores.retention import FINISHED, sweep_arguments

_TEMPLATES = statements.load("sweep.sql")


async def sweep_finished(
    access: Access,
    tables: StateTables,
    finished_before: datetime,
    limit: int,
    on_swept: Callable[[str], Awaitable[None]] | None,
) -> int:
    """Sweep up to ``limit`` finished workflows older than ``finished_before`` whose claim
    is not live; the number swept (see `Checkpointer.sweep`)."""
    sweep_arguments(finished_before, limit)
    sql = statements.render_all(_TEMPLATES, tables.names)
    finished = [status.value for status in FINISHED]

    async def candidates(session: Session, *, wanted: int) -> Sequence[Row]:
        return await session.fetch(sql["finished"], finished, finished_before, wanted)

    async def one(session: Session, *, workflow: str) -> bool:
        held = await session.fetch(sql["lock_claim"], workflow)
        if held and held[0][0]:
            return False  # a live pass took it since it was chosen
        rows = await session.fetch(sql["sweep"], workflow, finished, finished_before)
        return int(rows[0][0]) > 0

    swept = 0
    while swept < limit:
        wanted = limit - swept
        chosen = await access.run(functools.partial(candidates, wanted=wanted), errors=state_errors)
        progressed = False
        for (workflow,) in chosen:
            name = str(workflow)
            gone = await access.run(
                functools.partial(one, workflow=name), errors=state_errors, transaction=True
            )
            if gone:
                swept += 1
                progressed = True
                if on_swept is not None:
                    await on_swept(name)
        # Stop when nothing more matched or every candidate was taken meanwhile (no spin).
        if len(chosen) < wanted or not progressed:
            break
    return swept


__all__ = ["sweep_finished"]
