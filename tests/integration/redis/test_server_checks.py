"""Preflight, settings and the refusals that must happen before anything is sent."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest
import pytest_asyncio
from pydantic import SecretStr
from redis.asyncio import Redis
from redis.exceptions import NoPermissionError

from durably import ManualClock, RunRecord, WorkItem, WorkState
from durably.errors import (
    ConfigurationError,
    PoolExhaustedError,
    QueueUnavailableError,
    StatePersistenceError,
)
from durably.redis import (
    RedisCheckpointer,
    RedisScheduler,
    RedisStateStore,
    RedisStoreSettings,
    RedisWorkQueue,
    preflight,
)
from durably.redis.connection import text
from durably.redis.settings import RedisStoreSettings as Settings
from durably.stores import Recorded
from tests.redis_service import REDIS_CLI, RedisServer, free_port, start_server

pytestmark = pytest.mark.redis

T = TypeVar("T")

EVICTING = ("allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-ttl")


@pytest.fixture(scope="module")
def scratch_server() -> RedisServer:
    """A server these tests may reconfigure (persistence on to begin with)."""
    return start_server("--appendonly", "yes")


@pytest_asyncio.fixture
async def scratch(scratch_server: RedisServer) -> AsyncIterator[Any]:
    client = Redis(host="127.0.0.1", port=scratch_server.port)
    await client.config_set("maxmemory-policy", "noeviction")
    await client.config_set("appendonly", "yes")
    await client.config_set("save", "")
    try:
        yield client
    finally:
        await client.aclose()


async def test_preflight_accepts_a_server_with_the_aof_on_and_no_eviction(scratch: Any) -> None:
    await preflight(scratch)


@pytest.mark.parametrize("policy", EVICTING)
async def test_preflight_refuses_every_evicting_policy(scratch: Any, policy: str) -> None:
    await scratch.config_set("maxmemory-policy", policy)
    with pytest.raises(ConfigurationError, match=policy):
        await preflight(scratch)


async def test_preflight_refuses_a_server_with_persistence_off(scratch: Any) -> None:
    await scratch.config_set("appendonly", "no")
    with pytest.raises(ConfigurationError, match="persistence is off"):
        await preflight(scratch)


async def test_preflight_accepts_save_points_without_the_aof(scratch: Any) -> None:
    await scratch.config_set("appendonly", "no")
    await scratch.config_set("save", "3600 1")
    await preflight(scratch)


@pytest.mark.parametrize(
    ("policy", "appendonly", "refused"),
    [("allkeys-lru", "no", True), ("noeviction", "no", True), ("noeviction", "yes", False)],
)
async def test_preflight_never_changes_the_servers_configuration(
    scratch: Any, policy: str, appendonly: str, refused: bool
) -> None:
    await scratch.config_set("maxmemory-policy", policy)
    await scratch.config_set("appendonly", appendonly)
    # A user that may read the configuration but not change it: a CONFIG SET (or REWRITE)
    # from preflight would fail as NOPERM instead of passing unseen.
    user = "preflight-reader"
    await scratch.acl_setuser(
        user,
        enabled=True,
        nopass=True,
        commands=["+@all", "-config|set", "-config|rewrite", "-config|resetstat"],
        keys=["*"],
        reset=True,
    )
    reader = Redis(
        host="127.0.0.1", port=scratch.connection_pool.connection_kwargs["port"], username=user
    )
    try:
        before = await scratch.config_get("*")
        if refused:
            with pytest.raises(ConfigurationError):
                await preflight(reader)
        else:
            await preflight(reader)
        assert await scratch.config_get("*") == before
        with pytest.raises(NoPermissionError):  # the guard itself holds
            await reader.config_set("maxmemory-policy", policy)
    finally:
        await reader.aclose()
        await scratch.acl_deluser(user)


async def test_preflight_with_durable_false_makes_no_call_at_all() -> None:
    # Any call on this object would raise AttributeError.
    await preflight(object(), durable=False)


async def test_open_runs_preflight_and_refuses_a_server_without_persistence(
    scratch: Any,
) -> None:
    await scratch.config_set("appendonly", "no")
    settings = RedisStoreSettings(dsn=SecretStr("redis://127.0.0.1:1/0"))
    with pytest.raises(ConfigurationError):
        await RedisStateStore.open(scratch, clock=ManualClock(), settings=settings)
    relaxed = settings.model_copy(update={"durable": False})
    store = await RedisStateStore.open(scratch, clock=ManualClock(), settings=relaxed)
    assert isinstance(store, RedisStateStore)


async def test_the_shared_machine_redis_without_persistence_is_refused() -> None:
    client = Redis(host="127.0.0.1", port=6379, socket_connect_timeout=0.5)
    try:
        try:
            await client.ping()
        except Exception:
            pytest.skip("no Redis on 127.0.0.1:6379")
        aof = text(next(iter((await client.config_get("appendonly")).values())))
        save = text(next(iter((await client.config_get("save")).values())))
        if aof != "no" or save.strip():
            pytest.skip("the machine's Redis has persistence on")
        with pytest.raises(ConfigurationError):
            await preflight(client)
    finally:
        await client.aclose()


def test_the_dsn_never_appears_in_a_repr_or_a_dump() -> None:
    settings = Settings(dsn=SecretStr("redis://:hunter2@127.0.0.1:6379/0"))
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(settings.model_dump())
    from_env = Settings.from_env({"DURABLY_REDIS_DSN": "redis://:hunter2@h:1/0"})
    assert from_env.dsn.get_secret_value().endswith("@h:1/0")
    assert from_env.max_value_bytes == 256 * 1024


def test_a_namespace_with_braces_is_refused() -> None:
    with pytest.raises(ValueError, match="braces"):
        Settings(dsn=SecretStr("redis://h"), key_prefix="a{b}")


async def test_an_oversized_value_is_refused_before_anything_is_sent() -> None:
    # Nothing listens on this port: a single byte sent would surface as "unavailable".
    client = Redis(host="127.0.0.1", port=free_port())
    settings = Settings(dsn=SecretStr("redis://unused"), max_value_bytes=1024)
    store = RedisStateStore(client, clock=ManualClock(), settings=settings)
    huge = RunRecord(run_id="r", tenant="t", agent_name="a", metadata={"blob": "x" * 2048})
    with pytest.raises(StatePersistenceError) as refused:
        await store.put_run(huge)
    assert refused.value.reason == "too_large"
    assert not refused.value.retryable
    queue = RedisWorkQueue(client, clock=ManualClock(), settings=settings)
    with pytest.raises(StatePersistenceError, match="too_large"):
        await queue.enqueue(WorkItem(id="i", tenant="t", payload={"p": "y" * 2048}))
    await client.aclose()


def _unreachable_settings(*, cluster: bool) -> Settings:
    return Settings(
        dsn=SecretStr(f"redis://127.0.0.1:{free_port()}/0"),
        cluster=cluster,
        max_attempts=3,
        backoff_seconds=0.01,
        connect_timeout_seconds=0.2,
    )


@pytest.mark.parametrize("cluster", [False, True], ids=["standalone", "cluster"])
async def test_an_unreachable_server_is_retried_then_reported_unavailable(cluster: bool) -> None:
    # A cluster client that reaches none of its nodes raises RedisClusterException (not a
    # ConnectionError): every store must still report the typed, retryable error.
    settings = _unreachable_settings(cluster=cluster)
    client = settings.client()
    store = RedisStateStore(client, clock=ManualClock(), settings=settings)
    with pytest.raises(StatePersistenceError) as lost:
        await store.get_run(RunRecord(run_id="r", tenant="t", agent_name="a").key)
    assert lost.value.reason == "unavailable"
    assert lost.value.retryable
    assert "redis://" not in str(lost.value)
    queue = RedisWorkQueue(client, clock=ManualClock(), settings=settings)
    with pytest.raises(QueueUnavailableError):
        await queue.claim(worker="w")
    with pytest.raises(QueueUnavailableError):
        await queue.enqueue(WorkItem(id="i", tenant="t"))
    with pytest.raises(QueueUnavailableError):
        await queue.claim_waiting(worker="w", within=0.5)
    with pytest.raises(QueueUnavailableError):
        await queue.wait_for_work(within=0.5)
    with pytest.raises(StatePersistenceError):
        await RedisCheckpointer(client, settings=settings).claim("wf", 10.0, 10.0)
    with pytest.raises(StatePersistenceError):
        await RedisScheduler(client, settings=settings).next_ready(0.5)
    await client.aclose()


async def test_an_exhausted_pool_is_reported_at_once(redis_server: RedisServer) -> None:
    client = Redis(host="127.0.0.1", port=redis_server.port, max_connections=1)
    settings = Settings(dsn=SecretStr("redis://unused"), pool_size=1, max_attempts=5)
    queue = RedisWorkQueue(client, clock=ManualClock(), settings=settings, key_prefix="pool")
    waiting = asyncio.create_task(queue.wait_for_work("idle-queue", within=2.0))
    await asyncio.sleep(0.1)  # the only connection is now blocked in BLPOP
    with pytest.raises(PoolExhaustedError):
        await queue.claim(worker="w")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await client.aclose()


async def test_scripts_are_reloaded_after_a_script_flush(redis_client: Any) -> None:
    store = RedisStateStore(redis_client, clock=ManualClock(), key_prefix="flush-test")
    first = await store.put_run(RunRecord(run_id="r", tenant="t", agent_name="a"))
    await redis_client.script_flush()
    again = await store.put_run(first)
    assert again.version == 2
    await store.delete_run(first.key)


async def test_enqueue_and_record_reload_their_scripts_after_a_script_flush(
    redis_client: Any,
) -> None:
    # Both call their script on a path of their own (not Script.run): NOSCRIPT there too.
    queue = RedisWorkQueue(redis_client, clock=ManualClock(), key_prefix="flush-queue")
    checkpointer = RedisCheckpointer(redis_client, key_prefix="flush-wf")
    holder = await checkpointer.claim("wf", 60.0, 60.0)
    assert holder is not None
    await redis_client.script_flush()
    queued = await queue.enqueue(WorkItem(id="i", tenant="t"))
    assert queued.state is WorkState.QUEUED
    await redis_client.script_flush()
    recorded = await checkpointer.record(holder, "step", {"n": 1})
    assert recorded == Recorded({"n": 1}, True)
    assert (await checkpointer.load("wf")) == {"step": {"n": 1}}
    claimed = await queue.claim(worker="w")
    assert claimed is not None
    assert claimed.id == "i"


async def test_preflight_of_an_unreachable_cluster_is_refused_as_for_a_single_server() -> None:
    client = _unreachable_settings(cluster=True).client()
    with pytest.raises(ConfigurationError, match="cannot read Redis setting"):
        await preflight(client)
    await client.aclose()


def _one_node_cluster(*persistence: str) -> RedisServer:
    """A cluster of one master holding every slot, for one test alone; the AOF on unless
    ``persistence`` says otherwise."""
    node = start_server(
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
        *(persistence or ("--appendonly", "yes", "--appendfsync", "always")),
    )  # fmt: skip
    assert REDIS_CLI is not None
    subprocess.run(
        [REDIS_CLI, "-p", str(node.port), "cluster", "addslotsrange", "0", "16383"],
        check=True,
        capture_output=True,
    )
    return node


async def _until_served(operation: Callable[[], Awaitable[T]]) -> T:
    """``operation``'s result once the (re)started cluster serves it; a bounded wait."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return await operation()
        except (QueueUnavailableError, StatePersistenceError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_a_cluster_killed_and_restarted_is_reported_unavailable_then_serves_again() -> None:
    node = _one_node_cluster()
    settings = Settings(dsn=SecretStr(node.url), cluster=True, max_attempts=2, backoff_seconds=0.01)
    client = settings.client()
    queue = RedisWorkQueue(client, clock=ManualClock(5.0), settings=settings)
    store = RedisStateStore(client, clock=ManualClock(5.0), settings=settings)
    await _until_served(lambda: queue.enqueue(WorkItem(id="before", tenant="t")))
    node.kill()
    with pytest.raises(QueueUnavailableError):
        await queue.claim(worker="w")
    with pytest.raises(QueueUnavailableError):
        await queue.claim_waiting(worker="w", within=0.5)
    with pytest.raises(StatePersistenceError):
        await store.put_run(RunRecord(run_id="r", tenant="t", agent_name="a"))
    node.start()
    claimed = await _until_served(lambda: queue.claim(worker="w"))
    assert claimed is not None
    assert claimed.id == "before"
    await client.aclose()


async def test_open_with_a_fresh_cluster_client_refuses_a_cluster_without_persistence() -> None:
    # settings.client() builds a cluster client that has not read the cluster's layout yet:
    # preflight must still read every primary's settings, not an empty list of them.
    node = _one_node_cluster("--appendonly", "no", "--save", "")
    settings = Settings(dsn=SecretStr(node.url), cluster=True)
    client = settings.client()
    with pytest.raises(ConfigurationError, match="persistence is off"):
        await RedisWorkQueue.open(client, settings=settings)
    fresh = settings.client()
    with pytest.raises(ConfigurationError, match="persistence is off"):
        await preflight(fresh)
    await fresh.aclose()
    await client.aclose()
