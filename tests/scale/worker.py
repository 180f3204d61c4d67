"""A worker process of the scale tests: ``python -m tests.scale.worker DSN LEDGER SECONDS``
serves the shop's workflows for SECONDS, then stops (its grace lets a pass finish)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.scale.shop import build


async def main(dsn: str, ledger: str, seconds: float) -> None:
    app, _ = build(dsn, Path(ledger))
    try:
        serving = asyncio.create_task(app.serve(signals=False, poll=0.2, concurrency=4))
        await asyncio.sleep(seconds)
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    finally:
        await app.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
