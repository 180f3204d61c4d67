"""The workflow catalog in a SQLite file (`durably.stores.catalog.Cataloguing`): a table
with one index per line, its status and counts kept by triggers with every write."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from durably.sqlite.connection import Transaction
from durably.sqlite.statements import load_statements
from durably.stores.catalog import (
    PENDING_TEXT,
    CatalogEntry,
    Line,
    Listed,
    Mark,
    status_text,
)
from durably.stores.status import WorkflowInfo, int_field, read_status, text_field
from durably.stores.throughput import Minute, first_minute, rated

_SQL = load_statements("catalog.sql")
_FAR = 10**16
"""Past every creation time (microseconds): the mark of a read from the newest."""


def line_statement(line: Line) -> str:
    """The name of the statement that reads ``line``."""
    named = [n for n in ("tenant", "kind", "status", "parent") if getattr(line, n) is not None]
    return "line_" + ("_".join(named) or "all")


def line_params(line: Line, before: Mark | None, since_us: int, limit: int) -> dict[str, object]:
    """The parameters of ``line``'s statement."""
    created, workflow = before if before is not None else (_FAR, "")
    return {
        "tenant": line.tenant,
        "kind": line.kind,
        "status": None if line.status is None else line.status.value,
        "parent": line.parent,
        "created": created,
        "workflow": workflow,
        "since": since_us,
        "limit": limit,
    }


def enter(tx: Transaction, workflow: str, entry: CatalogEntry) -> None:
    """Catalogue ``workflow`` unless it is."""
    tx.execute(_SQL["enter"], _entered(workflow, entry))


def enter_many(tx: Transaction, entries: list[tuple[str, CatalogEntry]]) -> None:
    """Catalogue each workflow of ``entries`` that is not."""
    tx.cursor().executemany(_SQL["enter"], [_entered(w, e) for w, e in entries])


def _entered(workflow: str, entry: CatalogEntry) -> dict[str, object]:
    return {
        "workflow": workflow,
        "tenant": entry.tenant,
        "kind": entry.kind,
        "parent": entry.parent,
        "created": entry.created_us,
        "pending": PENDING_TEXT,
    }


def drop(tx: Transaction, workflow: str) -> None:
    """Take ``workflow`` out of the catalog."""
    tx.execute(_SQL["drop"], {"workflow": workflow})


def listed(
    tx: Transaction, line: Line, before: Mark | None, since_us: int, limit: int
) -> list[Listed]:
    """A slice of ``line``, newest first."""
    rows = tx.texts(_SQL[line_statement(line)], line_params(line, before, since_us, limit))
    return [_listed(row) for row in rows]


def tally(tx: Transaction, tenant: str | None) -> dict[tuple[str, str], int]:
    """(kind, status text) counts of ``tenant`` (None: every tenant)."""
    rows = tx.texts(_SQL["tally"], {"tenant": tenant})
    return {(text_field(row[0]), text_field(row[1])): int(row[2]) for row in rows}


def finished_per_minute(tx: Transaction) -> dict[str, list[Minute]]:
    """Catalogued workflows of each kind ended per minute, by SQLite's own clock (the one
    the status writes are timed by)."""
    now = tx.store_now
    rows = tx.texts(_SQL["finished_per_minute"], {"first": first_minute(now)})
    return rated([(text_field(r[0]), r[1], r[2], r[3]) for r in rows], now)


def _listed(row: sqlite3.Row) -> Listed:
    workflow = text_field(row["workflow"])
    entry = CatalogEntry(
        text_field(row["tenant"]),
        text_field(row["kind"]),
        int_field(row["created"]),
        None if row["parent"] is None else text_field(row["parent"]),
    )
    info = None
    if row["reported"] is not None:
        info = read_status(
            workflow,
            lambda: WorkflowInfo(
                workflow,
                status_text(text_field(row["reported"]), workflow),
                int_field(row["attempts"]),
                None if row["last_error"] is None else text_field(row["last_error"]),
                datetime.fromtimestamp(row["updated_at"], tz=UTC),
            ),
        )
    return Listed(workflow, entry, status_text(text_field(row["status"]), workflow), info)


__all__ = ["drop", "enter", "enter_many", "line_params", "line_statement", "listed", "tally"]
