"""`Cancels`: how a running pass learns of a cancel that arrived after it began.

A pass reads the cancel marker of its generation with its records when it starts. A
cancel made later is seen before the body's next fresh step: at once when this process
made it while the pass ran here, otherwise by a look at the workflow's records at most
once per `LOOK_SECONDS` of the pass.

Only the passes running in this process are kept, each with the marker of its own
generation (`durably.app._layout.cancel_key`): a cancel asked while no pass runs here is
left to the store, where the next pass reads it, and a cancel of an earlier generation
(one a resume has since superseded) never reaches a later pass. What is kept is bounded by
the passes running at once, however many cancels were asked.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from durably.stores.opening import Stores

LOOK_SECONDS = 1.0
"""How often, at most, a pass reads its records to see a cancel from another process: a
cancel from elsewhere reaches a running body within about a second (at its next call
after the look), for one read a second of a long pass."""


@dataclass(slots=True)
class _Running:
    """A pass running in this process: its generation's cancel marker, when it last
    looked at its records, and whether this process asked to cancel that generation."""

    marker: str
    looked: float
    asked: bool = False


class Cancels:
    """The passes running in this process, told at once of a cancel this process asks for,
    and a rate-limited look at the store for cancels from elsewhere."""

    def __init__(self, stores: Callable[[], Awaitable[Stores]]) -> None:
        self._stores = stores
        self._running: dict[str, _Running] = {}

    def begin(self, workflow: str, marker: str) -> object:
        """Note that a pass of ``workflow`` runs here, its generation cancelled by
        ``marker``; gives the token to `forget` it with when the pass ends."""
        running = self._running[workflow] = _Running(marker, time.monotonic())
        return running

    def asked(self, workflow: str, marker: str) -> None:
        """Note that this process cancelled ``workflow``'s generation of ``marker`` (its
        marker is recorded): a pass of that generation running here sees it at once."""
        running = self._running.get(workflow)
        if running is not None and running.marker == marker:
            running.asked = True

    def due(self, workflow: str) -> bool:
        """Whether `arrived` may say anything but False for ``workflow`` now (a cheap
        check, without I/O, that a pass makes before each fresh step)."""
        running = self._running.get(workflow)
        if running is None:
            return False
        return running.asked or time.monotonic() - running.looked >= LOOK_SECONDS

    async def arrived(self, workflow: str, marker: str) -> bool:
        """Whether a cancel for ``workflow`` (its ``marker``) is known now."""
        running = self._running.get(workflow)
        if running is None or not self.due(workflow):
            return False
        if running.asked and running.marker == marker:
            return True
        running.looked = time.monotonic()
        found = await (await self._stores()).checkpointer.peek(workflow, [marker])
        return marker in found

    def forget(self, workflow: str, token: object) -> None:
        """Drop what `begin` kept for ``workflow`` (its pass ended), unless a later pass
        of it (one that took over from a pass that lost its claim) began here since."""
        if self._running.get(workflow) is token:
            del self._running[workflow]

    def __len__(self) -> int:
        """The passes kept (those running in this process)."""
        return len(self._running)


__all__ = ["LOOK_SECONDS", "Cancels"]
