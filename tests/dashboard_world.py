"""A store filled with what every dashboard page shows, for the dashboard's tests: a
dead letter, a workflow waiting on a message, one that completed with a hostile
argument, one that failed, a parent with a child, and agent runs of two tenants."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from durably.app import App, Context, Retry, Topic
from durably.stores.runs import RunRecord, RunState, Usage
from durably.stores.status import WorkflowStatus
from durably.stores.work import WorkItem, WorkState
from tests.redis_service import durable_server

HOSTILE = "<script>window.__pwned = 1</script>"
"""A stored value that would run if a page did not escape it."""

REDIS_DB = 13
"""The Redis database index the dashboard tests own on the shared test server."""

APPROVAL = Topic("approval", str)


@dataclass(frozen=True)
class World:
    """What `fill` made: ids to look for on the pages."""

    queue: str
    dead_item: str
    tenant: str
    waiting: str
    hostile: str
    failed: str
    parent: str
    run_tenant: str
    run_id: str


def dsn_of(backing: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh store of ``backing`` for one test."""
    if backing == "memory":
        return "memory://"
    if backing == "sqlite":
        return f"sqlite:///{tmp_path / 'dashboard.db'}"
    if backing == "postgresql":
        return str(request.getfixturevalue("postgres_dsn"))
    pytest.importorskip("redis.asyncio")
    return f"{durable_server().url.rsplit('/', 1)[0]}/{REDIS_DB}"


async def empty_redis() -> None:
    """Empty the dashboard tests' Redis database (the overview lists its first tenants)."""
    from redis.asyncio import Redis

    client = Redis(host="127.0.0.1", port=durable_server().port, db=REDIS_DB)
    try:
        await client.flushdb()
    finally:
        await client.aclose()


def register(app: App) -> None:
    """The workflow kinds `fill` starts (a worker of the same store needs them too)."""

    @app.workflow(name="dash-approval")
    async def approval(ctx: Context, note: str) -> str:
        answer = await ctx.recv(APPROVAL)
        return f"{note}: {answer}"

    @app.workflow(name="dash-greet")
    async def greet(ctx: Context, name: str) -> str:
        return await shout(name)

    @app.step(name="dash-shout")
    async def shout(name: str) -> str:
        return name.upper()

    @app.workflow(name="dash-broken")
    async def broken(ctx: Context) -> None:
        await explode()

    @app.step(name="dash-explode", retry=Retry(max_attempts=1))
    async def explode() -> None:
        raise ValueError(f"boom {HOSTILE}")

    @app.workflow(name="dash-parent")
    async def parent(ctx: Context) -> str:
        return await ctx.child(greet, "child")


async def fill(app: App) -> World:
    """Fill ``app``'s store (its kinds registered with `register`) and run it idle."""
    tag = uuid.uuid4().hex[:8]
    world = World(
        queue=f"dash-q-{tag}",
        dead_item=f"item-{tag}",
        tenant=app.tenant,
        waiting=f"waiting-{tag}",
        hostile=f"hostile-{tag}",
        failed=f"failed-{tag}",
        parent=f"parent-{tag}",
        run_tenant=f"0-acme-{tag}",  # first in code point order: the overview lists 20
        run_id=f"run-{tag}",
    )
    stores = await app.stores()
    item = WorkItem(
        id=world.dead_item, tenant=world.tenant, queue=world.queue, payload={"note": HOSTILE}
    )
    await stores.queue.enqueue(item)
    claimed = await stores.queue.claim(worker="dash-test", queue=world.queue)
    assert claimed is not None
    assert claimed.id == world.dead_item
    dead = await stores.queue.fail(
        world.dead_item,
        tenant=world.tenant,
        worker="dash-test",
        error=f"refused {HOSTILE}",
        retryable=False,
    )
    assert dead.state is WorkState.DEAD_LETTERED
    kinds = app.workflows
    await kinds["dash-approval"].start("ship it", id=world.waiting)
    await kinds["dash-greet"].start(HOSTILE, id=world.hostile)
    await kinds["dash-broken"].start(id=world.failed)
    await kinds["dash-parent"].start(id=world.parent)
    await app.run_until_idle()
    waiting = await app.get_handle(world.waiting)
    assert (await waiting.status()).status is WorkflowStatus.BLOCKED
    for n, (tenant, tokens) in enumerate(((world.run_tenant, 1200), (f"zz-{tag}", 300))):
        await stores.state.put_run(
            RunRecord(
                run_id=world.run_id if n == 0 else f"other-{tag}",
                tenant=tenant,
                agent_name="triage",
                state=RunState.COMPLETED,
                usage=Usage(input_tokens=tokens, output_tokens=tokens // 2, requests=2),
                cost_micros=tokens * 10,
            )
        )
    return world


__all__ = ["APPROVAL", "HOSTILE", "REDIS_DB", "World", "dsn_of", "empty_redis", "fill", "register"]
