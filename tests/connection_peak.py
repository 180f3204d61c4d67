"""`Peak`: the most connections a server reports for one client while a test runs, sampled
from the server itself (PostgreSQL's ``pg_stat_activity``, Redis's ``CLIENT LIST``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from types import TracebackType


class Peak:
    """Samples ``count()`` every ``every`` seconds inside ``async with``; ``most`` is the
    highest count seen, ``samples`` how many were taken."""

    def __init__(self, count: Callable[[], Awaitable[int]], every: float = 0.02) -> None:
        self._count = count
        self._every = every
        self._task: asyncio.Task[None] | None = None
        self.most = 0
        self.samples = 0

    async def _sample(self) -> None:
        while True:
            self.most = max(self.most, await self._count())
            self.samples += 1
            await asyncio.sleep(self._every)

    async def __aenter__(self) -> Peak:
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.most = max(self.most, await self._count())  # and once more at the end
