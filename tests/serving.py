"""`served`: an App serving its workflows in the background for the length of a block."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from durably import App


@contextlib.asynccontextmanager
async def served(app: App) -> AsyncIterator[None]:
    """Run ``app.serve()`` (stores opened first) until the block ends, then stop it."""
    await app.stores()
    serving = asyncio.create_task(app.serve(signals=False))
    try:
        yield
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
