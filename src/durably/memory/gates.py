"""`MemoryGates`: the memory checkpointer's workflow gates (`durably.stores.gates`)."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from itertools import count

from durably.stores.gates import GateCounts, GateLine, WorkflowGate, throttled_until

QUEUED, HELD, FREE = "queued", "held", "free"

Admitted = Callable[[str, str, str, int], None]
"""Called for each workflow a gate admits from its line: (workflow, tenant, namespace,
priority)."""


class MemoryGates:
    """Each gated workflow's place (queued, holding a slot, or finished) and each gate's
    line; every call runs with no await, inside the checkpointer write that moves it."""

    def __init__(self) -> None:
        self._marks: dict[str, tuple[str, str]] = {}  # workflow -> (gate, state)
        self._lines: dict[str, GateLine] = {}
        self._order = count(1)
        self._throttles: dict[str, float] = {}

    def admit(self, workflow: str, tenant: str, gate: WorkflowGate, admitted: Admitted) -> bool:
        """Take ``workflow`` (first start) through ``gate``; True when it is queued. A
        limit raised since the last start first admits from the line up to it."""
        line = self._lines.setdefault(gate.name, GateLine(gate.limit or 1))
        if gate.limit is not None:
            line.limit = gate.limit  # the code deployed now says how many
        self._admit_next(gate.name, line, admitted)
        if line.admitted < line.limit and line.next_tenant() is None:
            line.admitted += 1
            line.serve(tenant)
            self._marks[workflow] = (gate.name, HELD)
            return False
        entry = (-gate.priority, next(self._order), workflow, gate.namespace)
        bisect.insort(line.queued.setdefault(tenant, []), entry)
        self._marks[workflow] = (gate.name, QUEUED)
        return True

    def knows(self, workflow: str) -> bool:
        """Whether ``workflow`` went through a gate."""
        return workflow in self._marks

    def queued(self, workflow: str) -> bool:
        """Whether ``workflow`` waits in a gate's line."""
        mark = self._marks.get(workflow)
        return mark is not None and mark[1] == QUEUED

    def moved(self, workflow: str, finished: bool, admitted: Admitted) -> None:
        """``workflow``'s status now says ``finished`` (or not): a finished one frees its
        slot (or leaves the line), and the line's next take it; an unfinished one that
        held none takes one (a resume, even past the limit)."""
        mark = self._marks.get(workflow)
        if mark is None:
            return
        gate, state = mark
        line = self._lines[gate]
        if finished:
            if state == FREE:
                return
            self._marks[workflow] = (gate, FREE)
            if state == QUEUED:
                self._leave(line, workflow)
                return
            line.admitted -= 1
            self._admit_next(gate, line, admitted)
        elif state != HELD:
            if state == QUEUED:
                self._leave(line, workflow)
            self._marks[workflow] = (gate, HELD)
            line.admitted += 1

    def forget(self, workflow: str, admitted: Admitted) -> None:
        """``workflow`` was deleted: its slot or its place in line goes with it."""
        mark = self._marks.get(workflow)
        if mark is not None:
            self.moved(workflow, True, admitted)
            del self._marks[workflow]

    def rerank(self, workflow: str, gate: str, priority: int) -> bool:
        """Move ``workflow``, queued in ``gate``'s line, to ``priority``'s place in its
        tenant's line (its order queued kept); False when it is not queued there."""
        if self._marks.get(workflow) != (gate, QUEUED):
            return False
        for queue in self._lines[gate].queued.values():
            for n, (_, order, queued, namespace) in enumerate(queue):
                if queued == workflow:
                    del queue[n]
                    bisect.insort(queue, (-priority, order, workflow, namespace))
                    return True
        return False

    def counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        line = self._lines.get(gate)
        if line is None:
            return GateCounts()
        return GateCounts(line.admitted, sum(len(queue) for queue in line.queued.values()))

    def throttle(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve the next start slot of throttle ``key``: when the start may begin."""
        begins, self._throttles[key] = throttled_until(
            self._throttles.get(key), now, interval, burst
        )
        return begins

    def _admit_next(self, gate: str, line: GateLine, admitted: Admitted) -> None:
        while line.admitted < line.limit:
            tenant = line.next_tenant()
            if tenant is None:
                return
            rank, _, workflow, namespace = line.queued[tenant].pop(0)
            if not line.queued[tenant]:
                del line.queued[tenant]
            line.admitted += 1
            line.serve(tenant)
            self._marks[workflow] = (gate, HELD)
            admitted(workflow, tenant, namespace, -rank)

    def _leave(self, line: GateLine, workflow: str) -> None:
        for tenant, queue in line.queued.items():
            kept = [entry for entry in queue if entry[2] != workflow]
            if len(kept) != len(queue):
                if kept:
                    line.queued[tenant] = kept
                else:
                    del line.queued[tenant]
                return


__all__ = ["Admitted", "MemoryGates"]
