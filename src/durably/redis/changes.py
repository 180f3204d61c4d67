"""`RedisChanges`: the checkpointer's announcements, by pub/sub on one connection.

Every write a waiter may care about PUBLISHes on the key prefix's changes channel from
inside its own script (`workflow_lib.lua`'s ``announce``). One subscribed connection
serves the whole process. Pub/sub keeps nothing for a subscriber that is away, so each
(re)subscription and each loss of the connection announces `MISSED` (every waiter looks
once); while it is down (it reconnects with backoff) the feed is not live and waiters poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from typing import Any

from durably.stores.changes import ENDED, MISSED, RECORDS, OnChange

_log = logging.getLogger("durably.redis")

RECONNECT_SECONDS = 0.2
"""The first pause before subscribing again after the connection was lost (doubling to 5 s)."""


def workflow_of(message: bytes) -> tuple[str, str] | None:
    """``(workflow, what)`` of a published announcement: ``what`` then the workflow's hash
    tag, ``{<byte length>:<id>}``, and the rest of the key; None for anything else."""
    what = message[:1].decode(errors="replace")
    if what not in (ENDED, RECORDS) or message[1:2] != b"{":
        return None
    length, colon, rest = message[2:].partition(b":")
    if not colon or not length.isdigit():
        return None
    size = int(length)
    if len(rest) < size:
        return None
    return rest[:size].decode(errors="replace"), what


async def _next_message(pubsub: Any) -> Any:
    """The next message of ``pubsub`` within a second (None: none came).

    Read in a task of its own and awaited through a shield: a cancel of the caller then
    always reaches the caller, which redis-py may otherwise take for the read's timeout and
    lose (the read, cancelled too, ends within its second either way)."""
    reading = asyncio.ensure_future(pubsub.get_message(timeout=1.0))
    try:
        return await asyncio.shield(reading)
    except asyncio.CancelledError:
        reading.cancel()
        # Nobody awaits it now: its end (an error of a connection being closed) is read here.
        reading.add_done_callback(lambda done: done.cancelled() or done.exception())
        raise


class RedisChanges:
    """A `durably.stores.changes.ChangeFeed` over SUBSCRIBE on ``channel``."""

    def __init__(self, client: Any, channel: str) -> None:
        self._client = client
        self._channel = channel
        self._on_change: OnChange | None = None
        self._task: asyncio.Task[None] | None = None
        self._subscribed = False
        self._stopping = False

    @property
    def channel(self) -> str:
        """The channel the scripts publish on."""
        return self._channel

    @property
    def live(self) -> bool:
        return self._on_change is not None and self._subscribed

    def start(self, on_change: OnChange) -> None:
        self._on_change = on_change
        self._stopping = False
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        # Besides the cancel: a cancel that lands as redis-py's read times out is taken for
        # the timeout and lost, and the loop would read on; it checks this flag each second.
        self._stopping = True
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._missed()
        self._on_change = None

    async def ready(self, timeout: float = 5.0) -> bool:
        """Wait until subscribed (for tests and benchmarks); whether it is."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self._subscribed and loop.time() < deadline:
            await asyncio.sleep(0.01)
        return self._subscribed

    def _missed(self) -> None:
        on_change = self._on_change
        if on_change is not None:
            on_change("", MISSED)

    async def _run(self) -> None:
        delay = RECONNECT_SECONDS
        while not self._stopping:
            pubsub = self._client.pubsub()
            try:
                await pubsub.subscribe(self._channel)
                while not self._stopping:
                    message = await _next_message(pubsub)
                    if message is None:
                        continue
                    kind = message.get("type")
                    if kind in ("subscribe", b"subscribe"):
                        # Subscribed (again, if the client reconnected by itself): whatever
                        # was published meanwhile is gone.
                        self._subscribed = True
                        delay = RECONNECT_SECONDS
                        self._missed()
                    elif kind in ("message", b"message"):
                        data = message.get("data")
                        change = workflow_of(data.encode() if isinstance(data, str) else data)
                        on_change = self._on_change
                        if change is not None and on_change is not None:
                            on_change(*change)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the connection dropped: poll until it is back
                _log.warning("durably change feed lost its connection (%s)", type(error).__name__)
            finally:
                # Closed without its event loop (the task was dropped, GeneratorExit): no
                # await may run now, and the connection goes with the loop.
                dropped = isinstance(sys.exc_info()[1], GeneratorExit)
                was = self._subscribed
                self._subscribed = False
                if was:
                    self._missed()
                if not dropped:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(pubsub.aclose(), 1.0)
            if self._stopping:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


__all__ = ["RECONNECT_SECONDS", "RedisChanges", "workflow_of"]
