"""The workflow catalog: every started workflow's tenant, kind, parent, creation time and
current status, kept in ordered lines beside the writes, so an operator's page of
workflows (newest first, by any filter) reads a bounded slice of one line and never the
whole store.

A line is one ordering of catalogued workflows by (creation time, key), newest first:
every workflow, those of a tenant, a kind, a status, a parent, a tenant's of one kind, a
tenant's with one status or a kind's with one status. `page` picks the line a filter
reads and drops the rows of it that miss the rest of the filter, examining at most
`SCAN_PER_PAGE` rows per page: a page may hold fewer rows than asked, with a mark to go
on from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from durably.errors import InvalidInputError, UnreadableRecordError
from durably.stores.status import STATUS_RECORD, WorkflowInfo, WorkflowStatus
from durably.stores.throughput import Minute
from durably.validation import identifier, positive_int

SCAN_PER_PAGE = 2000
"""The most catalogued rows one `page` examines: a filter a line does not answer alone
(say a tenant, a kind and a status) returns a short page rather than read on."""

MAX_LINE_READ = 1000
"""The most rows one `Cataloguing.listed` call returns."""

MAX_CATALOG_BATCH = 1000
"""The most workflows one `Cataloguing.catalog_many` call enters."""

PENDING_TEXT = WorkflowStatus.PENDING.value
"""The status of a catalogued workflow that has reported none yet."""


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """What the catalog keeps of a started workflow: its tenant, kind, creation time (whole
    microseconds since the epoch, UTC) and its parent's key (None: no parent)."""

    tenant: str
    kind: str
    created_us: int
    parent: str | None = None

    def __post_init__(self) -> None:
        identifier(self.tenant, "tenant")
        identifier(self.kind, "kind")
        if self.parent is not None:
            identifier(self.parent, "parent")
        if (
            isinstance(self.created_us, bool)
            or not isinstance(self.created_us, int)
            or not 0 <= self.created_us < 10**16
        ):
            raise InvalidInputError(
                f"created_us must be microseconds since 1970, got {self.created_us!r}"
            )


@dataclass(frozen=True, slots=True)
class Line:
    """Which line of the catalog a read follows: every workflow (no field set), or those
    of ``parent``, ``tenant``, ``kind``, ``status``, ``tenant`` and ``kind``, ``tenant`` and
    ``status``, or ``kind`` and ``status``. Any other combination is not a line
    (`InvalidInputError`)."""

    tenant: str | None = None
    kind: str | None = None
    status: WorkflowStatus | None = None
    parent: str | None = None

    def __post_init__(self) -> None:
        named = {
            name
            for name in ("tenant", "kind", "status", "parent")
            if getattr(self, name) is not None
        }
        if named not in _LINES:
            raise InvalidInputError(f"no catalog line orders workflows by {sorted(named)}")
        for name in ("tenant", "kind", "parent"):
            value = getattr(self, name)
            if value is not None:
                identifier(value, name)
        if self.status is not None and not isinstance(self.status, WorkflowStatus):
            raise InvalidInputError(f"status must be a WorkflowStatus, got {self.status!r}")


_LINES: tuple[set[str], ...] = (
    set(),
    {"tenant"},
    {"kind"},
    {"status"},
    {"parent"},
    {"tenant", "kind"},
    {"tenant", "status"},
    {"kind", "status"},
)


Mark = tuple[int, str]
"""A place in a line: (creation time in microseconds, key). A read starts after it."""


@dataclass(frozen=True, slots=True)
class Listed:
    """A catalogued workflow as a line holds it: its key, its catalog entry, its status
    in the catalog and its status row (None: it reported none yet)."""

    workflow: str
    entry: CatalogEntry
    status: WorkflowStatus
    info: WorkflowInfo | None

    @property
    def mark(self) -> Mark:
        """Where this row sits in its lines."""
        return (self.entry.created_us, self.workflow)


@runtime_checkable
class Cataloguing(Protocol):
    """The `Checkpointer` capability that keeps the workflow catalog (every shipped
    checkpointer has it). A status `set_status`, `finish` or `restart` reports moves the
    workflow between status lines; `discard` and `sweep` take it out of every line."""

    async def catalog(self, workflow: str, entry: CatalogEntry) -> None:
        """Enter ``workflow`` in the catalog with ``entry``; an entry already there is kept
        (a repeated call changes nothing). Its status is the one it reported, else
        pending."""
        ...

    async def catalog_many(self, entries: Sequence[tuple[str, CatalogEntry]]) -> None:
        """Enter each ``(workflow, entry)`` as `catalog` does, up to `MAX_CATALOG_BATCH` of
        them in one write (one transaction on SQLite and PostgreSQL, one pipeline on
        Redis); of one workflow named twice the first entry is kept."""
        ...

    async def listed(
        self, line: Line, *, before: Mark | None = None, since_us: int = 0, limit: int = 100
    ) -> list[Listed]:
        """Up to ``limit`` (1 to `MAX_LINE_READ`) workflows of ``line``, newest first
        (creation time, then key, both descending): those before ``before`` created at or
        after ``since_us``. Reads a slice of one ordered index, whatever the store holds."""
        ...

    async def repair_catalog(self, *, limit: int = 500) -> int:
        """Bring the catalog's step of up to ``limit`` status writes that a killed process
        left undone, from each workflow's status as it stands: the number of workflows
        stepped. Safe beside other repairs and the writes themselves. A store whose status
        write keeps the catalog in the same write has nothing to repair (0)."""
        ...

    async def tally(self, tenant: str | None = None) -> dict[tuple[str, WorkflowStatus], int]:
        """How many catalogued workflows of ``tenant`` (None: every tenant) each
        (kind, status) pair has; pairs with none are left out."""
        ...

    async def finished_per_minute(self) -> dict[str, list[Minute]]:
        """How many catalogued workflows of each kind completed and failed in each of the
        last `MINUTES` minutes of the store's clock, oldest first; kinds and minutes with
        none are left out. Reads the ring of counts the status writes keep
        (`durably.stores.throughput`), never the workflows."""
        ...


@dataclass(frozen=True, slots=True)
class Filter:
    """What a catalog page selects: every field None selects every workflow."""

    tenant: str | None = None
    kind: str | None = None
    status: WorkflowStatus | None = None
    parent: str | None = None
    since_us: int = 0
    until_us: int | None = None

    def line(self) -> Line:
        """The line that answers the most of this filter (the rest is checked per row)."""
        if self.parent is not None:
            return Line(parent=self.parent)
        if self.tenant is not None and self.status is not None:
            return Line(tenant=self.tenant, status=self.status)
        if self.tenant is not None:
            return Line(tenant=self.tenant, kind=self.kind)
        return Line(kind=self.kind, status=self.status)

    def answered(self) -> bool:
        """Whether `line` alone answers this filter (no row of it is dropped)."""
        line = self.line()
        return all(
            getattr(self, name) is None or getattr(line, name) is not None
            for name in ("tenant", "kind", "status")
        )

    def admits(self, row: Listed) -> bool:
        """Whether ``row`` passes every field of this filter."""
        entry = row.entry
        return (
            (self.tenant is None or entry.tenant == self.tenant)
            and (self.kind is None or entry.kind == self.kind)
            and (self.status is None or row.status is self.status)
            and (self.parent is None or entry.parent == self.parent)
        )


@dataclass(frozen=True, slots=True)
class Page:
    """A page of the catalog: its rows newest first, and the mark the next page starts
    after (None: nothing further matches)."""

    rows: list[Listed]
    next: Mark | None


async def page(
    store: Cataloguing, selection: Filter, *, limit: int, after: Mark | None = None
) -> Page:
    """Up to ``limit`` workflows ``selection`` admits after mark ``after``, newest first,
    examining at most `SCAN_PER_PAGE` rows of one line (a short page then carries a mark)."""
    positive_int(limit, "limit")
    line = selection.line()
    before = after
    if selection.until_us is not None and (before is None or before[0] >= selection.until_us):
        before = (selection.until_us, "")  # created strictly before the bound
    found: list[Listed] = []
    scanned = 0
    # A line that answers the whole filter is read for the page and one row more (is
    # there a next page?); one whose rows are checked is read in larger stretches.
    exact = selection.answered()
    while True:
        wanted = limit - len(found) + 1 if exact else max(limit - len(found), 100)
        want = min(MAX_LINE_READ, wanted, SCAN_PER_PAGE - scanned)
        rows = await store.listed(line, before=before, since_us=selection.since_us, limit=want)
        for index, row in enumerate(rows):
            scanned += 1
            if selection.admits(row):
                found.append(row)
                if len(found) == limit:
                    more = index + 1 < len(rows) or len(rows) == want
                    return Page(found, row.mark if more else None)
        if len(rows) < want:
            return Page(found, None)
        before = rows[-1].mark
        if scanned >= SCAN_PER_PAGE:
            return Page(found, before)


def status_text(value: str | bytes, workflow: str) -> WorkflowStatus:
    """A catalog row's stored status; `UnreadableRecordError` for text no status has."""
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    try:
        return WorkflowStatus(text)
    except ValueError:
        raise UnreadableRecordError(
            workflow, {STATUS_RECORD: f"no workflow status is {text[:40]!r}"}
        ) from None


def micros(moment: datetime | float) -> int:
    """``moment`` (aware datetime or epoch seconds) in whole microseconds since the epoch."""
    seconds = moment.timestamp() if isinstance(moment, datetime) else float(moment)
    if not math.isfinite(seconds):
        raise InvalidInputError(f"not a time: {moment!r}")
    return round(seconds * 1_000_000)


def moment(created_us: int) -> datetime:
    """Microseconds since the epoch as an aware UTC datetime."""
    return datetime.fromtimestamp(created_us / 1_000_000, UTC)


def tallied(rows: Mapping[tuple[str, str], int]) -> dict[tuple[str, WorkflowStatus], int]:
    """Stored (kind, status text) counts as a tally: zero and unknown statuses left out."""
    known = {status.value: status for status in WorkflowStatus}
    counts: dict[tuple[str, WorkflowStatus], int] = {}
    for (kind, text), count in rows.items():
        status = known.get(text)
        if status is not None and count > 0:
            counts[(kind, status)] = counts.get((kind, status), 0) + count
    return counts


def catalog_batch(entries: object) -> list[tuple[str, CatalogEntry]]:
    """The entries of a `Cataloguing.catalog_many` call, each workflow once (its first
    entry), refused before any I/O when they are not (workflow, `CatalogEntry`) pairs or
    more than `MAX_CATALOG_BATCH`."""
    if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence):
        raise InvalidInputError(
            f"entries must be a sequence of (workflow, CatalogEntry), got {type(entries).__name__}"
        )
    if len(entries) > MAX_CATALOG_BATCH:
        raise InvalidInputError(
            f"entries must be at most {MAX_CATALOG_BATCH} a call, got {len(entries)}"
        )
    kept: dict[str, CatalogEntry] = {}
    for pair in entries:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], CatalogEntry)):
            raise InvalidInputError(f"each entry must be (workflow, CatalogEntry), got {pair!r}")
        kept.setdefault(identifier(pair[0], "workflow"), pair[1])
    return list(kept.items())


def line_read(line: object, since_us: object, limit: object) -> None:
    """Refuse a `Cataloguing.listed` call's arguments before any I/O."""
    if not isinstance(line, Line):
        raise InvalidInputError(f"line must be a Line, got {type(line).__name__}")
    if isinstance(since_us, bool) or not isinstance(since_us, int) or since_us < 0:
        raise InvalidInputError(f"since_us must be a non-negative int, got {since_us!r}")
    positive_int(limit, "limit")
    if limit > MAX_LINE_READ:  # type: ignore[operator]
        raise InvalidInputError(f"limit must be at most {MAX_LINE_READ}, got {limit}")


__all__ = [
    "MAX_CATALOG_BATCH",
    "MAX_LINE_READ",
    "PENDING_TEXT",
    "SCAN_PER_PAGE",
    "CatalogEntry",
    "Cataloguing",
    "Filter",
    "Line",
    "Listed",
    "Mark",
    "Page",
    "catalog_batch",
    "line_read",
    "micros",
    "moment",
    "page",
    "status_text",
    "tallied",
]
