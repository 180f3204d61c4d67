"""`SqliteChanges`: the announcements of a SQLite file's writers, for waiting handles.

The checkpointer of this process announces each write once it has committed. Another
process's writes are noticed within ``poll_seconds`` (`Database.written_by_others`: a
read of SQLite's ``data_version`` counter in shared memory, no query of the tables, and
a read of the counter of this process's own connection when this process wrote too); they
name no workflow, so they are announced as `MISSED`, and this process's waiters look once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from durably.errors import DurablyError
from durably.sqlite.connection import Database
from durably.stores.changes import MISSED, LocalChanges, OnChange

_log = logging.getLogger("durably.sqlite")


class SqliteChanges(LocalChanges):
    """`LocalChanges` of this process plus a watch for other processes' commits."""

    def __init__(self, database: Database) -> None:
        super().__init__()
        self._db = database
        self._watch: asyncio.Task[None] | None = None

    def start(self, on_change: OnChange) -> None:
        super().start(on_change)
        if self._db.path != ":memory:" and (self._watch is None or self._watch.done()):
            self._watch = asyncio.get_running_loop().create_task(self._watch_others())

    async def stop(self) -> None:
        await super().stop()
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch

    async def _watch_others(self) -> None:
        period = self._db.settings.poll_seconds
        mark = None
        while not self._db.closed:
            try:
                if mark is None:
                    mark = await self._db.write_mark()
                await asyncio.sleep(period)
                # Certain: a busy file is not taken for a change (each one wakes every
                # waiter of this process for a look).
                written, mark = await self._db.written_by_others(mark, certain=True)
            except DurablyError as exc:  # closed, or busy beyond its timeout: look again
                _log.debug("SQLite change watch: %s", type(exc).__name__)
                mark = None
                await asyncio.sleep(period)
                written = True
            if written:
                self.announce("", MISSED)


__all__ = ["SqliteChanges"]
