"""How soon a second `durably.App` worker process takes over a workflow whose worker was
killed with SIGKILL mid-step, over one SQLite file: within about one ``lease``, never two.

Run as a script, this module is a worker process: ``python test_app_takeover.py DSN EFFECTS
LEASE``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from durably import App, Context

LEASE = 4.0  # short, so the test is fast; the bound is a ratio to it
ARMED = "armed"  # while this file exists beside the effects file, the step hangs


def build(dsn: str, effects: Path, lease: float) -> App:
    """The App every process of these tests registers alike."""
    app = App(dsn, lease=lease)

    @app.step(name="warm")
    async def warm() -> None:
        # Recorded just after the pass's first renewal: the record renews the claim, so
        # the claim outlives the delivery the renewal extended.
        await asyncio.sleep(0.45 * lease)

    @app.step(name="hang")
    async def hang() -> str:
        with effects.open("a") as sink:
            sink.write(f"{time.time()} {os.getpid()}\n")
        if (effects.parent / ARMED).exists():
            await asyncio.sleep(600)  # killed here
        return "done"

    @app.workflow(name="hangs")
    async def hangs(ctx: Context) -> str:
        await warm()
        return await hang()

    return app


def spawn(dsn: str, effects: Path, lease: float) -> subprocess.Popen[bytes]:
    log = effects.with_suffix(f".{len(list(effects.parent.glob('*.log')))}.log")
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, __file__, dsn, str(effects), str(lease)],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


def starts(effects: Path) -> list[tuple[float, int]]:
    """(time, pid) of each start of the step, in order."""
    if not effects.exists():
        return []
    found = []
    for line in effects.read_text().splitlines():
        at, pid = line.split()
        found.append((float(at), int(pid)))
    return found


async def wait_for_starts(effects: Path, count: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while len(starts(effects)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {count} start(s) of the step")
        await asyncio.sleep(0.01)


async def takeover_after_kill(tmp_path: Path, lease: float, kill_after: float) -> float:
    """Start a workflow with two worker processes serving; kill the one whose pass runs the
    step ``kill_after`` seconds into it; the seconds until the other starts the step."""
    dsn = f"sqlite:///{tmp_path / 'app.db'}"
    effects = tmp_path / "effects.txt"
    (tmp_path / ARMED).touch()
    workers: list[subprocess.Popen[bytes]] = []
    async with build(dsn, effects, lease) as app:
        try:
            # Both serve before the workflow exists: the survivor is already polling when
            # the other dies, so its start-up time is not part of what is measured.
            workers = [spawn(dsn, effects, lease) for _ in range(2)]
            await asyncio.sleep(1.0)
            handle = await app.workflows["hangs"].start()
            await wait_for_starts(effects, 1)
            await asyncio.sleep(kill_after)
            (_, pid) = starts(effects)[0]
            victim = next(worker for worker in workers if worker.pid == pid)
            os.kill(pid, signal.SIGKILL)
            killed = time.time()
            victim.wait(timeout=60)
            (tmp_path / ARMED).unlink()
            await wait_for_starts(effects, 2)
            (taken, survivor) = starts(effects)[1]
            assert survivor != pid
            assert await handle.result(timeout=60) == "done"
            return taken - killed
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
                    worker.wait(timeout=60)


async def test_a_killed_workers_workflow_is_taken_over_within_about_one_lease(
    tmp_path: Path,
) -> None:
    # Killed as the second step starts: the first step's record renewed the claim past the
    # delivery, and the survivor, turned away when the delivery came back, used to wait a
    # whole second lease.
    waited = await takeover_after_kill(tmp_path, LEASE, kill_after=0.0)
    assert waited < 1.6 * LEASE, f"taken over {waited:.2f}s after the kill (lease {LEASE}s)"


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    lease_seconds = float(sys.argv[3])
    app = build(sys.argv[1], Path(sys.argv[2]), lease_seconds)
    asyncio.run(app.serve(grace=0.2, poll=0.2))
