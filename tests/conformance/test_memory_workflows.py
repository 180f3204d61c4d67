"""The workflow conformance suites against the in-memory backing."""

from __future__ import annotations

from typing import Any

import pytest

from durably.memory.checkpointer import MemoryCheckpointer
from durably.memory.effects import MemoryEffectKit
from durably.testing.checkpointer import CheckpointerConformance, CheckpointerFactory
from durably.workflows import Checkpointer


@pytest.fixture
def effect_kit() -> MemoryEffectKit:
    return MemoryEffectKit()


@pytest.fixture
def checkpointer_factory(effect_kit: MemoryEffectKit) -> CheckpointerFactory:
    async def make() -> Checkpointer[Any]:
        return effect_kit.watch(MemoryCheckpointer())

    return make


class TestMemoryCheckpointer(CheckpointerConformance):
    pass
