"""The state-store conformance suite against the in-memory backing."""

from __future__ import annotations

import pytest

from durably.clock import Clock
from durably.memory.state import MemoryStateStore
from durably.stores.runs import Scrubber, StateStore
from durably.testing.state import StateStoreConformance, StateStoreFactory


class TestMemoryStateStore(StateStoreConformance):
    @pytest.fixture
    def state_store_factory(self) -> StateStoreFactory:
        async def make(clock: Clock, scrub: Scrubber | None = None) -> StateStore:
            return MemoryStateStore(clock, scrub=scrub)

        return make
