"""A workflow kind's ``concurrency=`` across worker processes sharing one SQLite file: the
gate is kept by the store, so separate processes obey it together. How many bodies ran at
once is read from a ledger the bodies write, never from the store.

Run as a script, this module is the worker process itself:
``python test_workflow_gate_processes.py DB NAME``.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from durably.app import App, Context, Workflow

LIMIT = 2
STARTS = 8
WORKERS = 3


def build(path: Path, name: str) -> tuple[App, Workflow[[int], int]]:
    app = App(f"sqlite:///{path}")
    ledger = path.with_name(f"ledger-{name}.tsv")

    @app.workflow(name="gated", concurrency=LIMIT)
    async def gated(ctx: Context, n: int) -> int:
        began = time.time()
        await asyncio.sleep(0.1)  # the body's work, long enough for others to overlap
        with ledger.open("a") as sink:  # a line a pass, in a file of this process
            sink.write(f"{n}\t{began!r}\t{time.time()!r}\n")
        return n

    return app, gated


async def serve(path: Path, name: str) -> None:
    app, _ = build(path, name)
    serving = asyncio.create_task(app.serve(signals=False, poll=0.05, concurrency=4))
    path.with_name(f"ready-{name}").touch()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)
    await app.close()


def runs(path: Path) -> list[tuple[int, float, float]]:
    found = []
    for part in path.parent.glob("ledger-*.tsv"):
        for line in part.read_text().splitlines():
            n, began, ended = line.split("\t")
            found.append((int(n), float(began), float(ended)))
    return found


def most_at_once(spans: list[tuple[int, float, float]]) -> int:
    edges = sorted([(began, 1) for _, began, _ in spans] + [(ended, -1) for _, _, ended in spans])
    most = now = 0
    for _, step in edges:  # an end sorts before a begin at the same instant
        now += step
        most = max(most, now)
    return most


@pytest.mark.timeout(90)
async def test_a_concurrency_2_kind_never_runs_more_than_2_bodies_over_3_processes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gated.db"
    log = tmp_path / "workers.log"
    app, gated = build(path, "starter")
    try:
        await app.stores()  # the file exists before the workers open it
        with log.open("ab") as sink:
            workers = [
                subprocess.Popen(  # noqa: ASYNC220 -- started once, stopped below
                    [sys.executable, __file__, str(path), f"worker-{n}"],
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                )
                for n in range(WORKERS)
            ]
        try:
            while len(list(tmp_path.glob("ready-*"))) < WORKERS:  # noqa: ASYNC240
                await asyncio.sleep(0.05)
            handles = [await gated.start(n) for n in range(STARTS)]
            results = [await handle.result(timeout=60) for handle in handles]
        finally:
            for process in workers:
                process.send_signal(signal.SIGTERM)
            codes = [process.wait(timeout=20) for process in workers]
        assert codes == [0] * WORKERS, log.read_text()
    finally:
        await app.close()
    assert results == list(range(STARTS))
    spans = runs(path)
    assert sorted(n for n, _, _ in spans) == list(range(STARTS))  # each body ran once
    assert most_at_once(spans) == LIMIT


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[1]), sys.argv[2]))
