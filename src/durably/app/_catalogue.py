"""How the App enters its workflows in the store's catalog and reads rows of it back.

Rows come back as `WorkflowInfo`s with the user's ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durably.app import _layout as layout
from durably.app import _tenancy as tenancy
from durably.stores.catalog import (
    MAX_CATALOG_BATCH,
    CatalogEntry,
    Cataloguing,
    Listed,
    micros,
    moment,
)
from durably.stores.status import WorkflowInfo
from durably.stores.workflows import Checkpointer


def entry_of(start: Mapping[str, Any]) -> CatalogEntry:
    """The catalog entry of a workflow whose start record is ``start``."""
    return CatalogEntry(
        tenant=str(start["tenant"]),
        kind=str(start["kind"]),
        created_us=micros(float(start["created"])),
        parent=layout.parent_key(start) if start.get("parent") is not None else None,
    )


async def catalogue(checkpointer: Checkpointer[Any], key: str, start: object) -> None:
    """Enter the workflow keyed ``key`` in the catalog, if the store keeps one.

    Only when ``start`` is a start record an App wrote; an entry there already is kept.
    """
    # Not isinstance(Cataloguing): a protocol check of four methods on every start.
    enter = getattr(checkpointer, "catalog", None)
    if enter is not None:
        entry = _entry_or_none(start)
        if entry is not None:
            await enter(key, entry)


def _entry_or_none(start: object) -> CatalogEntry | None:
    """The catalog entry of start record ``start``; None for one not of an App's shape."""
    if not isinstance(start, dict):
        return None
    try:
        return entry_of(start)
    except (KeyError, TypeError, ValueError):
        return None


async def catalogue_earlier(checkpointer: Checkpointer[Any], *, page: int = 1000) -> int:
    """Enter every workflow an App started that the catalog lacks; the number looked at.

    For a store written before it kept a catalog (and repairs a start that crashed
    between its record and its entry): reads every workflow's start record, page by page.
    """
    seen = 0
    after: str | None = None
    while True:
        keys = await checkpointer.workflows(after=after, limit=page)
        entries: list[tuple[str, CatalogEntry]] = []
        for key in keys:
            start = (await checkpointer.peek(key, [layout.START])).get(layout.START)
            if start is not None:
                seen += 1
                entry = _entry_or_none(start)
                if entry is not None:
                    entries.append((key, entry))
        if entries and isinstance(checkpointer, Cataloguing):
            for first in range(0, len(entries), MAX_CATALOG_BATCH):  # one write a batch
                await checkpointer.catalog_many(entries[first : first + MAX_CATALOG_BATCH])
        if len(keys) < page:
            return seen
        after = keys[-1]


def user_id(key: str) -> str:
    """The id within its tenant of the workflow keyed ``key``."""
    scoped = tenancy.scoped_key(key)
    return key if scoped is None else scoped[1]


def info_of(row: Listed) -> WorkflowInfo:
    """A catalog row as the App shows a workflow.

    Its id and tenant, kind, created time, parent id, and its status (pending before its
    first report).
    """
    created = moment(row.entry.created_us)
    info = row.info
    # Built whole (not dataclasses.replace, several times dearer): a listing makes one a row.
    return WorkflowInfo(
        user_id(row.workflow),
        row.status if info is None else info.status,
        0 if info is None else info.attempts,
        None if info is None else info.last_error,
        created if info is None else info.updated_at,
        kind=row.entry.kind,
        tenant=row.entry.tenant,
        created=created,
        parent=None if row.entry.parent is None else user_id(row.entry.parent),
        forked_from=None if info is None else info.forked_from,
        forks=() if info is None else info.forks,
    )


__all__ = ["catalogue", "catalogue_earlier", "entry_of", "info_of", "user_id"]
