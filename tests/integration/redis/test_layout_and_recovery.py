"""What only a real Redis shows: key slots, cross-slot refusal, crash recovery, wakeups."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import SecretStr
from redis.asyncio import Redis
from redis.exceptions import RedisClusterException, ResponseError

from durably import ManualClock, RunRecord, StateKey, SystemClock, WorkItem
from durably.errors import Fenced, InvalidInputError
from durably.redis import (
    LuaEffect,
    RedisCheckpointer,
    RedisEffectKit,
    RedisScheduler,
    RedisStateStore,
    RedisStoreSettings,
    RedisWorkQueue,
    keys,
)
from tests.redis_service import namespace_for, start_server

pytestmark = pytest.mark.redis


def test_a_run_its_counters_and_its_session_index_share_one_slot() -> None:
    tenant = "acme {x}: 🚀"
    slots = {
        keys.slot(keys.run_key("durably", tenant, "run:1")),
        keys.slot(keys.run_meta_key("durably", tenant, "run:1")),
        keys.slot(keys.session_runs_key("durably", tenant, "s}1")),
        keys.slot(keys.state_prefix("durably", tenant) + "runs"),
    }
    assert len(slots) == 1
    assert keys.run_key("durably", "acme", "run_1") == "durably:state:{4:acme}:run:5:run_1"


def test_every_key_of_a_queue_namespace_is_in_one_slot() -> None:
    prefix = keys.queue_prefix("jobs")
    names = [keys.item_key("jobs", "t{1}", "i:1"), prefix + "rota:7:default", prefix + "queues"]
    assert len({keys.slot(name) for name in names}) == 1


def test_segments_count_utf8_bytes_as_lua_does() -> None:
    assert keys.segment("é") == "2:é"
    assert keys.segment("a:b") + keys.segment("c") != keys.segment("a") + keys.segment("b:c")


async def test_tenants_that_look_alike_stay_apart(any_redis: Any) -> None:
    store = RedisStateStore(any_redis, clock=ManualClock(), key_prefix=namespace_for(any_redis))
    first = await store.put_run(RunRecord(run_id="b:c", tenant="a", agent_name="first"))
    second = await store.put_run(RunRecord(run_id="c", tenant="a:b", agent_name="second"))
    third = await store.put_run(RunRecord(run_id="c", tenant="a:b:", agent_name="third"))
    for record in (first, second, third):
        stored = await store.get_run(record.key)
        assert stored is not None
        assert stored.agent_name == record.agent_name


async def test_an_effect_key_in_another_slot_is_refused_before_anything_runs(
    any_redis: Any,
) -> None:
    ns = namespace_for(any_redis)
    cp = RedisCheckpointer(any_redis, key_prefix=ns)
    holder = await cp.claim("wf-cross", 30, 30)
    assert holder is not None
    elsewhere = f"{ns}:other:{{somewhere-else}}"
    effect = LuaEffect("redis.call('SET', KEYS[1], '1') return '1'", keys=(elsewhere,))
    with pytest.raises(InvalidInputError, match="slot"):
        await cp.transact(holder, "step", effect)
    assert await any_redis.exists(elsewhere) == 0
    assert await cp.load("wf-cross") == {}
    same_slot = LuaEffect("return ARGV[1]", keys=(cp.effect_key("wf-cross", "x"),), args=("7",))
    assert (await cp.transact(holder, "step", same_slot)).value == 7


async def test_the_cluster_refuses_a_script_reaching_a_key_in_another_slot(
    redis_cluster_client: Any,
) -> None:
    script = "return redis.call('GET', ARGV[1])"
    with pytest.raises((ResponseError, RedisClusterException)):
        await redis_cluster_client.eval(script, 1, "{slot-a}:k", "{slot-b-elsewhere}:k")


async def test_a_lua_effect_runs_exactly_once_across_ten_passes(any_redis: Any) -> None:
    ns = namespace_for(any_redis)
    cp = RedisCheckpointer(any_redis, key_prefix=ns)
    kit = RedisEffectKit(any_redis, ns)
    results = []
    for attempt in range(10):
        holder = await cp.claim("wf-pay", 30, 30)
        assert holder is not None
        results.append(await cp.transact(holder, "charge", kit.bump("charges", attempt)))
        await cp.release(holder)
    assert await kit.count("charges") == 1
    assert [r.first for r in results] == [True] + [False] * 9
    assert {r.value for r in results} == {0}


async def test_a_claim_whose_keys_expired_still_outranks_the_pass_before(
    any_redis: Any,
) -> None:
    ns = namespace_for(any_redis)
    cp = RedisCheckpointer(any_redis, key_prefix=ns, ttl=0.2)
    stalled = await cp.claim("wf-ttl", 0.1, 0.1)
    assert stalled is not None
    await cp.record(stalled, "a", 1)
    await asyncio.sleep(0.35)  # the claim hash, the token key and the records all expired
    prefix = keys.workflow_prefix(ns, "wf-ttl")
    assert await any_redis.exists(prefix + "claim", prefix + "token", prefix + "records") == 0
    fresh = await cp.claim("wf-ttl", 30, 30)
    assert fresh is not None
    assert fresh.token > stalled.token
    with pytest.raises(Fenced):
        await cp.record(stalled, "b", 2)


async def test_with_a_ttl_a_discarded_workflow_leaves_no_key_behind(any_redis: Any) -> None:
    ns = namespace_for(any_redis)
    cp = RedisCheckpointer(any_redis, key_prefix=ns, ttl=0.2)
    holder = await cp.claim("wf-gone", 30, 30)
    assert holder is not None
    await cp.record(holder, "a", 1)
    await cp.discard("wf-gone")
    await cp.discard("wf-never-used")
    await asyncio.sleep(0.35)  # past the ttl: the fenced token key has gone too
    assert [key async for key in any_redis.scan_iter(match=f"{ns}:wf:*")] == []
    fresh = await cp.claim("wf-gone", 30, 30)
    assert fresh is not None
    assert fresh.token > holder.token


async def test_an_enqueued_item_starts_within_two_seconds_despite_a_ten_second_poll(
    any_redis: Any,
) -> None:
    queue = RedisWorkQueue(any_redis, clock=SystemClock(), key_prefix=namespace_for(any_redis))
    started = asyncio.get_running_loop().create_future()

    async def worker() -> None:
        while True:
            item = await queue.claim(worker="w1", queue="fast")
            if item is not None:
                started.set_result(time.monotonic())
                return
            await queue.wait_for_work("fast", within=10.0)

    task = asyncio.create_task(worker())
    await asyncio.sleep(0.3)  # the worker is idle, blocked on the doorbell
    enqueued = time.monotonic()
    await queue.enqueue(WorkItem(id="job", tenant="t", queue="fast"))
    began = await asyncio.wait_for(started, timeout=5)
    await task
    assert began - enqueued < 2.0


async def test_a_ready_workflow_starts_within_two_seconds_despite_a_ten_second_poll(
    any_redis: Any,
) -> None:
    scheduler = RedisScheduler(any_redis, key_prefix=namespace_for(any_redis), poll_seconds=10)
    taker = asyncio.create_task(scheduler.next_ready(10.0))
    await asyncio.sleep(0.3)
    readied = time.monotonic()
    await scheduler.make_ready("wf-fast")
    delivery = await asyncio.wait_for(taker, timeout=5)
    assert delivery is not None
    assert delivery.workflow == "wf-fast"
    assert time.monotonic() - readied < 2.0


async def test_killing_and_restarting_the_server_loses_no_acknowledged_write() -> None:
    server = start_server("--appendonly", "yes", "--appendfsync", "always")
    settings = RedisStoreSettings(
        dsn=SecretStr(server.url),
        max_attempts=10,
        backoff_seconds=0.05,
        connect_timeout_seconds=0.5,
    )
    client: Redis = settings.client()
    # Retries pause on the store's clock: this one must really wait out the restart.
    store = RedisStateStore(client, clock=SystemClock(), settings=settings)
    acknowledged: list[RunRecord] = []

    async def writer(lane: int) -> None:
        for n in range(40):
            record = RunRecord(run_id=f"run-{lane}-{n}", tenant="t", agent_name="a")
            acknowledged.append(await store.put_run(record))
            await asyncio.sleep(0.005)

    async def crash() -> None:
        await asyncio.sleep(0.1)
        server.kill()  # SIGKILL: only what the AOF already holds survives
        await asyncio.sleep(0.3)
        await asyncio.to_thread(server.start)

    await asyncio.gather(*(writer(lane) for lane in range(4)), crash())
    assert len(acknowledged) == 160
    for record in acknowledged:
        stored = await store.get_run(StateKey(tenant="t", id=record.run_id))
        assert stored is not None, f"acknowledged {record.run_id} was lost"
        assert stored.version == record.version
    server.kill()
    await client.aclose()
