"""The systems `make bench-peers` compares, each behind one small adapter.

Every adapter enqueues a no-op job carrying the instant it was sent (the system-wide
monotonic clock, so another process can read it) and runs that system's own worker with a
given concurrency, calling ``done(sent)`` as each job starts. Each system runs with its
defaults except the concurrency, as a user would run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

Done = Callable[[float], None]


class System(Protocol):
    """One queue library over one server."""

    name: str
    backing: str  # "postgres" or "redis": which peers it is compared with

    async def open(self) -> None:
        """Connect, on a fresh database or key prefix of its own."""

    async def enqueue(self, sent: float) -> None:
        """Enqueue one job, stamped with ``sent``."""

    async def fill(self, count: int) -> None:
        """Enqueue ``count`` jobs as fast as the system allows (untimed set-up)."""

    async def work(self, concurrency: int, done: Done, stop: asyncio.Event) -> None:
        """Run the system's worker until ``stop`` is set."""

    async def close(self) -> None:
        """Disconnect (the database or keys stay until `drop`)."""


async def _until(stop: asyncio.Event, running: asyncio.Future[Any]) -> None:
    waiting = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiting, running}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if running.done():
        running.result()  # a worker that died says why


class Durably:
    """durably's `Worker` over a `WorkQueue` opened from a DSN."""

    def __init__(self, dsn: str, backing: str, queue: str) -> None:
        self.name = f"durably ({backing})"
        self.backing = backing
        self._dsn = dsn
        self._queue = queue  # a scenario's own: no job left by another is counted
        self._stores: Any = None
        self._tenants = 1

    async def open(self) -> None:
        from durably import open_stores

        self._stores = await open_stores(self._dsn)
        migrate = getattr(self._stores, "migrate", None)
        if migrate is not None:
            await migrate()

    async def enqueue(self, sent: float) -> None:
        await self.enqueue_on(self._stores.queue, self._queue, sent)

    @staticmethod
    async def enqueue_on(queue: Any, name: str, sent: float) -> None:
        """One job on the durably queue ``queue``, as every durably scenario enqueues it."""
        from durably.stores.work import WorkItem

        await queue.enqueue(
            WorkItem(id=uuid.uuid4().hex, tenant="bench", queue=name, payload={"sent": repr(sent)})
        )

    async def fill(self, count: int) -> None:
        sent = time.monotonic()
        for _ in range(count):
            await self.enqueue(sent)

    async def work(self, concurrency: int, done: Done, stop: asyncio.Event) -> None:
        from durably.engine.worker import Worker
        from durably.stores.work import WorkItem

        async def handler(item: WorkItem) -> None:
            done(float(item.payload["sent"]))

        worker = Worker()
        worker.handle(self._stores.queue, handler, name=self._queue, concurrency=concurrency)
        running = asyncio.ensure_future(worker.run(install_signal_handlers=False))
        try:
            await _until(stop, running)
        finally:
            worker.stop()
            await running

    async def close(self) -> None:
        if self._stores is not None:
            await self._stores.close()


class DurablyTasks:
    """durably's task API: a function registered with ``@app.task``, its runs queued with
    `Task.enqueue` and run by ``app.serve()``, as an App user writes it."""

    def __init__(self, dsn: str, backing: str, queue: str) -> None:
        self.name = f"durably tasks ({backing})"
        self.backing = backing
        self._dsn = dsn
        self._queue = queue
        self._app: Any = None
        self._task: Any = None
        self._done: Done | None = None

    async def open(self) -> None:
        from durably import App

        app = App(self._dsn)

        # Named by the queue, so every process of a scenario runs the same task.
        @app.task(name=f"bench.{self._queue}", queue=self._queue)
        async def bench(sent: float) -> None:
            if self._done is not None:
                self._done(sent)

        self._app, self._task = app, bench
        await app.stores()  # opened (and migrated) before anything is timed

    async def enqueue(self, sent: float) -> None:
        await self._task.enqueue(sent)

    async def fill(self, count: int) -> None:
        sent = time.monotonic()
        for _ in range(count):
            await self.enqueue(sent)

    async def work(self, concurrency: int, done: Done, stop: asyncio.Event) -> None:
        self._done = done
        running = asyncio.ensure_future(
            self._app.serve(queues=[self._queue], concurrency=concurrency, signals=False)
        )
        try:
            await _until(stop, running)
        finally:
            running.cancel()  # serve's own stop: in-flight runs are given back
            with contextlib.suppress(asyncio.CancelledError):
                await running

    async def close(self) -> None:
        if self._app is not None:
            await self._app.close()


class PgQueuer:
    """PgQueuer's `QueueManager` over asyncpg (its own recommended driver)."""

    name = "PgQueuer"
    backing = "postgres"

    def __init__(self, dsn: str, entrypoint: str) -> None:
        self._dsn = dsn
        self._entrypoint = entrypoint  # a scenario's own: no job left by another is counted
        self._connection: Any = None
        self._queries: Any = None

    async def open(self) -> None:
        import asyncpg
        from pgqueuer import AsyncpgDriver, Queries

        self._connection = await asyncpg.connect(self._dsn)
        self._queries = Queries(AsyncpgDriver(self._connection))
        with contextlib.suppress(Exception):  # installed by an earlier process of this run
            await self._queries.install()

    async def enqueue(self, sent: float) -> None:
        await self._queries.enqueue(self._entrypoint, repr(sent).encode())

    async def fill(self, count: int) -> None:
        sent = repr(time.monotonic()).encode()
        for start in range(0, count, 1000):
            size = min(1000, count - start)
            await self._queries.enqueue([self._entrypoint] * size, [sent] * size, [0] * size)

    async def work(self, concurrency: int, done: Done, stop: asyncio.Event) -> None:
        import asyncpg
        from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager

        # The manager owns its connection (it listens on it), as PgQueuer's docs set it up.
        connection = await asyncpg.connect(self._dsn)
        manager = QueueManager(Queries(AsyncpgDriver(connection)))

        async def bench(job: Job) -> None:
            assert job.payload is not None
            done(float(job.payload.decode()))

        # PgQueuer enforces an entrypoint's concurrency_limit across every worker (in SQL),
        # so the per-process limit the scenarios mean is its max_concurrent_tasks, which
        # must be at least twice its batch size.
        manager.entrypoint(self._entrypoint)(bench)
        running = asyncio.ensure_future(
            manager.run(batch_size=max(1, concurrency // 2), max_concurrent_tasks=concurrency)
        )
        try:
            await _until(stop, running)
        finally:
            manager.shutdown.set()
            await running
            await connection.close()

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()


class Saq:
    """SAQ's `Worker` over its Redis queue."""

    name = "SAQ"
    backing = "redis"

    def __init__(self, url: str, name: str) -> None:
        self._url = url
        self._queue_name = name
        self._queue: Any = None

    async def open(self) -> None:
        from saq import Queue

        self._queue = Queue.from_url(self._url, name=self._queue_name)
        await self._queue.connect()

    async def enqueue(self, sent: float) -> None:
        await self._queue.enqueue("bench", sent=sent)

    async def fill(self, count: int) -> None:
        sent = time.monotonic()
        for _ in range(count):
            await self._queue.enqueue("bench", sent=sent)

    async def work(self, concurrency: int, done: Done, stop: asyncio.Event) -> None:
        from saq import Worker

        async def bench(ctx: Any, *, sent: float) -> None:
            done(sent)

        worker = Worker(self._queue, functions=[("bench", bench)], concurrency=concurrency)
        running = asyncio.ensure_future(worker.start())
        try:
            await _until(stop, running)
        finally:
            await worker.stop()
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running

    async def close(self) -> None:
        if self._queue is not None:
            await self._queue.disconnect()


class Arq:
    """arq's `Worker` over its Redis queue."""

    name = "arq"
    backing = "redis"

    def __init__(self, url: str, name: str) -> None:
        self._url = url
        self._queue_name = name
        self._redis: Any = None

    def _settings(self) -> Any:
        from arq.connections import RedisSettings

        return RedisSettings.from_dsn(self._url)

    async def open(self) -> None:
        from arq import create_pool

        self._redis = await create_pool(self._settings(), default_queue_name=self._queue_name)

    async def enqueue(self, sent: float) -> None:
        await self._redis.enqueue_job("bench", sent)

    async def fill(self, count: int) -> None:
        sent = time.monotonic()
        for _ in range(count):
            await self._redis.enqueue_job("bench", sent)

    async def work(self, concurrency: int, done: Done, stop: asyncio.Event) -> None:
        from arq.worker import Worker, func

        async def bench(ctx: Any, sent: float) -> None:
            done(sent)

        worker = Worker(
            functions=[func(bench, name="bench")],
            redis_settings=self._settings(),
            queue_name=self._queue_name,
            max_jobs=concurrency,
            handle_signals=False,
        )
        running = asyncio.ensure_future(worker.async_run())
        try:
            await _until(stop, running)
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            with contextlib.suppress(asyncio.CancelledError):  # its cancelled jobs' tasks
                await worker.close()

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()


class _Replies(asyncio.Protocol):
    """One connection's replies, each handed to the caller waiting for it (one at a time)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: asyncio.Future[bytes] | None = None
        self._buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._buffer.endswith(b"\r\n") and self.waiting is not None:
            waiting, self.waiting = self.waiting, None
            reply, self._buffer = self._buffer, b""
            waiting.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_exception(exc or ConnectionError("connection closed"))


class BareRedis:
    """The ceiling of the Redis enqueue scenario: durably's own enqueue script, with the
    arguments durably sends, over a bare asyncio socket, and no library code on the call
    (no redis-py, no validation, no item built or returned). No client of that script on
    this machine enqueues faster, so ``SAQ ÷ bare`` is the highest ``durably ÷ SAQ`` any
    implementation of durably's enqueue could read in the same run. Enqueue only."""

    name = "bare (redis)"
    backing = "redis"

    def __init__(self, url: str, name: str) -> None:
        self._url = url
        self._queue_name = name.encode()
        self._stores: Any = None
        self._replies = _Replies()
        self._tokens = itertools.count()
        self._sha = b""
        self._prefix = ""
        self._priority = b""

    async def open(self) -> None:
        from durably import open_stores
        from durably.redis.scripts import Script
        from durably.stores.work import WorkPriority

        # durably's queue, opened as `Durably` opens it: its namespace, key layout and the
        # script cached on the server by one enqueue of its own.
        self._stores = await open_stores(self._url)
        queue = self._stores.queue
        self._prefix = vars(queue)["_prefix"]
        await Durably.enqueue_on(queue, self._queue_name.decode(), time.monotonic())
        self._sha = Script.load("queue_enqueue.lua").sha.encode()
        self._priority = str(int(WorkPriority.NORMAL)).encode()  # a `WorkItem`'s default
        parts = urlsplit(self._url)
        loop = asyncio.get_running_loop()
        host, port = parts.hostname or "127.0.0.1", parts.port or 6379
        await loop.create_connection(lambda: self._replies, host, port)

    async def enqueue(self, sent: float) -> None:
        from durably.redis.order import ready_member

        item_id = uuid.uuid4().hex
        now = time.time()
        args = (
            b"EVALSHA",
            self._sha,
            b"1",
            f"{self._prefix}item:5:bench{len(item_id)}:{item_id}".encode(),
            self._prefix.encode(),
            b"bench",
            ready_member(now, item_id).encode(),
            self._queue_name,
            b'{"sent":"%r"}' % sent,
            self._priority,
            repr(now).encode(),
            b"bare-%d" % next(self._tokens),
        )
        command = b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%b\r\n" % (len(arg), arg) for arg in args
        )
        replies = self._replies
        assert replies.transport is not None
        replies.waiting = asyncio.get_running_loop().create_future()
        replies.transport.write(command)
        reply = await replies.waiting
        if reply != b":1\r\n":
            raise RuntimeError(f"the enqueue script answered {reply!r}")

    async def fill(self, count: int) -> None:
        raise NotImplementedError("the bare client only enqueues")

    async def work(self, concurrency: int, done: Done, stop: asyncio.Event) -> None:
        raise NotImplementedError("the bare client only enqueues")

    async def close(self) -> None:
        if self._replies.transport is not None:
            self._replies.transport.close()
        if self._stores is not None:
            await self._stores.close()


def everything(postgres_dsn: str, redis_url: str) -> list[System]:
    """A fresh instance of every system, on the given servers (unique queue names)."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    return [
        Durably(postgres_dsn, "postgres", name),
        DurablyTasks(postgres_dsn, "postgres", name),
        PgQueuer(postgres_dsn, name),
        Durably(redis_url, "redis", name),
        DurablyTasks(redis_url, "redis", name),
        Saq(redis_url, name),
        Arq(redis_url, name),
    ]


__all__ = [
    "Arq",
    "BareRedis",
    "Done",
    "Durably",
    "DurablyTasks",
    "PgQueuer",
    "Saq",
    "System",
    "everything",
]
