"""Settings of the SQLite backing (read from ``DURABLY_SQLITE_PATH`` by `from_env`)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from durably.stores.settings import PositiveFloat, PositiveInt, StoreSettings
from durably.validation import identifier


class SqliteStoreSettings(StoreSettings):
    """Where the database file is, how long to wait for another process's lock and how
    much of the file to keep in memory.

    ``busy_timeout_seconds`` is how long one statement waits for a lock held by another
    connection before `BEGIN IMMEDIATE` is retried (``max_attempts`` tries in all,
    ``backoff_seconds`` doubling in between); ``poll_seconds`` is how often a waiting
    `SqliteScheduler.next_ready` looks for work another process made ready;
    ``watch_seconds`` is how often an idle `SqliteWorkQueue.wait_for_work` asks SQLite
    whether another connection wrote (``PRAGMA data_version``, a read of one counter);
    ``page_cache_mib`` is the most memory the connection keeps of the file's pages
    (``PRAGMA cache_size``): SQLite's own default, 2 MiB, holds the indexes of a few
    thousand workflows, past which each write reads its index pages back from the
    operating system.
    """

    env_var: ClassVar[str] = "DURABLY_SQLITE_PATH"

    path: str = Field(description="database file (':memory:' for a private in-memory one)")
    busy_timeout_seconds: PositiveFloat = 5.0
    poll_seconds: PositiveFloat = 0.05
    watch_seconds: PositiveFloat = 0.01
    page_cache_mib: PositiveInt = 64

    @field_validator("path")
    @classmethod
    def _valid_path(cls, value: str) -> str:
        return identifier(value, "path")


__all__ = ["SqliteStoreSettings"]
