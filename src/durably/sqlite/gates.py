"""`BoundSqliteGates`: the SQLite checkpointer's workflow gates (`durably.stores.gates`)."""

from __future__ import annotations

from collections.abc import Callable

from durably.sqlite.connection import Transaction
from durably.sqlite.statements import load_statements
from durably.stores.gates import GateCounts, WorkflowGate, throttled_until

_SQL = load_statements("gates.sql")
QUEUED, HELD, FREE = "queued", "held", "free"

Admitted = Callable[[str, str, str, int], None]
"""Called for each workflow a gate admits from its line: (workflow, tenant, namespace,
priority)."""


class BoundSqliteGates:
    """The gates' operations inside an open `Transaction`: the checkpointer calls them in
    the write that moves a gated workflow, so a slot and its next holder move together."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    def admit(self, workflow: str, tenant: str, gate: WorkflowGate, admitted: Admitted) -> bool:
        """Take ``workflow`` (first start) through ``gate``; True when it is queued. A
        limit raised since the last start first admits from the line up to it."""
        params = {"gate": gate.name, "workflow": workflow, "tenant": tenant}
        self._tx.execute(_SQL["set_limit"], {**params, "limit": gate.limit})
        self._admit_next(gate.name, admitted)
        row = self._tx.row(_SQL["gate"], params)
        room = row["admitted"] < row["max_admitted"]
        queued = not room or self._tx.one(_SQL["next_in_line"], params) is not None
        state = QUEUED if queued else HELD
        mark = {**params, "namespace": gate.namespace, "state": state, "priority": gate.priority}
        self._tx.execute(_SQL["mark"], mark)
        if not queued:
            self._serve(gate.name, tenant)
        return queued

    def queued(self, workflow: str) -> bool:
        """Whether ``workflow`` waits in a gate's line."""
        row = self._tx.one(_SQL["marked"], {"workflow": workflow})
        return row is not None and row["state"] == QUEUED

    def moved(self, workflow: str, finished: bool, admitted: Admitted) -> None:
        """``workflow``'s status now says ``finished`` (or not): a finished one frees its
        slot (or leaves the line), and the line's next take it; an unfinished one that
        held none takes one (a resume, even past the limit)."""
        row = self._tx.one(_SQL["marked"], {"workflow": workflow})
        if row is None:
            return
        gate, state = row["gate"], row["state"]
        if finished:
            if state == FREE:
                return
            self._tx.execute(_SQL["move_mark"], {"workflow": workflow, "state": FREE})
            if state == HELD:
                self._tx.execute(_SQL["move_admitted"], {"gate": gate, "delta": -1})
                self._admit_next(gate, admitted)
        elif state != HELD:
            self._tx.execute(_SQL["move_mark"], {"workflow": workflow, "state": HELD})
            self._tx.execute(_SQL["move_admitted"], {"gate": gate, "delta": 1})

    def forget(self, workflow: str, admitted: Admitted) -> None:
        """``workflow`` was deleted: its slot or its place in line goes with it."""
        self.moved(workflow, True, admitted)
        self._tx.execute(_SQL["unmark"], {"workflow": workflow})

    def rerank(self, workflow: str, gate: str, priority: int) -> bool:
        """Move ``workflow``, queued in ``gate``'s line, to ``priority``'s place in its
        tenant's line; False when it is not queued there."""
        params = {"workflow": workflow, "gate": gate, "priority": priority}
        return bool(self._tx.execute(_SQL["rerank"], params).rowcount)

    def counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        row = self._tx.one(_SQL["gate"], {"gate": gate})
        if row is None:
            return GateCounts()
        return GateCounts(row["admitted"], self._tx.row(_SQL["queued"], {"gate": gate})[0])

    def throttle(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve the next start slot of throttle ``key``: when the start may begin."""
        row = self._tx.one(_SQL["throttle"], {"key": key})
        begins, tat = throttled_until(None if row is None else row["tat"], now, interval, burst)
        self._tx.execute(_SQL["set_throttle"], {"key": key, "tat": tat})
        return begins

    def _admit_next(self, gate: str, admitted: Admitted) -> None:
        row = self._tx.row(_SQL["gate"], {"gate": gate})
        room = row["max_admitted"] - row["admitted"]
        for _ in range(max(room, 0)):
            head = self._tx.one(_SQL["next_in_line"], {"gate": gate})
            if head is None:
                return
            self._tx.execute(_SQL["move_mark"], {"workflow": head["workflow"], "state": HELD})
            self._serve(gate, head["tenant"])
            admitted(head["workflow"], head["tenant"], head["namespace"], head["priority"])

    def _serve(self, gate: str, tenant: str) -> None:
        turn = self._tx.row(_SQL["serve"], {"gate": gate})[0]
        self._tx.execute(_SQL["take_turn"], {"gate": gate, "tenant": tenant, "turn": turn})


__all__ = ["Admitted", "BoundSqliteGates"]
