"""The in-memory workflow catalog (`durably.stores.catalog.Cataloguing`): entries in a
dict and their marks in one list, sorted when a read finds it out of order. For tests
and demos: a line is the marks walked back from a bisected place, keeping those of the
line, so a page of a sparse line may pass many entries, which the stores kept on disk or
a server answer from an index of their own."""

from __future__ import annotations

import bisect
from collections.abc import Callable

from durably.stores.catalog import CatalogEntry, Line, Listed, Mark
from durably.stores.status import WorkflowInfo, WorkflowStatus


class MemoryCatalog:
    """Catalog entries by workflow key; ``status_of`` reads a workflow's status row."""

    def __init__(self, status_of: Callable[[str], WorkflowInfo | None]) -> None:
        self._entries: dict[str, CatalogEntry] = {}
        # Every entry's mark, oldest first once sorted; a dropped entry's stays until then.
        self._marks: list[Mark] = []
        self._sorted = True
        self._status_of = status_of

    def enter(self, workflow: str, entry: CatalogEntry) -> None:
        """Keep ``entry`` for ``workflow`` unless one is there."""
        if workflow in self._entries:
            return
        self._entries[workflow] = entry
        mark = (entry.created_us, workflow)
        if self._marks and mark < self._marks[-1]:
            self._sorted = False
        self._marks.append(mark)

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
        if not self._sorted or len(self._marks) > 2 * len(self._entries) + 64:
            kept = {m for m in self._marks if m[1] in self._entries}
            self._marks = sorted(kept)  # a workflow dropped and entered again: once
            self._sorted = True
        place = len(self._marks) if before is None else bisect.bisect_left(self._marks, before)
        rows: list[Listed] = []
        last = None
        while place > 0 and len(rows) < limit:
            place -= 1
            created, workflow = mark = self._marks[place]
            if created < since_us:
                break
            if mark == last:
                continue  # entered again since the marks were sorted
            last = mark
            entry = self._entries.get(workflow)
            if entry is None or entry.created_us != created:
                continue  # dropped (or dropped and entered again, under its new mark)
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
        return rows

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
