"""`durably.App` with real worker processes over one SQLite file: a worker killed with
SIGKILL mid-step while `handle.result()` waits in another process; a workflow whose step
kills its worker every time, parked after ``max_recovery_attempts``; and graceful shutdowns,
which count nothing.

Run as a script, this module is a worker process: ``python test_app_crash.py DSN EFFECTS``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from durably import App, Context, WorkflowStatus, context

LEASE = 1.0  # how soon a dead worker's workflow is taken over
ARMED = "armed"  # while this file exists beside the effects file, step 2 hangs


def build(dsn: str, effects: Path) -> App:
    """The App every process of these tests registers alike."""
    app = App(dsn, lease=LEASE)

    def effect(line: str) -> None:
        with effects.open("a") as sink:
            sink.write(f"{line} {os.getpid()}\n")

    @app.step(name="pay")
    async def pay(n: int) -> int:
        effect(f"pay {n} {context().workflow}")
        if n == 2 and (effects.parent / ARMED).exists():
            await asyncio.sleep(120)  # killed here
        return n

    @app.workflow(name="payments")
    async def payments(ctx: Context, count: int) -> int:
        return sum([await pay(n) for n in range(count)])

    @app.step(name="crash")
    async def crash() -> None:
        effect("crash")
        os.kill(os.getpid(), signal.SIGKILL)

    @app.workflow(name="crasher", max_recovery_attempts=2)
    async def crasher(ctx: Context) -> None:
        await crash()

    @app.step(name="linger")
    async def linger() -> None:
        effect("linger")
        await asyncio.sleep(120)

    @app.workflow(name="lingers", max_recovery_attempts=1)
    async def lingers(ctx: Context) -> None:
        await linger()

    return app


def spawn(dsn: str, effects: Path) -> subprocess.Popen[bytes]:
    log = effects.with_suffix(f".{len(list(effects.parent.glob('*.log')))}.log")
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, __file__, dsn, str(effects)], stdout=sink, stderr=subprocess.STDOUT
        )


def lines(effects: Path, prefix: str) -> list[str]:
    if not effects.exists():
        return []
    return [line for line in effects.read_text().splitlines() if line.startswith(prefix)]


async def wait_for(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = condition()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def stop(process: subprocess.Popen[bytes], signum: int = signal.SIGTERM) -> int:
    if process.poll() is None:
        process.send_signal(signum)
    return process.wait(timeout=60)


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    return tmp_path / "effects.txt"


async def test_a_result_awaited_elsewhere_arrives_after_a_worker_is_killed_mid_step(
    tmp_path: Path, effects: Path
) -> None:
    dsn = f"sqlite:///{tmp_path / 'app.db'}"
    (tmp_path / ARMED).touch()
    async with build(dsn, effects) as app:
        handle = await app.workflows["payments"].start(4)
        waiting = asyncio.create_task(handle.result(timeout=120))
        first = spawn(dsn, effects)
        try:
            await wait_for(lambda: lines(effects, "pay 2"), "step 2 to start")
        finally:
            stop(first, signal.SIGKILL)
        (tmp_path / ARMED).unlink()
        assert not waiting.done()
        second = spawn(dsn, effects)
        try:
            assert await waiting == 0 + 1 + 2 + 3
        finally:
            stop(second)
    runs = {n: len(lines(effects, f"pay {n}")) for n in range(4)}
    assert runs == {0: 1, 1: 1, 2: 2, 3: 1}  # only the step the kill cut short ran again


async def test_a_crash_looping_workflow_is_parked_after_its_recovery_attempts(
    tmp_path: Path, effects: Path
) -> None:
    dsn = f"sqlite:///{tmp_path / 'app.db'}"
    async with build(dsn, effects) as app:
        handle = await app.workflows["crasher"].start()
        for _ in range(3):  # the first pass and two recoveries each kill their worker
            worker = spawn(dsn, effects)
            assert worker.wait(timeout=60) == -signal.SIGKILL
        parking = spawn(dsn, effects)
        try:
            await wait_for(
                lambda: _status_is(handle, WorkflowStatus.PARKED), "the workflow to be parked"
            )
        finally:
            assert stop(parking) == 0  # it parked the workflow and served on
        info = await handle.status()
        assert info.attempts == 3
        assert "without reporting" in str(info.last_error)
        assert len(lines(effects, "crash")) == 3


async def test_graceful_shutdowns_count_no_recovery(tmp_path: Path, effects: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'app.db'}"
    async with build(dsn, effects) as app:
        handle = await app.workflows["lingers"].start()
        for round in range(1, 3):
            worker = spawn(dsn, effects)

            def started(expected: int = round) -> bool:
                return len(lines(effects, "linger")) == expected

            await wait_for(started, "the step")
            assert stop(worker) == 0  # SIGTERM: the pass is given back after the grace
            info = await handle.status()
            assert (info.status, info.attempts) == (WorkflowStatus.PENDING, 0)


async def _status_is(handle: object, status: WorkflowStatus) -> bool:
    info = await handle.status()  # type: ignore[attr-defined]
    return bool(info.status is status)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(build(sys.argv[1], Path(sys.argv[2])).serve(grace=0.2))
