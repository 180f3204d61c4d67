"""On a cluster a script call (and a status read) goes to its slot's primary on one of
that node's connections, not through redis-py's cluster ``execute_command``; a call the
slot table sends to the wrong node, or over a connection the server closed, still lands
once, through it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from durably.redis import RedisCheckpointer
from durably.redis.cluster import WaitingCluster
from durably.redis.connection import RedisConnection
from durably.redis.keys import slot
from durably.redis.scripts import Script
from durably.stores import open_stores
from durably.stores.status import WorkflowStatus
from tests.redis_service import cluster_servers, drop_namespaces, unique_namespace

pytestmark = pytest.mark.redis

_INCR = Script("return redis.call('INCR', KEYS[1])", "test_incr.lua")


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[tuple[WaitingCluster, str]]:
    nodes = ",".join(f"127.0.0.1:{n.port}" for n in cluster_servers())
    stores = await open_stores(f"redis+cluster://{nodes}/?durable=false")
    client = stores.database
    assert isinstance(client, WaitingCluster)
    ns = unique_namespace()
    try:
        yield client, ns
    finally:
        await drop_namespaces(client, [ns])
        await stores.close()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every command sent through redis-py's cluster ``execute_command`` from now on."""
    sent: list[tuple[Any, ...]] = []
    through = RedisCluster.execute_command

    async def counted(self: RedisCluster, *args: Any, **kwargs: Any) -> Any:
        sent.append(args)
        return await through(self, *args, **kwargs)

    monkeypatch.setattr(RedisCluster, "execute_command", counted)
    return sent


async def test_script_calls_skip_the_cluster_clients_command_path(
    cluster: tuple[WaitingCluster, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, ns = cluster
    keys = [f"{ns}:{{k{n}}}" for n in range(30)]  # spread over the masters
    for key in keys:  # the slot table is read, the script cached on every master
        await _INCR(client, [key], [])
    sent = _counting(monkeypatch)
    for key in keys:
        assert await _INCR(client, [key], []) == 2
    assert sent == []
    assert len({client.nodes_manager.get_node_from_slot(slot(k)).name for k in keys}) == 3


async def test_a_call_the_slot_table_sends_to_the_wrong_node_lands_once_on_the_owner(
    cluster: tuple[WaitingCluster, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, ns = cluster
    key = f"{ns}:{{moved}}"
    await _INCR(client, [key], [])
    owner = client.nodes_manager.get_node_from_slot(slot(key))
    stranger = next(n for n in client.get_primaries() if n.name != owner.name)
    client.nodes_manager.slots_cache[slot(key)] = [stranger]  # a slot table gone stale
    sent = _counting(monkeypatch)
    assert await _INCR(client, [key], []) == 2  # MOVED, then sent where the slot lives
    assert [args[0] for args in sent] == ["EVALSHA"]
    assert client.nodes_manager.get_node_from_slot(slot(key)).name == owner.name
    assert await client.get(key) == b"2"


async def test_a_call_over_connections_the_server_closed_lands_once_and_frees_its_turn(
    cluster: tuple[WaitingCluster, str],
) -> None:
    client, ns = cluster
    key = f"{ns}:{{closed}}"
    await asyncio.gather(*(_INCR(client, [key], []) for _ in range(4)))  # a few connections
    owner = client.nodes_manager.get_node_from_slot(slot(key))
    assert len(owner._free) >= 2
    outsider = Redis(host=owner.host, port=int(owner.port))
    try:  # the server drops every connection of the client's to that node
        assert await outsider.client_kill_filter(_type="normal", skipme=True) >= 2
    finally:
        await outsider.aclose()
    store = RedisConnection(client, None, ns)
    assert await store.state(lambda: _INCR(client, [key], [])) == 5
    assert await client.get(key) == b"5"
    assert client._free_turns._value == client.turns


async def test_a_status_read_skips_the_cluster_clients_command_path(
    cluster: tuple[WaitingCluster, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, ns = cluster
    checkpointer = RedisCheckpointer(client, key_prefix=ns)
    workflows = [f"wf-{n}" for n in range(30)]  # spread over the masters
    for workflow in workflows:
        await checkpointer.supply(workflow, "start", {"n": workflow})
        holder = await checkpointer.claim(workflow, 60.0, 30.0)
        assert holder is not None
        await checkpointer.set_status(holder, WorkflowStatus.RUNNING, attempts=2)
        await checkpointer.release(holder)
        assert await checkpointer.get_status(workflow) is not None  # the slot table is read
    sent = _counting(monkeypatch)
    for workflow in workflows:
        info = await checkpointer.get_status(workflow)
        assert info is not None
        assert (info.workflow, info.status, info.attempts) == (
            workflow,
            WorkflowStatus.RUNNING,
            2,
        )
    assert await checkpointer.get_status("wf-never") is None
    assert sent == [], sent
