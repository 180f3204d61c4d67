"""Flow control and cron across worker processes sharing one SQLite file: every gate and
every tick is decided in the store, so separate processes obey them together. Effects
are counted from outside, in a ledger the handlers write.

Run as a script, this module is the worker process itself:
``python test_flow_processes.py MODE DB NAME`` with MODE ``cron``, ``keyed``, ``rate`` or
``wfcron`` (an App serving a cron workflow).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from durably import App, Context, Throttle, WorkItem
from durably.engine import Schedule, Worker, tick_of
from durably.sqlite import SqliteWorkQueue, connect
from durably.stores.work import flow_fields

START = 1_800_000_030.0  # 30 s past a minute: the file clock's first reading
KIND = "minutely-report"  # the cron workflow of mode wfcron
RATE = 50
RATE_ITEMS = 200  # four seconds at 50/s: short enough for the suite, long enough to measure


class FileClock:
    """A manual clock shared by processes: ``now`` is the number in a file the test
    writes (advanced by hand, like a `ManualClock`); ``sleep`` waits in real time."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def now(self) -> float:
        return float(self._path.read_text())

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


# --- the worker process --------------------------------------------------------------------


async def serve_workflow(path: str, name: str) -> None:
    """Serve a cron workflow whose body writes a ledger line per run."""
    app = App(f"sqlite:///{path}", clock=FileClock(Path(path).with_suffix(".clock")))
    ledger = Path(path).with_name(f"ledger-{name}.tsv")

    @app.workflow(name=KIND, cron="* * * * *")
    async def report(ctx: Context, tick: datetime) -> None:
        with ledger.open("a") as sink:
            sink.write(f"{ctx.id}\t{tick.isoformat()}\t0\t0\n")

    asyncio.get_running_loop().call_soon(Path(path).with_name(f"ready-{name}").touch)
    await app.serve(maintenance=0.05, poll=0.05)


async def serve(mode: str, path: str, name: str) -> None:
    if mode == "wfcron":
        await serve_workflow(path, name)
        return
    db = await connect(path)
    clock = FileClock(Path(path).with_suffix(".clock")) if mode == "cron" else None
    queue = SqliteWorkQueue(db, clock=clock)
    ledger = Path(path).with_name(f"ledger-{name}.tsv")

    async def handler(item: WorkItem) -> None:
        started = time.time()
        if mode == "keyed":
            await asyncio.sleep(0.03)
        key = item.concurrency_key
        if mode == "cron":
            moment = tick_of(item)
            key = None if moment is None else moment.isoformat()
        # A line a run, in a file of this process: the ledger costs the store nothing.
        with ledger.open("a") as sink:
            sink.write(f"{item.id}\t{key or ''}\t{started!r}\t{time.time()!r}\n")

    # Polls every 50 ms (20 ms for the rate, whose slots come every 20 ms): four processes
    # claiming far more often only queue for the write lock.
    worker = Worker(
        name=name,
        clock=clock,
        poll_seconds=0.02 if mode == "rate" else 0.05,
        maintenance_seconds=0.05,
        grace_seconds=5,
    )
    worker.handle(queue, handler, concurrency=4)
    if mode == "cron":
        worker.schedule(queue, Schedule("every-minute", "* * * * *"))
    # Signal handlers are installed as `run` starts: say so just after, so a SIGTERM from
    # the test never meets a process still importing.
    loop = asyncio.get_running_loop()
    loop.call_soon(Path(path).with_name(f"ready-{name}").touch)
    try:
        await worker.run()
    finally:
        await db.close()


# --- the tests -----------------------------------------------------------------------------


def spawn(mode: str, path: Path, name: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, __file__, mode, str(path), name], stdout=sink, stderr=subprocess.STDOUT
        )


def read(path: Path) -> str:
    return path.read_text()


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(path, timeout=10)) as connection:
        return list(connection.execute(sql))


async def wait_for(condition: object, what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    assert callable(condition)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def run_workers(mode: str, path: Path, count: int, log: Path, until: object) -> None:
    workers = [spawn(mode, path, f"{mode}-{n}", log) for n in range(count)]
    try:
        await wait_for(lambda: ready(path) == count, "the workers to start")
        await wait_for(until, f"the {mode} workers")
    finally:
        for process in workers:
            process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=20) for process in workers]
    assert codes == [0] * count, read(log)


def completed(path: Path) -> int:
    sql = "SELECT count(*) FROM durably_work WHERE queue = 'default' AND state = 'completed'"
    return int(str(rows(path, sql)[0][0]))


def ready(path: Path) -> int:
    return len(list(path.parent.glob("ready-*")))


def ledger(path: Path) -> list[tuple[str, str, float, float]]:
    """Every run the handlers logged: (item, key, started, ended)."""
    runs = []
    for part in path.parent.glob("ledger-*.tsv"):
        for line in part.read_text().splitlines():
            item, key, started, ended = line.split("\t")
            runs.append((item, key, float(started), float(ended)))
    return runs


async def prepared(path: Path) -> SqliteWorkQueue:
    return SqliteWorkQueue(await connect(path))


def workflows_completed(path: Path) -> int:
    sql = "SELECT count(*) FROM durably_workflow_status WHERE status = 'completed'"
    return int(str(rows(path, sql)[0][0]))


async def tick_five_times(mode: str, tmp_path: Path, done: Callable[[Path], int]) -> Path:
    """Serve ``mode`` from three processes over a file clock moved a minute five times,
    each tick's run finished (``done`` of the file counts them) before the next; the file."""
    path = tmp_path / "cron.db"
    clock = path.with_suffix(".clock")
    clock.write_text(repr(START))
    log = tmp_path / "workers.log"
    await (await connect(path)).close()
    workers = [spawn(mode, path, f"{mode}-{n}", log) for n in range(3)]
    try:
        # Every worker runs and the schedule's mark is taken before the clock moves.
        await wait_for(lambda: ready(path) == 3, "the workers to start")
        await wait_for(
            lambda: rows(path, "SELECT count(*) FROM durably_schedule_ticks")[0][0] == 1,
            "the schedule's mark",
        )
        for ticks in range(1, 6):
            clock.write_text(repr(START + 60 * ticks))
            # Completed before the clock moves again: a jump of a minute lapses every lease
            # (30 s), and a lapsed item runs again (at-least-once), which is not a tick.
            await wait_for(lambda ticks=ticks: done(path) >= ticks, f"tick {ticks}")
        await asyncio.sleep(1.0)  # time for a duplicate to show, were there one
    finally:
        for process in workers:
            process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=20) for process in workers]
    assert codes == [0, 0, 0], read(log)
    return path


TICKS = [f"2027-01-15T08:0{minute}:00+00:00" for minute in range(1, 6)]


@pytest.mark.timeout(90)
async def test_three_worker_processes_run_one_cron_exactly_once_a_tick_over_five_ticks(
    tmp_path: Path,
) -> None:
    path = await tick_five_times("cron", tmp_path, completed)
    assert sorted(key for _, key, _, _ in ledger(path)) == TICKS


@pytest.mark.timeout(90)
async def test_three_worker_processes_start_one_cron_workflow_a_tick_over_five_ticks(
    tmp_path: Path,
) -> None:
    path = await tick_five_times("wfcron", tmp_path, workflows_completed)
    assert sorted((item, key) for item, key, _, _ in ledger(path)) == [
        (f"{KIND}@{tick}", tick) for tick in TICKS
    ]


@pytest.mark.timeout(90)
async def test_four_worker_processes_never_run_two_items_of_a_key_at_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keyed.db"
    log = tmp_path / "workers.log"
    queue = await prepared(path)
    try:
        for n in range(12):
            for key in ("k0", "k1", "k2"):
                gate = flow_fields(concurrency_key=key, concurrency_limit=1)
                await queue.enqueue(WorkItem(id=f"{key}-{n}", tenant=f"t{n % 2}", **gate))
            await queue.enqueue(WorkItem(id=f"free-{n}", tenant="t0"))
    finally:
        await queue.database.close()
    await run_workers(
        "keyed",
        path,
        4,
        log,
        lambda: len(ledger(path)) == 48,
    )
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for item, key, started, ended in ledger(path):
        spans[key or f"free:{item}"].append((started, ended))
    for key in ("k0", "k1", "k2"):
        ordered = sorted(spans[key])
        assert len(ordered) == 12
        overlaps = [(a, b) for a, b in itertools.pairwise(ordered) if b[0] < a[1]]
        assert overlaps == [], f"two items of {key} ran at once"
    # Other keys proceed meanwhile: items of different keys did overlap.
    k0, k1 = spans["k0"], spans["k1"]
    assert any(a[0] < b[1] and b[0] < a[1] for a in k0 for b in k1)


@pytest.mark.timeout(90)
async def test_a_rate_of_50_a_second_over_four_worker_processes_stays_within_ten_percent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rate.db"
    log = tmp_path / "workers.log"
    queue = await prepared(path)
    # A burst of 15 (0.28 s of tolerance) lets a worker that polls late on a busy machine
    # take the starts it missed, yet bounds any window's rate: 200 starts take >= 3.7 s,
    # at most 53.8 a second.
    gate = flow_fields(throttle=Throttle(RATE, burst=15), throttle_key="api")
    try:
        for n in range(RATE_ITEMS):
            await queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n % 3}", **gate))
    finally:
        await queue.database.close()
    await run_workers(
        "rate",
        path,
        4,
        log,
        lambda: len(ledger(path)) == RATE_ITEMS,
    )
    starts = sorted(started for _, _, started, _ in ledger(path))
    rate = (len(starts) - 1) / (starts[-1] - starts[0])
    assert RATE * 0.9 <= rate <= RATE * 1.1, f"{rate:.1f} items/s"


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.WARNING, format=f"%(asctime)s {sys.argv[3]} %(levelname)s %(message)s"
    )
    asyncio.run(serve(sys.argv[1], sys.argv[2], sys.argv[3]))
