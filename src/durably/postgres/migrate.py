"""`migrate` (explicit, under an advisory lock) and `verify` (reads and refuses, never
alters). Nothing else applies schema: not import, not construction, not ``open()``."""

from __future__ import annotations

import json
from typing import Any

from durably.errors import ConfigurationError
from durably.postgres import statements
from durably.postgres.connection import Access
from durably.postgres.executor import Session, database_for
from durably.postgres.failures import RetryBudget, classify, state_errors
from durably.postgres.pooler import pooled, refuse_migrate
from durably.postgres.schema import SCHEMA_VERSION, StateTables, schema_queries, schema_statements
from durably.stores.runs import RUN_STATES

_RENAMES = statements.load("migrate.sql")

# Version 1 named the workflow tables without the durably_ prefix. Each table, the indexes
# (by suffix) that took its name, and the sequence, as version 1 called them.
_VERSION_1_TABLES = {
    "workflow_checkpoint": ("pkey",),
    "workflow_claim": ("pkey",),
    "workflow_queue": ("pkey", "ready", "sleeping"),
    "workflow_status": ("pkey", "by_status", "by_age"),
}
_VERSION_1_SEQUENCE = "workflow_seq"
# Indexes an earlier version kept that this one does not, by table field and suffix:
# version 3's index of every ready scheduler entry (version 4 keeps a line per tenant).
_DROPPED_INDEXES = (("workflow_queue", "ready"),)


async def migrate(pool: Any, tables: StateTables | None = None) -> None:
    """Create whatever of durably's schema is missing (idempotent), after renaming what an
    earlier version named otherwise (version 1's unprefixed workflow tables, their indexes
    and sequence) to ``tables``' names, keeping every row; then drop the indexes an
    earlier version kept that this one does not.

    Runs in one transaction under an advisory lock, so many processes may call it at once.
    Refuses (`ConfigurationError`) a pool opened through a transaction pooler.
    """
    refuse_migrate(pool)
    tables = tables or StateTables()
    queries = schema_queries(tables)

    async def apply(session: Session) -> None:
        await session.fetch(queries["migrate_lock"])
        if tables.schema is not None:
            await session.fetch(queries["create_schema"])
        await _rename_version_1(session, tables)
        stored = await _stored_version(session, tables)
        for statement in schema_statements(tables):
            await session.fetch(statement)
        if stored is not None and stored < 7:  # runs opened before their state followed
            follow = statements.render(_RENAMES["follow_runs"], tables.names)
            await session.fetch(follow, json.dumps(RUN_STATES))
        for table, suffix in _DROPPED_INDEXES:
            dropped = tables.qualified(f"{getattr(tables, table)}_{suffix}")
            await session.fetch(statements.render(_RENAMES["drop_index"], {"old": dropped}))

    await Access.over(pool, RetryBudget()).run(apply, errors=state_errors, transaction=True)


async def _stored_version(session: Session, tables: StateTables) -> int | None:
    """The schema version the database holds before this migration; None when new."""
    if not await _exists(session, tables.qualified(tables.schema_version)):
        return None
    query = statements.render(_RENAMES["stored_version"], tables.names)
    version = (await session.fetch(query))[0][0]
    return None if version is None else int(version)


async def _rename_version_1(session: Session, tables: StateTables) -> None:
    """Rename each version-1 relation that exists to its name in ``tables``, unless a
    relation of that name exists already (a database migrated before, or two layouts side
    by side, which is left for its owner to sort out)."""
    for old, suffixes in _VERSION_1_TABLES.items():
        new = getattr(tables, old)
        if await _rename(session, tables, "rename_table", old, new):
            for suffix in suffixes:
                await _rename(session, tables, "rename_index", f"{old}_{suffix}", f"{new}_{suffix}")
    await _rename(session, tables, "rename_sequence", _VERSION_1_SEQUENCE, tables.workflow_seq)


async def _rename(session: Session, tables: StateTables, kind: str, old: str, new: str) -> bool:
    """``ALTER ... RENAME`` ``old`` to ``new`` when ``old`` exists and ``new`` does not."""
    if old == new or not await _exists(session, tables.qualified(old)):
        return False
    if await _exists(session, tables.qualified(new)):
        return False
    names = {"old": tables.qualified(old), "new": f'"{new}"'}
    await session.fetch(statements.render(_RENAMES[kind], names))
    return True


async def _exists(session: Session, qualified: str) -> bool:
    rows = await session.fetch(_RENAMES["relation_exists"], qualified)
    return bool(rows[0][0])


async def verify(pool: Any, tables: StateTables | None = None, *, durable: bool = True) -> None:
    """Refuse a database this release cannot use: a missing schema, a schema version other
    than `SCHEMA_VERSION`, or connections without a ``statement_timeout``; and, unless
    ``durable=False``, one that may lose acknowledged commits (``synchronous_commit`` off
    or ``fsync`` off). Changes nothing.

    Raises `ConfigurationError`.
    """
    tables = tables or StateTables()
    database = database_for(pool)
    queries = schema_queries(tables)
    async with database.session(RetryBudget().pool_timeout_seconds) as session:
        try:
            rows = await session.fetch(queries["schema_version"])
        except Exception as error:
            if classify(error) == "configuration":
                raise ConfigurationError(
                    "durably's PostgreSQL schema is missing: apply it with "
                    "durably.postgres.migrate() or `durably migrate`"
                ) from None
            raise
        versions = sorted({int(row[0]) for row in rows})
        if versions != [SCHEMA_VERSION]:
            raise ConfigurationError(
                f"durably's PostgreSQL schema is at version {versions or 'none'}, this "
                f"release was written for version {SCHEMA_VERSION}; migrate the schema or "
                "install the matching release"
            )
        timeout = (await session.fetch(queries["statement_timeout"]))[0][0]
        if str(timeout).strip() in ("0", "0ms", "0s") and pooled(pool) is not None:
            raise ConfigurationError(
                "connections have no statement_timeout (it is 0): a runaway statement would "
                "hold a server connection forever; a transaction pooler refuses the setting "
                "at connect, so set it on the server for durably's database or role (ALTER "
                "DATABASE ... SET statement_timeout = '30s', or ALTER ROLE ...)"
            )
        if str(timeout).strip() in ("0", "0ms", "0s"):
            raise ConfigurationError(
                "connections have no statement_timeout (it is 0): a runaway statement would "
                "hold a pooled connection forever; set one (e.g. options='-c "
                "statement_timeout=30000', or PostgresStoreSettings + open_pool())"
            )
        if durable:
            _refuse_lossy_commits(*(await session.fetch(queries["durability"]))[0])


def _refuse_lossy_commits(synchronous_commit: str, fsync: str) -> None:
    """A commit acknowledged before its WAL reaches the disk can vanish in a crash: the
    item, step record or wakeup the caller was told about. ``local`` still flushes."""
    if synchronous_commit == "off":
        raise ConfigurationError(
            "the server acknowledges commits before they are on disk (synchronous_commit = "
            "off, for this role, database or server): a crash loses acknowledged work; set "
            "it on (ALTER DATABASE ... SET synchronous_commit = on), or pass durable=False "
            "in PostgresStoreSettings (?durable=false in a DSN) to accept the loss"
        )
    if fsync == "off":
        raise ConfigurationError(
            "the server never flushes to disk (fsync = off): a crash loses acknowledged "
            "work and can corrupt the database; turn fsync on, or pass durable=False in "
            "PostgresStoreSettings (?durable=false in a DSN) to accept the loss"
        )


__all__ = ["migrate", "verify"]
