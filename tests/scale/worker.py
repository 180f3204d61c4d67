"""A worker process of the scale tests: ``python -m tests.scale.worker DSN LEDGER SECONDS``
serves the shop's workflows for SECONDS, then stops (its grace lets a pass finish).

`start_workers` starts many at once, forked from one server process that imported durably
and its drivers once: sixteen processes each importing them would spend seconds of the
test machine's two cores before serving anything."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
from multiprocessing.process import BaseProcess
from pathlib import Path

from tests.scale.shop import build

# What the fork server imports before forking each worker (the backings' modules are
# otherwise imported when a store opens, in every worker).
PRELOAD = ["tests.scale.worker", "durably.postgres", "durably.redis"]


async def main(dsn: str, ledger: str, seconds: float) -> None:
    app, _ = build(dsn, Path(ledger))
    try:
        serving = asyncio.create_task(app.serve(signals=False, poll=0.2, concurrency=4))
        await asyncio.sleep(seconds)
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    finally:
        await app.close()


def _serve_quietly(dsn: str, ledger: str, seconds: float) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    asyncio.run(main(dsn, ledger, seconds))


def start_workers(count: int, dsn: str, ledger: Path, seconds: float) -> list[BaseProcess]:
    """``count`` worker processes serving ``dsn`` for ``seconds``, each a process of its own
    (forked from a fork server, not from this process and its threads and event loop)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    workers: list[BaseProcess] = [
        context.Process(target=_serve_quietly, args=(dsn, str(ledger), seconds), daemon=True)
        for _ in range(count)
    ]
    for worker in workers:
        worker.start()
    return workers


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
