"""The in-memory workflow catalog (`durably.stores.catalog.Cataloguing`): entries in a
dict, each line sorted on demand. For tests and demos: a page costs a pass over every
entry, which the stores kept on disk or a server answer from an index."""

from __future__ import annotations

from collections.abc import Callable

from durably.stores.catalog import CatalogEntry, Line, Listed, Mark
from durably.stores.status import WorkflowInfo, WorkflowStatus


class MemoryCatalog:
    """Catalog entries by workflow key; ``status_of`` reads a workflow's status row."""

    def __init__(self, status_of: Callable[[str], WorkflowInfo | None]) -> None:
        self._entries: dict[str, CatalogEntry] = {}
        self._status_of = status_of

    def enter(self, workflow: str, entry: CatalogEntry) -> None:
        """Keep ``entry`` for ``workflow`` unless one is there."""
        self._entries.setdefault(workflow, entry)

    def kind_of(self, workflow: str) -> str | None:
        """The kind of a catalogued ``workflow``, or None."""
        entry = self._entries.get(workflow)
        return None if entry is None else entry.kind

    def tenant_of(self, workflow: str) -> str | None:
        """The tenant of a catalogued ``workflow``, or None."""
        entry = self._entries.get(workflow)
        return None if entry is None else entry.tenant

    def drop(self, workflow: str) -> None:
        """Take ``workflow`` out of every line."""
        self._entries.pop(workflow, None)

    def listed(self, line: Line, before: Mark | None, since_us: int, limit: int) -> list[Listed]:
        """Up to ``limit`` rows of ``line`` before ``before``, created at or after
        ``since_us``, newest first."""
        rows = []
        for workflow, entry in self._entries.items():
            mark = (entry.created_us, workflow)
            if entry.created_us < since_us or (before is not None and mark >= before):
                continue
            if (line.tenant is not None and entry.tenant != line.tenant) or (
                line.kind is not None and entry.kind != line.kind
            ):
                continue
            if line.parent is not None and entry.parent != line.parent:
                continue
            info = self._status_of(workflow)
            status = WorkflowStatus.PENDING if info is None else info.status
            if line.status is not None and status is not line.status:
                continue
            rows.append(Listed(workflow, entry, status, info))
        rows.sort(key=lambda row: row.mark, reverse=True)
        return rows[:limit]

    def tally(self, tenant: str | None) -> dict[tuple[str, str], int]:
        """(kind, status text) counts of ``tenant``'s entries (None: every tenant's)."""
        counts: dict[tuple[str, str], int] = {}
        for workflow, entry in self._entries.items():
            if tenant is not None and entry.tenant != tenant:
                continue
            info = self._status_of(workflow)
            pair = (entry.kind, (WorkflowStatus.PENDING if info is None else info.status).value)
            counts[pair] = counts.get(pair, 0) + 1
        return counts


__all__ = ["MemoryCatalog"]
