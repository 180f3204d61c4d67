"""`PostgresChanges`: the checkpointer's announcements, by LISTEN/NOTIFY.

Every write a waiter may care about NOTIFYs the changes channel in its own statement
(delivered on commit, with the write). One connection outside the pool LISTENs for the
whole process; while it is down (it reconnects with backoff) the feed is not live and
waiters poll, and each connect and each loss announces `MISSED`, so every waiter looks
once.
"""

from __future__ import annotations

from durably.postgres.executor import Database
from durably.postgres.notify import Listener
from durably.stores.changes import MISSED, OnChange, parsed


class PostgresChanges:
    """A `durably.stores.changes.ChangeFeed` over LISTEN on ``channel``."""

    def __init__(self, database: Database, channel: str) -> None:
        self._listener = Listener(
            database, [channel], on_notify=self._notified, on_state=self._listening
        )
        self._on_change: OnChange | None = None

    @property
    def listener(self) -> Listener:
        """The listening connection's `Listener` (for tests)."""
        return self._listener

    @property
    def live(self) -> bool:
        return self._on_change is not None and self._listener.connected

    def start(self, on_change: OnChange) -> None:
        self._on_change = on_change
        self._listener.start()

    async def stop(self) -> None:
        await self._listener.close()
        self._listening(False)
        self._on_change = None

    def _notified(self, _channel: str, payload: str) -> None:
        change = parsed(payload)
        on_change = self._on_change
        if change is not None and on_change is not None:
            on_change(*change)

    def _listening(self, _up: bool) -> None:
        on_change = self._on_change
        if on_change is not None:
            on_change("", MISSED)


__all__ = ["PostgresChanges"]
