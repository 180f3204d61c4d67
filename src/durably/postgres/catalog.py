"""The workflow catalog in PostgreSQL (`durably.stores.catalog.Cataloguing`): a table with
one index per line; each status write moves an entry's status and counts in its own
statement, and a trigger counts entries and removals."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from durably.postgres import statements
from durably.postgres.executor import Session
from durably.stores.catalog import PENDING_TEXT, CatalogEntry, Line, Listed, Mark, status_text
from durably.stores.status import WorkflowInfo, read_status
from durably.stores.throughput import Minute, rated

_TEMPLATES = statements.load("catalog.sql")
_FAR = 10**16
"""Past every creation time (microseconds): the mark of a read from the newest."""


class PostgresCatalog:
    """The catalog's statements rendered for one set of tables."""

    def __init__(self, names: dict[str, str]) -> None:
        self._sql = statements.render_all(_TEMPLATES, names)

    async def enter(self, session: Session, workflow: str, entry: CatalogEntry) -> None:
        """Catalogue ``workflow`` unless it is."""
        await session.fetch(
            self._sql["enter"],
            workflow,
            entry.tenant,
            entry.kind,
            entry.parent,
            entry.created_us,
            PENDING_TEXT,
        )

    async def enter_many(self, session: Session, entries: list[tuple[str, CatalogEntry]]) -> None:
        """Catalogue each workflow of ``entries`` that is not: one statement, after the
        one that takes its count rows in order (inside the caller's transaction)."""
        await session.fetch(
            self._sql["lock_counts_many"],
            [workflow for workflow, _ in entries],
            [entry.tenant for _, entry in entries],
            [entry.kind for _, entry in entries],
            PENDING_TEXT,
        )
        await session.fetch(
            self._sql["enter_many"],
            [workflow for workflow, _ in entries],
            [entry.tenant for _, entry in entries],
            [entry.kind for _, entry in entries],
            [entry.parent for _, entry in entries],
            [entry.created_us for _, entry in entries],
            PENDING_TEXT,
        )

    async def listed(
        self, session: Session, line: Line, before: Mark | None, since_us: int, limit: int
    ) -> list[Listed]:
        """A slice of ``line``, newest first."""
        named = [n for n in ("tenant", "kind", "status", "parent") if getattr(line, n) is not None]
        values = [getattr(line, n) for n in named]
        created, workflow = before if before is not None else (_FAR, "")
        rows = await session.fetch(
            self._sql["line_" + ("_".join(named) or "all")],
            created,
            workflow,
            since_us,
            limit,
            *(str(value) for value in values),
        )
        return [_listed(row) for row in rows]

    async def tally(self, session: Session, tenant: str | None) -> dict[tuple[str, str], int]:
        """(kind, status text) counts of ``tenant`` (None: every tenant)."""
        rows = await session.fetch(self._sql["tally"], tenant)
        return {(str(row[0]), str(row[1])): int(row[2]) for row in rows}

    async def finished_per_minute(self, session: Session) -> dict[str, list[Minute]]:
        """Catalogued workflows of each kind ended per minute, by the server's clock."""
        rows = await session.fetch(self._sql["finished_per_minute"])
        now = float(rows[0][4])
        kept = [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows if r[0] is not None]
        return rated(kept, now)


def _listed(row: Any) -> Listed:
    workflow, tenant, kind, parent, created, status = (row[i] for i in range(6))
    entry = CatalogEntry(
        str(tenant), str(kind), int(created), None if parent is None else str(parent)
    )
    info = None
    if row[6] is not None:
        info = read_status(
            workflow,
            lambda: WorkflowInfo(
                str(workflow),
                status_text(str(row[6]), str(workflow)),
                int(row[7]),
                row[8],
                row[9].astimezone(UTC),
            ),
        )
    return Listed(str(workflow), entry, status_text(str(status), str(workflow)), info)


__all__ = ["PostgresCatalog"]
