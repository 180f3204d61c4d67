"""`Cancels`: how a running pass learns of a cancel that arrived after it began.

A pass reads the cancel marker with its records when it starts. A cancel made later is
seen before the body's next fresh step: at once when this process made it, otherwise by a
look at the workflow's records at most once per `LOOK_SECONDS` of the pass.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from durably.stores.opening import Stores

LOOK_SECONDS = 1.0
"""How often, at most, a pass reads its records to see a cancel from another process: a
cancel from elsewhere reaches a running body within about a second (at its next call
after the look), for one read a second of a long pass."""


class Cancels:
    """The cancels this process asked for, and a rate-limited look for the others."""

    def __init__(self, stores: Callable[[], Awaitable[Stores]]) -> None:
        self._stores = stores
        self._asked: set[str] = set()
        self._looked: dict[str, float] = {}

    def asked(self, workflow: str) -> None:
        """Note that this process cancelled ``workflow``."""
        self._asked.add(workflow)

    def due(self, workflow: str) -> bool:
        """Whether `arrived` may say anything but False for ``workflow`` now (a cheap
        check, without I/O, that a pass makes before each fresh step)."""
        if workflow in self._asked:
            return True
        now = time.monotonic()
        return now - self._looked.setdefault(workflow, now) >= LOOK_SECONDS

    async def arrived(self, workflow: str, marker: str) -> bool:
        """Whether a cancel for ``workflow`` (its ``marker``) is known now."""
        if not self.due(workflow):
            return False
        if workflow in self._asked:
            return True
        now = time.monotonic()
        self._looked[workflow] = now
        found = await (await self._stores()).checkpointer.peek(workflow, [marker])
        return marker in found

    def forget(self, workflow: str) -> None:
        """Drop what is kept for ``workflow`` (its pass ended)."""
        self._asked.discard(workflow)
        self._looked.pop(workflow, None)


__all__ = ["LOOK_SECONDS", "Cancels"]
