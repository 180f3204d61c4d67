"""The workflow conformance suites against the in-memory backing."""

from __future__ import annotations

from typing import Any

import pytest

from durably.memory import MemoryCheckpointer, MemoryDurable, MemoryEffectKit, MemoryScheduler
from durably.stores.workflows import Checkpointer, Durable, Scheduler
from durably.testing import CheckpointerConformance, DurableConformance, SchedulerConformance
from durably.testing.checkpointer import CheckpointerFactory
from durably.testing.durable import DurableFactory
from durably.testing.scheduler import SchedulerFactory


@pytest.fixture
def effect_kit() -> MemoryEffectKit:
    return MemoryEffectKit()


@pytest.fixture
def checkpointer_factory(effect_kit: MemoryEffectKit) -> CheckpointerFactory:
    async def make() -> Checkpointer[Any]:
        return effect_kit.watch(MemoryCheckpointer())

    return make


@pytest.fixture
def scheduler_factory() -> SchedulerFactory:
    async def make(lease: float) -> Scheduler:
        return MemoryScheduler(lease=lease)

    return make


@pytest.fixture
def durable_factory() -> DurableFactory:
    async def make() -> Durable[Any]:
        return MemoryDurable(MemoryCheckpointer(), MemoryScheduler())

    return make


class TestMemoryCheckpointer(CheckpointerConformance):
    pass


class TestMemoryScheduler(SchedulerConformance):
    pass


class TestMemoryDurable(DurableConformance):
    pass
