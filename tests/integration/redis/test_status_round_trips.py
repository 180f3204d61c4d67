"""The network round trips of an App workflow's status write, counted on the sockets of
the client the App opens (a wrapper on its streams, never a timing).

A round trip begins with a request sent while no other awaits its reply; a request sent
while one does (at once, to another node or on another connection) shares its round.
On one server a status write takes two: its intent and script in one write, then the
catalog's step and the tenant's (counts, the run following the workflow) in another.
On a cluster it takes three: the intent, the script (another slot, and the intent must
land first), then both steps at once to their nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from durably.redis import RedisCheckpointer, RedisStateStore, keys
from durably.redis.cluster import WaitingCluster
from durably.redis.keys import slot
from durably.stores import open_stores
from durably.stores.admission import TenantCaps
from durably.stores.catalog import CatalogEntry
from durably.stores.runs import FOLLOWS, RunRecord, RunState, StateKey
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Pass
from tests.redis_service import cluster_servers, drop_namespaces, durable_server, unique_namespace

pytestmark = pytest.mark.redis

TENANT = "acme"


@dataclass
class Trips:
    """Requests written to Redis sockets and the round trips they took."""

    writes: int = 0
    rounds: int = 0
    waiting: set[Any] = field(default_factory=set)

    def sent(self, transport: Any) -> None:
        if not self.waiting:
            self.rounds += 1
        self.waiting.add(transport)
        self.writes += 1

    def answered(self, transport: Any) -> None:
        self.waiting.discard(transport)


def _counted(monkeypatch: pytest.MonkeyPatch) -> Trips:
    """Count every request written on a stream from now on, and its reply's arrival."""
    trips = Trips()
    write, writelines = asyncio.StreamWriter.write, asyncio.StreamWriter.writelines
    read = asyncio.StreamReader.read

    def counted_write(self: asyncio.StreamWriter, data: Any) -> None:
        trips.sent(self.transport)
        write(self, data)

    def counted_writelines(self: asyncio.StreamWriter, data: Any) -> None:
        trips.sent(self.transport)
        writelines(self, data)

    async def counted_read(self: asyncio.StreamReader, n: int = -1) -> bytes:
        data = await read(self, n)
        trips.answered(getattr(self, "_transport", None))
        return data

    monkeypatch.setattr(asyncio.StreamWriter, "write", counted_write)
    monkeypatch.setattr(asyncio.StreamWriter, "writelines", counted_writelines)
    monkeypatch.setattr(asyncio.StreamReader, "read", counted_read)
    return trips


@pytest_asyncio.fixture(params=["standalone", "cluster"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, Any, str]]:
    if request.param == "cluster":
        nodes = ",".join(f"127.0.0.1:{n.port}" for n in cluster_servers())
        dsn = f"redis+cluster://{nodes}/?durable=false"
    else:
        dsn = f"redis://127.0.0.1:{durable_server().port}/0?durable=false"
    opened = await open_stores(dsn)
    ns = unique_namespace()
    try:
        yield str(request.param), opened.database, ns
    finally:
        await drop_namespaces(opened.database, [ns])
        await opened.close()


async def _started(
    checkpointer: RedisCheckpointer, state: RedisStateStore, workflow: str
) -> RunRecord:
    """An App's start of ``workflow``: admitted and catalogued under the tenant, its run
    record opened."""
    await checkpointer.admit(workflow, "start", {"n": 1}, tenant=TENANT, caps=TenantCaps())
    await checkpointer.catalog(workflow, CatalogEntry(TENANT, "kind", 1))
    run = RunRecord(run_id=workflow, tenant=TENANT, agent_name="kind", metadata={FOLLOWS: workflow})
    return await state.put_run(run)


def _beside(client: Any, ns: str, workflow: str) -> str:
    """Another workflow whose keys live on the node of ``workflow``'s."""
    if not isinstance(client, WaitingCluster):
        return "warm"
    nodes = client.nodes_manager

    def node(name: str) -> str:
        return str(nodes.get_node_from_slot(slot(keys.workflow_prefix(ns, name))).name)

    return next(f"warm{n}" for n in range(1000) if node(f"warm{n}") == node(workflow))


async def _running(checkpointer: RedisCheckpointer, state: RedisStateStore, workflow: str) -> Pass:
    await _started(checkpointer, state, workflow)
    holder = await checkpointer.claim(workflow, 30, 30)
    assert holder is not None
    await checkpointer.set_status(holder, WorkflowStatus.RUNNING)
    return holder


@pytest.mark.parametrize(
    ("status", "followed"),
    [(WorkflowStatus.SLEEPING, RunState.SUSPENDED), (WorkflowStatus.COMPLETED, RunState.COMPLETED)],
)
async def test_a_status_write_takes_two_round_trips_on_one_server_and_three_on_a_cluster(
    stores: tuple[str, Any, str],
    monkeypatch: pytest.MonkeyPatch,
    status: WorkflowStatus,
    followed: RunState,
) -> None:
    mode, client, ns = stores
    checkpointer = RedisCheckpointer(client, key_prefix=ns)
    state = RedisStateStore(client, key_prefix=ns)
    # A first workflow on the same node opens the connections (and caches the scripts)
    # the counted write uses.
    warm = await _running(checkpointer, state, _beside(client, ns, "w"))
    await checkpointer.finish(warm, "result", 1)
    await checkpointer.set_status(await _running(checkpointer, state, "w2"), status)
    holder = await _running(checkpointer, state, "w")

    trips = _counted(monkeypatch)
    if status is WorkflowStatus.COMPLETED:  # the tenant's running count moves too
        await checkpointer.finish(holder, "result", 2)
    else:
        await checkpointer.set_status(holder, status)
    monkeypatch.undo()

    assert (trips.rounds, trips.writes) == {"standalone": (2, 2), "cluster": (3, 4)}[mode]
    # Every step landed: the run followed, the tenant's counts moved, the catalog shows it.
    assert (await _stored(state, "w")).state is followed
    finished = status is WorkflowStatus.COMPLETED  # then the warm one's status too
    assert (await checkpointer.tenant_counts(TENANT)).running == (0 if finished else 2)
    assert (await checkpointer.tally(TENANT))[("kind", status)] == (3 if finished else 2)


async def _stored(state: RedisStateStore, run_id: str) -> RunRecord:
    run = await state.get_run(StateKey(tenant=TENANT, id=run_id))
    assert run is not None
    return run
