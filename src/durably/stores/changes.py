"""Announcements that a workflow changed: what wakes a waiting handle without polling.

A checkpointer that has the `Announcing` capability announces, with each write, which
workflow changed and how: `ENDED` when a report ended it (completed, failed, cancelled)
or its records were discarded, `RECORDS` when a record or a message landed (an event, a
child's end, a message). A status report that does not end the workflow is not announced.
The announcement goes out with the write itself (PostgreSQL's NOTIFY in the same statement,
Redis's PUBLISH in the same script, in-process after the commit on SQLite and memory), so
the write costs one round trip as before.

A `ChangeFeed` hands the announcements of every process writing to the store to one
subscriber per process (the App's waiters share it). When the feed may have missed some
(its connection dropped, another process wrote to a SQLite file), it says so with a
`MISSED` announcement: every waiter looks again. While the feed is not `live`, waiters
poll.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

ENDED = "e"
"""A status report ended the workflow (completed, failed or cancelled), or its records
were discarded. A report that does not end it is not announced."""
RECORDS = "r"
"""A record or a message of the workflow landed."""
MISSED = ""
"""Announcements may have been missed: every waiter looks again."""

OnChange = Callable[[str, str], None]
"""Called with ``(workflow, what)`` per announcement, ``what`` being `ENDED` or
`RECORDS`; with ``("", MISSED)`` when announcements may have been missed. Called on the
event loop the feed was started on; it must not block."""


@runtime_checkable
class ChangeFeed(Protocol):
    """The announcements of every process writing to one store, for one subscriber."""

    @property
    def live(self) -> bool:
        """Whether announcements arrive now (False while a listening connection is down,
        and before `start`): waiters poll while it is False."""
        ...

    def start(self, on_change: OnChange) -> None:
        """Deliver every announcement to ``on_change`` from now on, on the running event
        loop (a feed serves one subscriber; a second `start` replaces the first)."""
        ...

    async def stop(self) -> None:
        """Stop delivering and release what the feed holds (idempotent); the subscriber
        is told `MISSED` first, so a waiter that slept on the feed polls from then on."""
        ...


@runtime_checkable
class Announcing(Protocol):
    """The optional `Checkpointer` capability of announcing its writes. Every shipped
    checkpointer has it; a waiter on one without it polls."""

    @property
    def changes(self) -> ChangeFeed:
        """The feed of this store's announcements (one per checkpointer)."""
        ...


RecordSelector = Callable[[str], bool]
"""Whether a record a pass writes under a key is announced (`AnnouncingSome`)."""


def every_record(key: str) -> bool:
    """The default `RecordSelector`: every record a pass writes is announced."""
    return True


@runtime_checkable
class AnnouncingSome(Protocol):
    """The optional capability of announcing only the records of a pass its owner waits
    for. Every shipped checkpointer has it.

    An announcement is not free on every backing: on PostgreSQL a transaction that
    notifies takes a lock every notifying commit of the server shares, up to and through
    its commit's flush, so notifying commits line up one behind another; on Redis every
    subscribed process reads every message. The App waits only for events, so it selects
    those, and a step's record goes unannounced."""

    def announce_records(self, selected: RecordSelector) -> None:
        """From now on, announce a record a pass writes (`record`, and `transact` where
        the store announces it: not on Redis) only when ``selected`` takes its key (every
        one until this is called). Records written from outside a pass (`supply`,
        messages) and every end are announced as before."""
        ...


def payload(workflow: str, what: str) -> str:
    """The text an announcement travels as (a NOTIFY payload, a pub/sub message)."""
    return what + workflow


def parsed(text: str | bytes) -> tuple[str, str] | None:
    """``(workflow, what)`` of an announcement's `payload`; None for text that is not one."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    what, workflow = text[:1], text[1:]
    if what not in (ENDED, RECORDS) or not workflow:
        return None
    return workflow, what


class LocalChanges:
    """A `ChangeFeed` of the writes of this process alone: the writer calls `announce`
    after each write lands (memory; SQLite adds the other processes' writes)."""

    def __init__(self) -> None:
        self._on_change: OnChange | None = None

    @property
    def live(self) -> bool:
        return self._on_change is not None

    def start(self, on_change: OnChange) -> None:
        self._on_change = on_change

    async def stop(self) -> None:
        self.announce("", MISSED)
        self._on_change = None

    def announce(self, workflow: str, what: str) -> None:
        """Hand ``workflow``'s change to the subscriber, if there is one."""
        on_change = self._on_change
        if on_change is not None:
            on_change(workflow, what)


__all__ = [
    "ENDED",
    "MISSED",
    "RECORDS",
    "Announcing",
    "AnnouncingSome",
    "ChangeFeed",
    "LocalChanges",
    "OnChange",
    "RecordSelector",
    "every_record",
    "parsed",
    "payload",
]
