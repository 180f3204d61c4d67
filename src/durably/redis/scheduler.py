"""`RedisScheduler`: one entry per workflow, in a line per tenant, tenants in rotation.

Hand-outs are invisible for ``lease`` seconds of server time; sleeping entries are due on
the caller's clock. An idle `next_ready` blocks on a doorbell list that every wakeup rings
(BLPOP), so a ready workflow starts in milliseconds; ``poll_seconds`` is only the fallback.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any, Self

from durably.redis import keys
from durably.redis.connection import RedisConnection, number, text
from durably.redis.order import priority_offset
from durably.redis.preflight import preflight
from durably.redis.scripts import Script, scripts
from durably.redis.settings import RedisStoreSettings
from durably.stores.workflows import (
    DEFAULT_LEASE,
    DEFAULT_NAMESPACE,
    DEFAULT_TENANT,
    LAPSED_PER_TAKE,
    Delivery,
    Ready,
    new_priority,
    ready_batch,
    ready_priority,
    workflow_batch,
)
from durably.validation import finite, identifier, non_negative, positive

_LUA = scripts(
    "scheduler_make_ready",
    "scheduler_take",
    "scheduler_done",
    "scheduler_wake_at",
    "scheduler_wake_due",
    "scheduler_reclaim",
    "scheduler_extend",
    "scheduler_cancel",
    "scheduler_reprioritize",
    prelude="scheduler_lib.lua",
)


def _us(seconds: float) -> str:
    return str(round(seconds * 1_000_000))


class RedisScheduler:
    """`Scheduler` over Redis; every entry of one ``namespace`` lives in one hash slot.

    ``open`` runs `preflight`; the constructor does not.
    """

    def __init__(
        self,
        client: Any,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        lease: float = DEFAULT_LEASE,
        settings: RedisStoreSettings | None = None,
        key_prefix: str | None = None,
        key_namespace: str | None = None,
        poll_seconds: float = 1.0,
    ) -> None:
        self._redis = RedisConnection(client, settings, key_prefix, namespace=key_namespace)
        self._lease = positive(lease, "lease")
        self._poll = positive(poll_seconds, "poll_seconds")
        self._namespace = identifier(namespace, "namespace")
        self._prefix = keys.scheduler_prefix(self._redis.key_prefix, namespace)
        # Where every ready entry lived before schedulers kept tenants: each script moves
        # what it finds there to its tenant's line (scheduler_lib.lua).
        self._legacy = self._prefix + "ready"

    @property
    def namespace(self) -> str:
        """The namespace (the workflow kind) this scheduler's entries live in."""
        return self._namespace

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the client is its owner's."""

    @classmethod
    async def open(
        cls,
        client: Any,
        *,
        settings: RedisStoreSettings,
        namespace: str = DEFAULT_NAMESPACE,
        lease: float = DEFAULT_LEASE,
        poll_seconds: float = 1.0,
        key_prefix: str | None = None,
    ) -> Self:
        """A scheduler over ``client`` once `preflight` accepted the server."""
        await preflight(client, durable=settings.durable)
        return cls(
            client,
            namespace=namespace,
            lease=lease,
            settings=settings,
            poll_seconds=poll_seconds,
            key_prefix=key_prefix,
        )

    @property
    def lease(self) -> float:
        """Seconds a delivery stays invisible to other takers."""
        return self._lease

    async def _run(self, name: str, args: list[str]) -> Any:
        script: Script = _LUA[name]
        client = self._redis.client
        return await self._redis.state(
            lambda: script(client, [self._legacy], [self._prefix, DEFAULT_TENANT, *args])
        )

    async def prepare(self) -> None:
        """Nothing to set up: keys appear on first use."""

    async def make_ready(
        self, workflow: str, *, tenant: str | None = None, priority: int | None = None
    ) -> None:
        """Make the workflow runnable now in ``tenant``'s turn at ``priority`` (None: the
        tenant or priority it has); survives a pass in flight."""
        identifier(workflow, "workflow")
        owner = "" if tenant is None else identifier(tenant, "tenant")
        rank = ready_priority(priority)
        offset = "" if rank is None else priority_offset(rank)
        await self._run("scheduler_make_ready", [workflow, owner, "", offset])

    async def make_ready_many(self, entries: Sequence[Ready]) -> None:
        """`make_ready` each entry: one script each (every entry is in the namespace's
        slot), sent together."""
        calls = []
        for entry in ready_batch(entries):
            rank = ready_priority(entry.priority)
            offset = "" if rank is None else priority_offset(rank)
            owner = entry.tenant or ""
            head = (self._legacy, self._prefix, DEFAULT_TENANT)
            calls.append((*head, entry.workflow, owner, "", offset))
        if calls:
            await self._redis.run_many(_LUA["scheduler_make_ready"], calls)

    async def cancel_many(self, workflows: Sequence[str]) -> None:
        """`cancel` each workflow: one script each, sent together."""
        calls = [
            (self._legacy, self._prefix, DEFAULT_TENANT, workflow)
            for workflow in workflow_batch(workflows)
        ]
        if calls:
            await self._redis.run_many(_LUA["scheduler_cancel"], calls)

    async def make_ready_if_absent(self, workflow: str, *, tenant: str) -> bool:
        """`make_ready`, unless the workflow has an entry already (ready, in flight or
        sleeping): whether it was made ready. The gates' repair pass wakes a workflow it
        cannot tell was woken this way, so one woken meanwhile keeps its place."""
        identifier(workflow, "workflow")
        return bool(
            int(
                await self._run(
                    "scheduler_make_ready", [workflow, identifier(tenant, "tenant"), "1"]
                )
            )
        )

    async def wake_at(self, delivery: Delivery, when: float) -> None:
        """Answer ``delivery`` and sleep until ``when`` (caller's clock), never pushing out
        a wakeup that arrived meanwhile."""
        identifier(delivery.workflow, "workflow")
        await self._run(
            "scheduler_wake_at",
            [delivery.workflow, delivery.receipt, number(finite(when, "when"))],
        )

    async def reprioritize(self, workflow: str, priority: int) -> bool:
        """Serve the workflow's entry at ``priority`` from now on, its visibility kept;
        False when it has none."""
        identifier(workflow, "workflow")
        offset = priority_offset(new_priority(priority))
        return bool(int(await self._run("scheduler_reprioritize", [workflow, offset])))

    async def wake_due(self, now: float) -> int:
        """Make every sleeping entry due at or before ``now`` ready; the count woken."""
        return int(await self._run("scheduler_wake_due", [number(finite(now, "now"))]))

    async def next_ready(self, within: float) -> Delivery | None:
        """Take a ready workflow in the fairness order, waiting up to ``within`` seconds."""
        non_negative(within, "within")
        deadline = time.monotonic() + within
        client = self._redis.client
        bell = self._prefix + "bell"
        while True:
            reply = await self._run("scheduler_take", [_us(self._lease), str(LAPSED_PER_TAKE)])
            workflow = text(reply[0])
            if workflow:
                return Delivery(workflow, text(reply[1]))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            wait = min(remaining, self._poll)
            hint = text(reply[1])
            if hint:
                wait = min(wait, int(hint) / 1_000_000)
            # BLPOP's 0 means "forever"; wait at least a millisecond.
            timeout = max(wait, 0.001)
            await self._redis.state(functools.partial(client.blpop, [bell], timeout=timeout))

    async def reclaim(self, idle: float) -> list[str]:
        """Make deliveries taken at least ``idle`` seconds ago visible again (0 = all); the
        workflows reclaimed."""
        reclaimed = await self._run("scheduler_reclaim", [_us(non_negative(idle, "idle"))])
        return [text(workflow) for workflow in reclaimed]

    async def extend(self, delivery: Delivery, within: float) -> bool:
        """Keep ``delivery`` invisible for ``within`` more seconds; False if not held."""
        positive(within, "within")
        identifier(delivery.workflow, "workflow")
        reply = await self._run(
            "scheduler_extend", [delivery.workflow, delivery.receipt, _us(within)]
        )
        return bool(reply)

    async def cancel(self, workflow: str) -> None:
        """Remove the workflow's queued, sleeping or in-flight entry."""
        await self._run("scheduler_cancel", [identifier(workflow, "workflow")])

    async def done(self, delivery: Delivery) -> None:
        """Answer ``delivery``; a wakeup that arrived meanwhile stays."""
        identifier(delivery.workflow, "workflow")
        await self._run("scheduler_done", [delivery.workflow, delivery.receipt])


__all__ = ["RedisScheduler"]
