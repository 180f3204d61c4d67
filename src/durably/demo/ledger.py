"""The demo's bookkeeping in the demo file: batches, the model provider's bill, and the
tools' own log of what they ran.

None of it is durably's own state: the provider and the tools write it, and the demo reads
it to tell (and prove) its story.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Literal

ToolOutcome = Literal["ran", "failed"]

_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)


def _statements() -> dict[str, str]:
    text = (files("durably.demo") / "ledger.sql").read_text(encoding="utf-8")
    parts = _NAME.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


_SQL = _statements()
_TABLES = ("create_batches", "create_bill", "create_tool_runs", "create_control")


@dataclass(frozen=True, slots=True)
class Origin:
    """Who asked: the batch, the run's tenant and workflow, the step, the worker process."""

    batch: int
    tenant: str
    workflow: str
    step: str
    worker: str


@dataclass(frozen=True, slots=True)
class Call:
    """One request to the simulated model; billed when ``billed_at`` is set."""

    tenant: str
    workflow: str
    step: str
    worker: str
    started_at: float
    billed_at: float | None
    input_tokens: int
    output_tokens: int
    cost_micros: int

    @property
    def billed(self) -> bool:
        """Whether the provider answered (and charged for) this call."""
        return self.billed_at is not None


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One attempt of a tool, as the tool itself noted it."""

    tenant: str
    workflow: str
    step: str
    tool: str
    outcome: str
    worker: str


class Ledger:
    """The demo tables, written through the SQLite `Database` durably's stores use."""

    def __init__(self, database: Any) -> None:
        self._db = database

    async def prepare(self) -> None:
        """Create the demo tables if missing (idempotent)."""

        def create(tx: Any) -> None:
            for name in _TABLES:
                tx.execute(_SQL[name])

        await self._db.transaction(create)

    async def earlier_batches(self) -> int:
        """How many demo batches this file already holds."""
        return int(await self._one(_SQL["count_batches"], ()))

    async def new_batch(self, now: float) -> int:
        """Number a new batch of runs (one more than the last)."""
        return int(await self._one(_SQL["new_batch"], (now,)))

    async def set_provider(self, *, answering: bool) -> None:
        """Let the provider answer calls, or stall every call until told to answer."""
        value = "answering" if answering else "stalled"
        await self._db.transaction(lambda tx: tx.execute(_SQL["set_provider"], (value,)))

    async def start_call(self, origin: Origin, now: float) -> int:
        """Note a request as sent (not yet billed); its id."""
        params = (origin.batch, origin.tenant, origin.workflow, origin.step, origin.worker, now)
        return int(await self._one(_SQL["start_call"], params))

    async def bill_call(
        self, call_id: int, *, now: float, input_tokens: int, output_tokens: int, cost_micros: int
    ) -> bool:
        """Bill the call if the provider is answering; False while it is stalled."""
        params = (now, input_tokens, output_tokens, cost_micros, call_id)
        count = await self._db.transaction(
            lambda tx: tx.execute(_SQL["bill_call"], params).rowcount
        )
        return bool(count)

    async def record_tool_run(
        self, origin: Origin, tool: str, outcome: ToolOutcome, now: float
    ) -> None:
        """Note that ``tool`` ran or failed for ``origin``."""
        params = (
            origin.batch,
            origin.tenant,
            origin.workflow,
            origin.step,
            tool,
            outcome,
            origin.worker,
            now,
        )
        await self._db.transaction(lambda tx: tx.execute(_SQL["record_tool_run"], params))

    async def calls(self, batch: int) -> list[Call]:
        """Every model request of the batch, in the order sent."""
        rows = await self._db.transaction(
            lambda tx: tx.all(_SQL["calls_of_batch"], (batch,)), write=False
        )
        return [
            Call(
                tenant=r[0],
                workflow=r[1],
                step=r[2],
                worker=r[3],
                started_at=r[4],
                billed_at=r[5],
                input_tokens=r[6] or 0,
                output_tokens=r[7] or 0,
                cost_micros=r[8] or 0,
            )
            for r in rows
        ]

    async def tool_runs(self, batch: int) -> list[ToolRun]:
        """Every tool attempt of the batch, in order."""
        rows = await self._db.transaction(
            lambda tx: tx.all(_SQL["tool_runs_of_batch"], (batch,)), write=False
        )
        return [ToolRun(*row) for row in rows]

    async def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        row = await self._db.transaction(lambda tx: tx.one(sql, params))
        return None if row is None else row[0]


__all__ = ["Call", "Ledger", "Origin", "ToolOutcome", "ToolRun"]
