"""Run totals per tenant: how many runs a tenant has in each state, and their usage and cost
added up, kept by the store with every write that changes them (`StateStore.tenant_totals`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from pydantic import BaseModel, ConfigDict, NonNegativeInt

from durably.errors import InvalidInputError
from durably.stores.runs import USAGE_FIELDS, RunRecord, RunState, Usage
from durably.validation import identifier, listing_page

TOTALS_PAGE = 1000
"""Tenants one `StateStore.tenant_totals` call answers at most."""

TOTALS_COLUMNS: tuple[str, ...] = ("runs", *USAGE_FIELDS, "cost_micros")
"""What each tenant's totals add up per run state, in the order the SQL backings store
and return them: the runs, each `Usage` field, the cost."""


class RunTotals(BaseModel):
    """One tenant's stored runs added up: how many in each state, their usage and cost.

    Exact: the store updates them with every write of a run (a patch, a put, a delete),
    so a deleted run no longer counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tenant: str
    by_state: dict[RunState, NonNegativeInt]
    usage: Usage = Usage()
    cost_micros: NonNegativeInt = 0

    @property
    def runs(self) -> int:
        """How many runs the tenant has, in every state."""
        return sum(self.by_state.values())


def totals_request(
    tenants: Sequence[str] | None, after: str | None, limit: int
) -> list[str] | None:
    """The tenants a `StateStore.tenant_totals` call names (sorted, each once; None for
    every tenant), once ``after`` and ``limit`` are usable (1 to `TOTALS_PAGE`) and every name is
    a usable id: `InvalidInputError` before any I/O otherwise, naming the argument."""
    listing_page(after, limit)
    if limit > TOTALS_PAGE:
        raise InvalidInputError(f"limit must be at most {TOTALS_PAGE}, got {limit}")
    if tenants is None:
        return None
    if isinstance(tenants, str):
        raise InvalidInputError("tenants must be a list of tenant names, not one string")
    named = sorted({identifier(tenant, "tenants") for tenant in tenants})
    if len(named) > limit:
        raise InvalidInputError(f"tenants names {len(named)} tenants, over limit={limit}")
    if after is not None:
        raise InvalidInputError("after pages the listing of every tenant: pass no tenants")
    return named


def summed(rows: Iterable[Sequence[object]]) -> list[RunTotals]:
    """`RunTotals` from rows of (tenant, state, then `TOTALS_COLUMNS`), several rows of
    one tenant and state added together, tenants in code point order; states with no run
    (and tenants with none at all) are left out."""
    sums: dict[str, dict[str, list[int]]] = {}
    for tenant, state, *amounts in rows:
        by_state = sums.setdefault(str(tenant), {})
        row = by_state.setdefault(str(state), [0] * len(TOTALS_COLUMNS))
        for place, amount in enumerate(amounts):
            row[place] += _integer(amount)
    totals: list[RunTotals] = []
    for tenant in sorted(sums):
        kept = {state: row for state, row in sums[tenant].items() if row[0] > 0}
        if not kept:
            continue
        added = [sum(column) for column in zip(*kept.values(), strict=True)]
        totals.append(
            RunTotals(
                tenant=tenant,
                by_state={RunState(state): row[0] for state, row in sorted(kept.items())},
                usage=Usage(**dict(zip(USAGE_FIELDS, added[1:-1], strict=True))),
                cost_micros=added[-1],
            )
        )
    return totals


def _integer(amount: object) -> int:
    """A stored total as an int: SQL integers, PostgreSQL numerics, Redis replies."""
    if isinstance(amount, int | float | Decimal | bytes | str):
        return int(amount)
    raise TypeError(f"a total must be a number, got {type(amount).__name__}")


def amounts(record: RunRecord) -> list[int]:
    """What ``record`` adds to its tenant's totals, in `TOTALS_COLUMNS` order."""
    return [1, *(getattr(record.usage, name) for name in USAGE_FIELDS), record.cost_micros]


@dataclass
class Tally:
    """Totals kept in process memory (the memory store's): per tenant and state, the
    `TOTALS_COLUMNS` amounts."""

    rows: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def count(self, record: RunRecord, sign: int) -> None:
        """Add ``record`` (``sign`` 1) or take it out (-1)."""
        row = self.rows.setdefault((record.tenant, record.state.value), [0] * len(TOTALS_COLUMNS))
        for place, amount in enumerate(amounts(record)):
            row[place] += sign * amount

    def read(self, tenants: list[str] | None, after: str | None, limit: int) -> list[RunTotals]:
        """The totals of ``tenants``, or (none named) of the first ``limit`` tenants with
        runs after ``after``."""
        rows = [
            (tenant, state, *row)
            for (tenant, state), row in self.rows.items()
            if (tenant in tenants if tenants is not None else after is None or tenant > after)
        ]
        return summed(rows)[:limit]


__all__ = [
    "TOTALS_COLUMNS",
    "TOTALS_PAGE",
    "RunTotals",
    "Tally",
    "amounts",
    "summed",
    "totals_request",
]
