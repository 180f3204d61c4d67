"""`RedisGates`: the Redis checkpointer's workflow gates (`durably.stores.gates`).

A gate's line and counts live in the gate's slot; a workflow's status in its own. A
cluster cannot move both in one script, so the write that frees a slot is two steps, as
the tenant counts are: the workflow's status script (which names the workflow's gate),
then `gate_move` in the gate's slot, which frees the slot and admits the next in line;
then the admitted workflow's status (PENDING) and its wakeup, each in its own slot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from durably.redis import keys
from durably.redis.scripts import Script, scripts
from durably.stores.gates import GateCounts, WorkflowGate

_GATES = scripts("gate_admit", "gate_move", "gate_counts", prelude="gate_lib.lua")
_THROTTLE = scripts("gate_throttle")["gate_throttle"]

Run = Callable[[Script, list[str], list[str]], Awaitable[Any]]
"""Runs a script over its keys and arguments (the checkpointer's, with its retries)."""


class RedisGates:
    """The gates' scripts, each on the gate's slot."""

    def __init__(self, key_prefix: str, run: Run) -> None:
        self._ns = key_prefix
        self._run = run

    def _keys(self, gate: str) -> tuple[list[str], str]:
        prefix = keys.gate_prefix(self._ns, gate)
        return [prefix + "meta"], prefix

    async def admit(self, workflow: str, tenant: str, gate: WorkflowGate) -> bool:
        """Take ``workflow`` (its first start, just written) through ``gate``; True when
        it is queued."""
        meta, prefix = self._keys(gate.name)
        args = [prefix, workflow, tenant, gate.namespace, str(gate.limit)]
        return bool(int(await self._run(_GATES["gate_admit"], meta, args)))

    async def move(
        self, gate: str, workflow: str, *, finished: bool, forget: bool = False
    ) -> list[tuple[str, str, str]]:
        """``workflow`` crossed finished/unfinished (or was deleted, ``forget``): the
        workflows its gate admitted from the line, as (workflow, tenant, namespace)."""
        meta, prefix = self._keys(gate)
        args = [prefix, workflow, "1" if finished else "0", "1" if forget else "0"]
        flat = [_text(value) for value in await self._run(_GATES["gate_move"], meta, args)]
        return [(flat[n], flat[n + 1], flat[n + 2]) for n in range(0, len(flat), 3)]

    async def counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        meta, prefix = self._keys(gate)
        admitted, queued = await self._run(_GATES["gate_counts"], meta, [prefix])
        return GateCounts(int(admitted), int(queued))

    async def throttle(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve the next start slot of throttle ``key``: when the start may begin."""
        args = [repr(now), repr(interval), str(burst)]
        return float(_text(await self._run(_THROTTLE, [keys.throttle_key(self._ns, key)], args)))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = ["RedisGates"]
