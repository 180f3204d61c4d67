"""Fixtures and builders shared by the `StateStoreConformance` cases."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Protocol

import pytest

from durably.clock import Clock, ManualClock
from durably.stores.runs import RunRecord, Scrubber, StateStore


class StateStoreFactory(Protocol):
    """Makes a fresh state store on ``clock``, passing ``scrub`` to its ``scrub=``."""

    def __call__(self, clock: Clock, scrub: Scrubber | None = None) -> Awaitable[StateStore]:
        """A new store over the backing under test."""
        ...


START = 1_000_000.0


def unique(prefix: str) -> str:
    """A fresh id, so cases never collide even on a shared namespace."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def new_run(tenant: str, run_id: str | None = None, **fields: object) -> RunRecord:
    """A never-stored run of ``tenant`` (version 0)."""
    values: dict[str, object] = {"agent_name": "agent", **fields}
    return RunRecord(run_id=unique("run") if run_id is None else run_id, tenant=tenant, **values)


class StateFixtures:
    """The fixtures every state case uses; the subclass provides ``state_store_factory``."""

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock(START)

    @pytest.fixture
    async def state_store(
        self, state_store_factory: StateStoreFactory, clock: ManualClock
    ) -> StateStore:
        return await state_store_factory(clock)

    @pytest.fixture
    def tenant(self) -> str:
        return unique("tenant")


__all__ = ["START", "StateFixtures", "StateStoreFactory", "new_run", "unique"]
