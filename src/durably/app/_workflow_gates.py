"""`WorkflowGates`: what a workflow kind's concurrency and throttle make of its starts.

The options are ``concurrency=``, ``concurrency_key=`` and ``throttle=``; the store
applies them through the gates of `durably.stores.gates`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from durably.app._task_flow import flow_throttle, key_answer, key_function
from durably.stores.flow import Throttle, flow_limit
from durably.stores.gates import WorkflowGate, gate_name, gating
from durably.stores.workflows import DEFAULT_PRIORITY, Checkpointer
from durably.validation import identifier


@dataclass(frozen=True, slots=True)
class WorkflowGates:
    """A workflow kind's gate and rate, checked at registration."""

    kind: str
    concurrency: int | None = None
    key_of: Callable[..., object] | None = None
    throttle: Throttle | None = None

    @classmethod
    def of(
        cls, kind: str, concurrency: object, concurrency_key: object, throttle: object
    ) -> WorkflowGates:
        """The flow of workflow kind ``kind``, its options checked.

        Raises `InvalidInputError` naming a bad option: a limit that is no int from 1
        up, a ``concurrency_key`` that is not callable or comes without ``concurrency``,
        a ``throttle`` that is no `Throttle`.
        """
        if concurrency is not None:
            flow_limit(concurrency, "concurrency")
        key_of = key_function(
            concurrency_key,
            "concurrency_key",
            "workflow",
            needs=None if concurrency is not None else "concurrency= (the limit per key)",
        )
        return cls(
            kind,
            concurrency if isinstance(concurrency, int) else None,
            key_of,
            flow_throttle(throttle),
        )

    def gate_name(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """The gate a start with these arguments goes through (None: no limit).

        Raises `InvalidInputError` as the key function fails, before any I/O.
        """
        if self.concurrency is None:
            return None
        if self.key_of is None:
            return gate_name(self.kind)
        key = key_answer(self.key_of, args, kwargs, f"workflow {self.kind!r}", "concurrency_key")
        return identifier(gate_name(self.kind, key), "concurrency_key")

    def gate(self, name: object, priority: int = DEFAULT_PRIORITY) -> WorkflowGate | None:
        """The gate named ``name`` in a start record, with this kind's limit.

        For a start at ``priority``: its place in its tenant's line.
        """
        if self.concurrency is None or not isinstance(name, str):
            return None
        return WorkflowGate(name, self.concurrency, self.kind, priority)

    async def begins(self, checkpointer: Checkpointer[Any], now: float) -> float | None:
        """Under ``throttle=``, the slot a start at ``now`` reserves; None without one.

        The slot is when its body may begin, counted by the store across processes.
        """
        if self.throttle is None:
            return None
        store = gating(checkpointer, self.kind)
        return await store.throttle_start(
            self.kind, now, self.throttle.interval, self.throttle.burst
        )


__all__ = ["WorkflowGates"]
