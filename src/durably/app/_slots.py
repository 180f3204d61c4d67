"""A debounced workflow's slot, let go of once the workflow began, ended or was deleted.

The slot (`durably.stores.debounce`) names the one pending workflow of a debounce key. A
workflow that will never take it again must not stay named there: a later start of the key
would join it instead of making a workflow of its own, and the store would keep a row per
key ever used. So the slot is deleted when the body takes its arguments, and by every
write that ends the workflow before its finished status (a body's recorded end, the end a
cancel writes where no pass runs) or deletes it; a deletion only ever removes a slot that
still names the workflow, so repeating one is safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durably.app import _layout as layout
from durably.app import _tenancy as tenancy
from durably.errors import UnreadableRecordError
from durably.stores.opening import Stores
from durably.stores.work import WorkQueue


async def release_slot(queue: WorkQueue, key: str, start: Mapping[str, Any]) -> bool:
    """Delete the debounce slot of the workflow keyed ``key``, if it still names it.

    ``start`` is the workflow's start record; a start that was not debounced holds none.
    Returns whether a slot was deleted.
    """
    slot = start.get("debounce")
    if not isinstance(slot, str):
        return False
    _, workflow = tenancy.scope(key, start)
    released: bool = await queue.release_debounced(slot, workflow)  # type: ignore[attr-defined]
    return released


async def delete_workflow(stores: Stores, key: str, kind: str) -> int:
    """Delete the workflow stored under ``key``: its debounce slot, wakeups and records.

    ``kind`` names the scheduler that holds its wakeups. The slot goes first: a deletion
    that fails after it leaves a workflow that runs with its own start's arguments, never
    a slot naming nothing. Returns the number of records discarded.
    """
    try:
        start = (await stores.checkpointer.peek(key, [layout.START])).get(layout.START)
    except UnreadableRecordError:
        start = None  # not a start record an App wrote: it holds no slot
    if isinstance(start, dict):
        await release_slot(stores.queue, key, start)
    return await stores.durable(kind).delete(key)


__all__ = ["delete_workflow", "release_slot"]
