"""`RedisGates`: the Redis checkpointer's workflow gates (`durably.stores.gates`).

A gate's line and counts live in the gate's slot; a workflow's status in its own. A
cluster cannot move both in one script, so the write that frees a slot is two steps, as
the tenant counts are: the workflow's status script (which names the workflow's gate),
then `gate_move` in the gate's slot, which frees the slot and admits the next in line;
then the admitted workflow's status (PENDING) and its wakeup, each in its own slot.

Every gate is named in a registry (a set in the status index's slot) before its first
mark is written, so the repair pass can walk every gate's queued and held workflows and
finish the steps a killed process left undone.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from durably.redis import keys
from durably.redis.connection import RedisConnection, text
from durably.redis.order import priority_offset
from durably.redis.scripts import Script, scripts
from durably.stores.gates import GateCounts, WorkflowGate
from durably.stores.workflows import DEFAULT_PRIORITY

_GATES = scripts("gate_admit", "gate_move", "gate_counts", "gate_rerank", prelude="gate_lib.lua")
_THROTTLE = scripts("gate_throttle")["gate_throttle"]
_KNOWN_MOST = 10_000  # gate names a process remembers having registered

Run = Callable[[Script, list[str], list[str]], Awaitable[Any]]
"""Runs a script over its keys and arguments (the checkpointer's, with its retries)."""


@dataclass(frozen=True, slots=True)
class GateMark:
    """A gated workflow as its gate's marks name it: ``state`` is queued, held or free;
    ``namespace`` is the gate's scheduler namespace."""

    gate: str
    workflow: str
    state: str
    namespace: str


class RedisGates:
    """The gates' scripts, each on the gate's slot, and the repair pass's walk."""

    def __init__(self, redis: RedisConnection, run: Run) -> None:
        self._redis = redis
        self._ns = redis.key_prefix
        self._run = run
        self._registry = keys.workflow_index_prefix(self._ns) + "gates"
        self._known: set[str] = set()
        # Where the walk over every gate's live marks stands (it rolls on over calls).
        self._gates_cursor = 0
        self._walking = False
        self._ahead: list[str] = []
        self._gate: str | None = None
        self._space = ""
        self._marks_cursor = 0
        self._walk = asyncio.Lock()  # one walk at a time: they share its position

    def _keys(self, gate: str) -> tuple[list[str], str]:
        prefix = keys.gate_prefix(self._ns, gate)
        return [prefix + "meta"], prefix

    async def admit(
        self, workflow: str, tenant: str, gate: WorkflowGate, *, fresh: bool
    ) -> tuple[bool, list[tuple[str, str, str, int]]]:
        """Take ``workflow`` through ``gate`` (``fresh``: its record was just written):
        whether it is queued, and the workflows a limit raised since the last start
        admitted from the line first, as (workflow, tenant, namespace, priority). The gate
        is registered first, so the repair pass finds its marks."""
        if gate.name not in self._known:
            client = self._redis.client
            await self._redis.state(lambda: client.sadd(self._registry, gate.name))
            if len(self._known) >= _KNOWN_MOST:
                self._known.clear()
            self._known.add(gate.name)
        meta, prefix = self._keys(gate.name)
        normal = gate.priority == DEFAULT_PRIORITY
        args = [
            prefix,
            workflow,
            tenant,
            gate.namespace,
            "" if gate.limit is None else str(gate.limit),
            "1" if fresh else "0",
            priority_offset(gate.priority),
            "" if normal else str(gate.priority),
        ]
        queued, *flat = [text(value) for value in await self._run(_GATES["gate_admit"], meta, args)]
        return queued == "1", _admitted(flat)

    async def move(
        self, gate: str, workflow: str, *, finished: bool, forget: bool = False, number: int = 0
    ) -> tuple[bool, list[tuple[str, str, str, int]]]:
        """``workflow`` crossed finished/unfinished (or was deleted, ``forget``) for the
        ``number``-th time (0: it is gone, whatever its crossings): whether its gate took
        the crossing, and the workflows it admitted from the line, as (workflow, tenant,
        namespace, priority). A crossing the gate took already, or one older than it took, changes
        nothing."""
        meta, prefix = self._keys(gate)
        args = [
            prefix,
            workflow,
            "1" if finished else "0",
            "1" if forget else "0",
            str(number) if number else "",
        ]
        taken, *flat = [text(value) for value in await self._run(_GATES["gate_move"], meta, args)]
        return taken == "1", _admitted(flat)

    async def rerank(self, workflow: str, gate: str, priority: int) -> bool:
        """Move ``workflow``, queued in ``gate``'s line, to ``priority``'s place in its
        tenant's line (in the gate's slot, one script); False when it is not queued
        there."""
        meta, prefix = self._keys(gate)
        normal = priority == DEFAULT_PRIORITY
        args = [prefix, workflow, priority_offset(priority), "" if normal else str(priority)]
        return bool(int(await self._run(_GATES["gate_rerank"], meta, args)))

    async def counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        meta, prefix = self._keys(gate)
        admitted, queued = await self._run(_GATES["gate_counts"], meta, [prefix])
        return GateCounts(int(admitted), int(queued))

    async def throttle(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve the next start slot of throttle ``key``: when the start may begin."""
        args = [repr(now), repr(interval), str(burst)]
        return float(text(await self._run(_THROTTLE, [keys.throttle_key(self._ns, key)], args)))

    async def walk(self, limit: int) -> list[GateMark]:
        """About ``limit`` more queued or held gate marks (a finished workflow's is not
        read), on from where the last call stopped (one key at a time, each in its gate's
        slot); fewer when a round over every gate ends, so a round's last call is short
        and the next call starts the next round."""
        async with self._walk:
            return await self._walk_on(limit)

    async def _walk_on(self, limit: int) -> list[GateMark]:
        client = self._redis.client
        found: list[GateMark] = []
        while len(found) < limit:
            if self._gate is None and not await self._next_gate():
                break
            gate, space = self._gate or "", self._space
            prefix = keys.gate_prefix(self._ns, gate)
            scan = functools.partial(
                client.sscan, prefix + "live", self._marks_cursor, count=limit - len(found)
            )
            cursor, page = await self._redis.state(scan)
            names = [text(name) for name in page]
            if names:
                states = await self._redis.state(
                    functools.partial(client.hmget, prefix + "marks", names)
                )
                found += [
                    GateMark(gate, name, text(state), space)
                    for name, state in zip(names, states, strict=True)
                    if state is not None
                ]
            self._marks_cursor = int(cursor)
            if not self._marks_cursor:
                self._gate = None
        return found

    async def _next_gate(self) -> bool:
        """Move the walk to the registry's next gate; False when a round just ended."""
        client = self._redis.client
        while not self._ahead:
            if self._walking and self._gates_cursor == 0:
                self._walking = False
                return False
            self._walking = True
            scan = functools.partial(client.sscan, self._registry, self._gates_cursor, count=100)
            cursor, names = await self._redis.state(scan)
            self._gates_cursor = int(cursor)
            self._ahead = sorted((text(name) for name in names), reverse=True)
        self._gate = self._ahead.pop()
        (meta,), _ = self._keys(self._gate)
        space = await self._redis.state(functools.partial(client.hget, meta, "space"))
        self._space = "" if space is None else text(space)
        self._marks_cursor = 0
        return True


def _admitted(flat: list[str]) -> list[tuple[str, str, str, int]]:
    """A script's flat answer of workflows admitted from a line, as (workflow, tenant,
    namespace, priority)."""
    return [
        (flat[n], flat[n + 1], flat[n + 2], int(flat[n + 3] or DEFAULT_PRIORITY))
        for n in range(0, len(flat), 4)
    ]


__all__ = ["GateMark", "RedisGates"]
