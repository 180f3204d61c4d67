"""Keeping the status index and the catalog in step with the workflows' own statuses.

A workflow's status lives in its own slot, the index and the catalog (lines, counts, the
throughput ring) in the index's, so a cluster cannot move both in one script: the status
write is followed by a second step. Before the status write, an *intent* (a member of
the unindexed set, scored by the time it was written) names the workflow in the index's
slot; the second step takes it out in the same script. An intent left over names a
write whose step a killed process never ran, and `StatusIndex.repair` brings that step
from the workflow's status as it stands: it reads the intents older than a grace, never
the index or the workflows, so its cost follows the steps lost, not the store's size.

Beside the index's step, in the same round trip, a step in the workflow's tenant's slot
moves the tenant's counts and the run record following the workflow: neither reads what
the other writes, so they go out together (in one write on one server, at once to their
two nodes on a cluster).
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from durably.redis import keys
from durably.redis.catalog import RedisCatalog
from durably.redis.connection import RedisConnection, text
from durably.redis.scripts import Script, run_together, scripts
from durably.stores.runs import run_state
from durably.stores.status import WorkflowStatus

_INDEX = scripts("workflow_index")["workflow_index"]
_TENANT = Script.load("workflow_tenant_step.lua", "state_lib.lua")


@dataclass(frozen=True)
class Step:
    """One status write's second step, for `StatusIndex.step_many`: ``workflow`` moved to
    ``status`` at ``at_us``, its ``intents`` to take out, and for a workflow admitted
    under ``tenant`` its counts' moves (``running``, ``started``)."""

    workflow: str
    status: WorkflowStatus
    at_us: str
    intents: tuple[str, ...]
    tenant: str = ""
    running: int = 0
    started: int = 0


_STATUSES = [status.value for status in WorkflowStatus]

GRACE_SECONDS = 60.0
"""How old an intent is before the repair takes it for a lost step (a live writer's
second step follows its status write within milliseconds)."""

Reported = Callable[[list[str]], Awaitable[list[tuple[str, str, bool, str]]]]
"""Reads each workflow's status and its time as stored ('' and '' for none), whether it
has records and the tenant it was admitted under ('' for none), in one pipeline."""


class StatusIndex:
    """The status index and catalog of one key prefix (``index``: the index's key prefix),
    and the intents that make their second step repairable."""

    def __init__(
        self,
        redis: RedisConnection,
        index: str,
        catalog: RedisCatalog,
        reported: Reported,
    ) -> None:
        self._redis = redis
        self._index = index
        self._keys = [
            index + "all",
            *catalog.catalog_keys(),
            index + "rate",
            index + "unindexed",
        ]
        self._unindexed = index + "unindexed"
        self._reported = reported
        # An intent is unique to its write: this process, then a count.
        self._mine = os.urandom(6).hex()
        self._count = itertools.count()

    async def written(
        self, workflow: str, script: Script, keys: list[str], args: list[str]
    ) -> tuple[str, Any]:
        """Run ``script`` (a status write of ``workflow``, over ``keys`` and ``args``) after
        naming the write in an intent, in one write where the client allows: the intent
        its `step` takes out, and the script's reply."""
        intent = f"{self._mine}{next(self._count):x}|{workflow}"
        before = ("ZADD", self._unindexed, repr(time.time()), intent)
        client = self._redis.client
        reply = await self._redis.state(
            lambda: script.run_after(client, before, len(keys), *keys, *args)
        )
        return intent, reply

    async def step(
        self,
        workflow: str,
        status: WorkflowStatus | None,
        at_us: str = "",
        intents: tuple[str, ...] = (),
        *,
        tenant: str = "",
        running: int = 0,
        started: int = 0,
    ) -> None:
        """Move ``workflow`` to ``status`` (None: gone) written at ``at_us`` ('': not
        known) in the index and the catalog, and take ``intents`` out, in one script. A
        catalogued workflow already showing a later status keeps it.

        Beside it, for a workflow admitted under ``tenant``, a script in the tenant's slot
        moves its counts by ``running`` and ``started`` and the run record following the
        workflow (`durably.stores.runs.FOLLOWS`) to the run state of ``status``."""
        index_args = [
            self._index + "status:",
            workflow,
            status.value if status else "",
            at_us,
            str(len(intents)),
            *intents,
            *_STATUSES,
        ]
        calls = [(_INDEX, self._keys, index_args)]
        if tenant:
            ns = self._redis.key_prefix
            prefix = keys.state_prefix(ns, tenant)
            calls.append(
                (
                    _TENANT,
                    [
                        keys.tenant_counts_key(ns, tenant),
                        keys.followed_runs_key(ns, tenant),
                        prefix + "totals",
                    ],
                    [
                        str(running),
                        str(started),
                        prefix,
                        workflow,
                        run_state(status).value if status is not None else "",
                        at_us,
                    ],
                )
            )
        await run_together(self._redis.client, calls, self._redis.state)

    async def intend(self, workflows: Sequence[str]) -> list[str]:
        """Name a status write of each of ``workflows`` in an intent, in one write made
        before those writes (a batch's `written`): the intents, in order."""
        intents = [f"{self._mine}{next(self._count):x}|{workflow}" for workflow in workflows]
        if intents:
            at = time.time()
            client = self._redis.client
            await self._redis.state(
                lambda: client.zadd(self._unindexed, dict.fromkeys(intents, at))
            )
        return intents

    async def step_many(self, steps: Sequence[Step]) -> None:
        """`step` each of ``steps``: the catalog's scripts sent together, then the tenant
        steps of those admitted under a tenant, likewise."""
        if not steps:
            return
        calls = [
            (
                *self._keys,
                self._index + "status:",
                step.workflow,
                step.status.value,
                step.at_us,
                str(len(step.intents)),
                *step.intents,
                *_STATUSES,
            )
            for step in steps
        ]
        await self._redis.run_many(_INDEX, calls, numkeys=len(self._keys))
        ns = self._redis.key_prefix
        tenant_calls = [
            (
                keys.tenant_counts_key(ns, step.tenant),
                keys.followed_runs_key(ns, step.tenant),
                keys.state_prefix(ns, step.tenant) + "totals",
                str(step.running),
                str(step.started),
                keys.state_prefix(ns, step.tenant),
                step.workflow,
                run_state(step.status).value,
                step.at_us,
            )
            for step in steps
            if step.tenant
        ]
        if tenant_calls:
            await self._redis.run_many(_TENANT, tenant_calls, numkeys=3)

    async def repair(self, *, limit: int, grace: float = GRACE_SECONDS) -> int:
        """Bring the second step of up to ``limit`` status writes whose intent is older
        than ``grace`` seconds, from each workflow's status as it stands now: the number
        of workflows stepped. Safe beside the writes and other repairs: a step never puts
        back a status older than the one the catalog shows."""
        client = self._redis.client
        found = await self._redis.state(
            functools.partial(
                client.zrangebyscore,
                self._unindexed,
                "-inf",
                time.time() - grace,
                start=0,
                num=limit,
            )
        )
        held: dict[str, list[str]] = {}
        for intent in (text(member) for member in found):
            held.setdefault(intent.partition("|")[2], []).append(intent)
        if not held:
            return 0
        workflows = list(held)
        for workflow, (status, at_us, recorded, tenant) in zip(
            workflows, await self._reported(workflows), strict=True
        ):
            intents = tuple(held[workflow])
            if status in _STATUSES:
                await self.step(workflow, WorkflowStatus(status), at_us, intents, tenant=tenant)
            elif not status and not recorded:  # deleted
                await self.step(workflow, None, "", intents)
            else:  # a start in flight (records, no status yet), or a status nobody can read
                await self.forget(*intents)
        return len(workflows)

    async def forget(self, *intents: str) -> None:
        """Take ``intents`` out without a step (their write wrote nothing, or their
        workflow has nothing to index)."""
        client = self._redis.client
        await self._redis.state(lambda: client.zrem(self._unindexed, *intents))


__all__ = ["GRACE_SECONDS", "StatusIndex"]
