"""How a script call reaches the server: on a pooled connection directly for a plain
client, through ``execute_command`` for anything else, and either way a connection that
answered an error goes back to the pool fit for the next call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import BlockingConnectionPool, Redis
from redis.exceptions import ResponseError

from durably import ManualClock, WorkItem
from durably.redis import RedisCheckpointer, RedisWorkQueue
from durably.redis.scripts import Script
from durably.stores.status import WorkflowStatus
from tests.redis_service import RedisServer

_FAILS = Script("return redis.error_reply('ERR refused on purpose')", "fails.lua")
_ECHOES = Script("return ARGV[1]", "echoes.lua")


async def test_a_script_that_errs_leaves_the_one_pooled_connection_usable(
    redis_server: RedisServer,
) -> None:
    pool = BlockingConnectionPool.from_url(redis_server.url, max_connections=1, timeout=1)
    client = Redis.from_pool(pool)
    try:
        for _ in range(3):
            with pytest.raises(ResponseError, match="refused on purpose"):
                await _FAILS(client, ["k"], [])
            assert await _ECHOES(client, ["k"], ["still here"]) == b"still here"
    finally:
        await client.aclose()


async def test_a_script_missing_from_the_cache_is_sent_whole_on_the_direct_path(
    redis_client: Any,
) -> None:
    script = Script("return 'loaded again'", "again.lua")
    await redis_client.script_flush()
    assert await script(redis_client, ["k"], []) == b"loaded again"
    assert await redis_client.script_exists(script.sha) == [True]


class _Counting(Redis):
    """A client of the application's own: its ``execute_command`` is what it promises."""

    sent: list[str]

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


async def test_a_client_subclass_runs_scripts_through_its_own_execute_command(
    redis_server: RedisServer,
) -> None:
    client = _Counting(host="127.0.0.1", port=redis_server.port)
    client.sent = []
    try:
        assert await _ECHOES(client, ["k"], ["via the subclass"]) == b"via the subclass"
        assert client.sent == ["EVALSHA"] or client.sent == ["EVALSHA", "EVAL"]
    finally:
        await client.aclose()


async def test_a_single_connection_client_runs_scripts_on_its_one_connection(
    redis_server: RedisServer,
) -> None:
    client = Redis(host="127.0.0.1", port=redis_server.port, single_connection_client=True)
    try:
        assert await _ECHOES(client, ["k"], ["on its own"]) == b"on its own"
        assert client.connection is not None  # taken by the client, not borrowed per call
        assert await _ECHOES(client, ["k"], ["again"]) == b"again"
    finally:
        await client.aclose()


_ECHOES_ALL = Script("return ARGV", "echoes_all.lua")


async def test_arguments_of_every_kind_reach_a_script_as_redis_py_would_send_them(
    redis_client: Any,
) -> None:
    sent = ["tenant-é", b"\x00raw bytes\xff", 12, 0.1 + 0.2, "x" * 10_000, "", b""]
    expected = [b"tenant-\xc3\xa9", b"\x00raw bytes\xff", b"12", b"0.30000000000000004"]
    expected += [b"x" * 10_000, b"", b""]
    assert await _ECHOES_ALL(redis_client, ["k"], sent) == expected


async def test_a_client_that_encodes_text_otherwise_sends_it_so(
    redis_server: RedisServer,
) -> None:
    client = Redis(host="127.0.0.1", port=redis_server.port, encoding="latin-1")
    try:
        assert await _ECHOES(client, ["k"], ["é"]) == b"\xe9"
    finally:
        await client.aclose()


async def test_a_connection_the_server_dropped_while_idle_does_not_fail_the_next_enqueue(
    redis_server: RedisServer,
) -> None:
    client = Redis(host="127.0.0.1", port=redis_server.port)
    admin = Redis(host="127.0.0.1", port=redis_server.port)
    try:
        queue = RedisWorkQueue(client, clock=ManualClock(1000.0), key_prefix="idle-drop")
        await queue.enqueue(WorkItem(id="before", tenant="t"))
        pooled = await client.client_id()  # the pool's one connection, the queue's too
        assert await admin.client_kill_filter(_id=str(pooled)) == 1
        queued = await queue.enqueue(WorkItem(id="after", tenant="t"))
        assert queued.id == "after"
        assert (await queue.stats()).depth == 2
    finally:
        await client.aclose()
        await admin.aclose()


_ECHOES_OR_FAILS = Script(
    "if ARGV[1] == 'fail' then return redis.error_reply('ERR refused on purpose') end "
    "return ARGV[1]",
    "echoes_or_fails.lua",
)


@pytest.mark.parametrize("kind", ["plain", "subclass"])
async def test_calls_sent_together_answer_each_in_order_errors_in_place(
    redis_server: RedisServer, kind: str
) -> None:
    # The plain client sends them packed on one connection, a subclass through a redis-py
    # pipeline: the same answers either way, and the one pooled connection stays in step.
    if kind == "plain":
        pool = BlockingConnectionPool.from_url(redis_server.url, max_connections=1, timeout=1)
        client: Any = Redis.from_pool(pool)
    else:
        client = _Counting(host="127.0.0.1", port=redis_server.port, max_connections=1)
        client.sent = []
    try:
        assert await _ECHOES_OR_FAILS(client, ["k"], ["loaded"]) == b"loaded"
        for _ in range(2):
            replies = await _ECHOES_OR_FAILS.run_many(
                client, [("k", "one"), ("k", "fail"), ("k", "three")]
            )
            assert replies[0] == b"one"
            assert isinstance(replies[1], ResponseError)
            assert "refused on purpose" in str(replies[1])
            assert replies[2] == b"three"
            assert await _ECHOES(client, ["k"], ["still here"]) == b"still here"
        await client.script_flush()
        missing = await _ECHOES_OR_FAILS.run_many(client, [("k", "one"), ("k", "two")])
        assert all(type(reply).__name__ == "NoScriptError" for reply in missing), missing
    finally:
        await client.aclose()


@pytest.mark.parametrize("client_kind", ["plain", "subclass"])
async def test_a_script_run_after_a_command_finds_it_landed_even_when_sent_whole(
    redis_server: RedisServer, client_kind: str
) -> None:
    kind = Redis if client_kind == "plain" else _Counting
    client = kind(host="127.0.0.1", port=redis_server.port)
    client.sent = []  # type: ignore[attr-defined]  # read by _Counting only
    reads = Script("return redis.call('GET', KEYS[1])", "reads_back.lua")
    try:
        await client.script_flush()
        for n in range(2):  # missing from the cache, then cached
            before = ("SET", "landed", f"first {n}")
            assert await reads.run_after(client, before, 1, "landed") == f"first {n}".encode()
        with pytest.raises(ResponseError, match="refused on purpose"):
            await _FAILS.run_after(client, ("SET", "landed", "again"), 1, "k")
        assert await client.get("landed") == b"again"
        assert await _ECHOES(client, ["k"], ["still here"]) == b"still here"
    finally:
        await client.aclose()


@pytest.fixture
async def reported(redis_server: RedisServer) -> AsyncIterator[tuple[Redis, RedisCheckpointer]]:
    """A plain client and its checkpointer, workflow ``wf`` reported failed (3 attempts)."""
    client = Redis.from_pool(BlockingConnectionPool.from_url(redis_server.url, max_connections=2))
    checkpointer = RedisCheckpointer(client, key_prefix=f"status-read-{id(client)}")
    try:
        await checkpointer.supply("wf", "start", {"n": 1})
        holder = await checkpointer.claim("wf", 60.0, 30.0)
        assert holder is not None
        await checkpointer.set_status(holder, WorkflowStatus.FAILED, attempts=3, error="boom")
        yield client, checkpointer
    finally:
        await client.aclose()


async def test_a_status_read_goes_out_on_the_direct_path_and_reads_as_before(
    reported: tuple[Redis, RedisCheckpointer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, checkpointer = reported
    through: list[tuple[Any, ...]] = []
    plain: Any = Redis.execute_command

    async def counted(self: Redis, *args: Any, **kwargs: Any) -> Any:
        through.append(args)
        return await plain(self, *args, **kwargs)

    monkeypatch.setattr(Redis, "execute_command", counted)
    info = await checkpointer.get_status("wf")
    assert info is not None
    assert (info.status, info.attempts, info.last_error) == (WorkflowStatus.FAILED, 3, "boom")
    assert await checkpointer.get_status("other") is None
    assert through == []


async def test_a_status_read_keeps_a_reply_callback_the_client_sets_for_it(
    reported: tuple[Redis, RedisCheckpointer],
) -> None:
    client, checkpointer = reported
    replies: list[Any] = []

    def callback(reply: Any, **options: Any) -> Any:
        replies.append(reply)
        return reply

    client.set_response_callback("HMGET", callback)  # type: ignore[arg-type]
    info = await checkpointer.get_status("wf")
    assert info is not None
    assert info.attempts == 3
    assert len(replies) == 1  # through redis-py, which applied it
